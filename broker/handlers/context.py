"""What a handler gets: the request header, its connection, and the broker's services."""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class RequestContext:
    header: Any            # protocol.messages.RequestHeader
    conn: Any              # broker.network.ConnectionContext
    broker: Any            # broker.server.BrokerServices

    @property
    def version(self) -> int:
        return self.header.api_version
