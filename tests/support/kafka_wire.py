"""The readiness probe and free ports are the test kit's (samsa.testing.wire): one implementation."""
from samsa.testing.wire import api_versions_v0_request, free_port, probe_api_versions, recv_exactly

__all__ = ["api_versions_v0_request", "free_port", "probe_api_versions", "recv_exactly"]
