"""The suite's process harness is the test kit's (samsa.testing.process): one implementation."""
from samsa.testing.process import ManagedProcess, ProcessStartError

__all__ = ["ManagedProcess", "ProcessStartError"]
