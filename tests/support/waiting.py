"""The suite's one polling loop is the test kit's (samsa.testing.waiting)."""
from samsa.testing.waiting import wait_until, wait_until_async

__all__ = ["wait_until", "wait_until_async"]
