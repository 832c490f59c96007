"""Sans-IO codecs for Kafka API messages, compiled from Apache Kafka's JSON schemas.

Public API (see /work/contracts.md):
    decode_request(frame) -> (RequestHeader, request)
    encode_response(hdr, resp, version=None) -> [parts]
    encode_request(hdr, req) -> bytes          (client side: tests, tools)
    decode_response(frame, api_key, api_version) -> (correlation_id, response)
    API_BY_KEY: {api_key: ApiSpec(key, name, min_version, max_version, request_cls, response_cls)}
and one class per message (ProduceRequest, FetchResponse, ...) with nested struct
classes as attributes (ProduceResponse.PartitionProduceResponse, ...).
"""
from samsa.protocol.messages.api import (API_BY_KEY, MESSAGE_CLASSES, ApiSpec, RequestHeader,
                                   decode_body, decode_request, decode_request_header,
                                   decode_response, encode_body, encode_request,
                                   encode_request_header, encode_response,
                                   request_header_version, response_header_version)
from samsa.protocol.messages.model import Message

# One class per message, compiled at import: no source defines them, so a checker reads
# them from __init__.pyi, rendered from the same specs (python -m samsa.protocol.messages.stubgen).
globals().update(MESSAGE_CLASSES)

__all__ = ["API_BY_KEY", "ApiSpec", "RequestHeader", "Message", "decode_request",
           "encode_response", "encode_request", "decode_response", "decode_body",
           "encode_body", "MESSAGE_CLASSES", "decode_request_header", "encode_request_header",
           "request_header_version", "response_header_version"]
__all__.extend(sorted(MESSAGE_CLASSES))
