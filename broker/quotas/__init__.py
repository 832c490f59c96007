"""Client quotas (Kafka's ClientQuotaManager): produce and fetch byte rates
and request handler time per user / client id, enforced with throttle time."""
from .enforcement import ClientQuotas, client_throttles
from .entities import QUOTA_KEYS, QuotaConfigs, QuotaMatch
from .manager import QuotaManager, QuotaWindow

__all__ = ["ClientQuotas", "QuotaConfigs", "QuotaManager", "QuotaMatch", "QuotaWindow",
           "QUOTA_KEYS", "client_throttles"]
