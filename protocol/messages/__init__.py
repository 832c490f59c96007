"""Sans-IO codecs for Kafka API messages, compiled from Apache Kafka's JSON schemas.

Public API (see /work/contracts.md):
    decode_request(frame) -> (RequestHeader, request)
    encode_response(hdr, resp, version=None) -> [parts]
    encode_request(hdr, req) -> bytes          (client side: tests, tools)
    decode_response(frame, api_key, api_version) -> (correlation_id, response)
    API_BY_KEY: {api_key: ApiSpec(key, name, min_version, max_version, request_cls, response_cls)}
and one class per message (ProduceRequest, FetchResponse, ...) with nested struct
classes as attributes (ProduceResponse.PartitionProduceResponse, ...).

The names load on first use (PEP 562): the classes come from generated.py, which
classgen.py writes from the schemas, and classgen must be able to import this
package's schema reader before generated.py exists or while it is out of date.
A checker reads the names from __init__.pyi (stubgen.py).
"""
from __future__ import annotations

from typing import Any

_API_NAMES = ("API_BY_KEY", "ApiSpec", "RequestHeader", "decode_request", "encode_response",
              "encode_request", "decode_response", "decode_body", "encode_body",
              "MESSAGE_CLASSES", "decode_request_header", "encode_request_header",
              "request_header_version", "response_header_version")


def _names() -> dict[str, Any]:
    from samsa.protocol.messages import api
    from samsa.protocol.messages.model import Message
    names: dict[str, Any] = {n: getattr(api, n) for n in _API_NAMES}
    names["Message"] = Message
    names.update(api.MESSAGE_CLASSES)
    names["__all__"] = [*_API_NAMES[:3], "Message", *_API_NAMES[3:], *sorted(api.MESSAGE_CLASSES)]
    return names


def __getattr__(name: str) -> Any:
    # Only public names load: `from samsa.protocol.messages import overlay` asks for a
    # submodule (lower case) here before it imports it, and must not load the classes.
    if name != "__all__" and not name[:1].isupper() and name not in _API_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    names = _names()
    globals().update(names)
    if name in names:
        return names[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_names()))
