"""Client quotas (Kafka's ClientQuotaManager): produce and fetch byte rates,
request handler time and controller mutations per user / client id, enforced
with throttle time (and, for mutations, THROTTLING_QUOTA_EXCEEDED)."""
from .enforcement import ClientQuotas, client_throttles
from .entities import QUOTA_KEYS, QuotaConfigs, QuotaMatch
from .manager import MutationQuotaManager, QuotaManager, QuotaWindow

__all__ = ["ClientQuotas", "MutationQuotaManager", "QuotaConfigs", "QuotaManager", "QuotaMatch",
           "QuotaWindow", "QUOTA_KEYS", "client_throttles"]
