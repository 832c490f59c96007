"""One-off faults on the broker's state: routes of the endpoint that act at once."""
from __future__ import annotations

from typing import Any


def fault_actions(broker: Any) -> dict[str, Any]:
    """The endpoint's routes that act on ``broker`` (a broker.server.Broker)."""
    return {}
