"""What a test has asked a broker to inject: the rules, and who matches them.

Processor threads read the rules on every request and use them up (a count of
requests); the endpoint on the main loop changes them. One lock guards all of it:
test brokers only, so a lock per request is fine.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import API_BY_KEY

_API_BY_NAME = {spec.name.lower(): key for key, spec in API_BY_KEY.items()}


class RuleError(ValueError):
    """A rule the endpoint refuses (400), with the reason."""


def api_key(value: object) -> int:
    """An API by Kafka's name (``Produce``, ``produce``) or number."""
    if isinstance(value, int) and value in API_BY_KEY:
        return value
    if isinstance(value, str):
        if value.isdigit() and int(value) in API_BY_KEY:
            return int(value)
        key = _API_BY_NAME.get(value.replace("_", "").lower())
        if key is not None:
            return key
    raise RuleError(f"unknown API {value!r}: one of Kafka's API names "
                    f"({', '.join(sorted(s.name for s in API_BY_KEY.values()))})")


def error_code(value: object) -> ErrorCode:
    """An error by Kafka's name (``NOT_LEADER_OR_FOLLOWER``) or number."""
    try:
        if isinstance(value, int):
            return ErrorCode(value)
        if isinstance(value, str):
            return ErrorCode(int(value)) if value.lstrip("-").isdigit() else ErrorCode[value.upper()]
    except (KeyError, ValueError):
        pass
    raise RuleError(f"unknown error {value!r}: one of Kafka's error names "
                    f"(NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...) or codes")


def api_name(key: int) -> str:
    return API_BY_KEY[key].name


@dataclasses.dataclass
class ErrorRule:
    api: int
    error: ErrorCode
    remaining: int
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"api": api_name(self.api), "error": self.error.name, "remaining": self.remaining,
                "topic": self.topic, "partition": self.partition, "client_id": self.client_id}


@dataclasses.dataclass
class DisconnectRule:
    api: int | None
    skip: int      # matching requests still to answer before the next disconnect
    after: int     # the skip count again after each disconnect
    times: int     # disconnects left

    def describe(self) -> dict[str, Any]:
        return {"api": None if self.api is None else api_name(self.api), "after": self.skip,
                "times": self.times}


class FaultRules:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[ErrorRule] = []
        self.delays: dict[int | None, float] = {}  # API (None: every API) -> seconds
        self.disconnects: list[DisconnectRule] = []
        self.refuse_until = 0.0   # time.monotonic() until which connections are refused
        self.paused = False

    def any_request_rule(self) -> bool:
        """Whether a request needs looking at (errors, delays, disconnects, a pause)."""
        return bool(self.errors or self.delays or self.disconnects or self.paused)

    def take_error(self, api: int, client_id: str | None, touches: Any) -> ErrorRule | None:
        """The first error rule for this request, its count used up by one.
        ``touches(topic, partition)`` says whether the request carries that
        topic (partition None: any of its partitions)."""
        with self.lock:
            for rule in self.errors:
                if rule.api != api or (rule.client_id is not None and rule.client_id != client_id):
                    continue
                if rule.topic is not None and not touches(rule.topic, rule.partition):
                    continue
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.errors.remove(rule)
                return rule
        return None

    def delay_for(self, api: int) -> float:
        with self.lock:
            return self.delays.get(api, 0.0) + self.delays.get(None, 0.0)

    def take_disconnect(self, api: int) -> bool:
        """Whether this request's connection closes instead of being answered."""
        with self.lock:
            for rule in self.disconnects:
                if rule.api is not None and rule.api != api:
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    return False
                rule.times -= 1
                rule.skip = rule.after
                if rule.times <= 0:
                    self.disconnects.remove(rule)
                return True
        return False

    def refusing(self) -> bool:
        return self.refuse_until > time.monotonic()

    def clear(self) -> None:
        with self.lock:
            self.errors.clear()
            self.delays.clear()
            self.disconnects.clear()
            self.refuse_until = 0.0
            self.paused = False

    def describe(self) -> dict[str, Any]:
        with self.lock:
            return {"errors": [r.describe() for r in self.errors],
                    "delays_ms": {("*" if k is None else api_name(k)): round(v * 1000)
                                  for k, v in self.delays.items()},
                    "disconnects": [r.describe() for r in self.disconnects],
                    "refusing_for_s": max(0.0, round(self.refuse_until - time.monotonic(), 3)),
                    "paused": self.paused}
