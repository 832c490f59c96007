"""The broker's network layer: acceptor, processor threads, framing, sendfile.

Independent of Kafka message semantics: it moves 4-byte size-prefixed frames
to an async handler and writes the handler's response parts back in request
order. See server.py (acceptor, lifecycle), processor.py (threads/loops) and
connection.py (framing, ordering, sendfile, backpressure).
"""

from samsa.broker.network.context import ConnectionContext
from samsa.broker.network.server import NetworkServer

__all__ = ["NetworkServer", "ConnectionContext"]
