"""Asking a test broker for faults: the Python side of its admin endpoint.

A broker started with ``samsa.testing.faults.enable=true`` (only with loopback
listeners) serves a small JSON API over HTTP on 127.0.0.1 at
``samsa.testing.faults.port`` (docs/testing.md describes it for other languages).
Broker, Cluster.node(i) and the fixtures' brokers carry these methods:

    b.inject_errors("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)   # next 3 Produce requests
    b.inject_errors("Fetch", "REQUEST_TIMED_OUT", topic="t", partition=0, client_id="app")
    b.delay(500)                          # every response 500 ms late ...
    b.delay(500, api="Produce")           # ... or one API's
    b.disconnect_after(2, api="Produce")  # the 3rd Produce from now: handled, then the connection closes
    b.refuse_connections(2.0)             # new connections closed at once for 2 s
    b.pause(); b.resume()                 # requests held unanswered, then answered
    b.move_leader("t", 0, to=2)           # (a cluster) leadership of t-0 to broker 2
    b.shrink_isr("t", 0, [1])             # the ISR of t-0 is [1]
    b.expire_member("group")              # the group coordinator expires a member's session
    b.clear_faults()                      # everything off (leader moves and expiries stay done)

APIs and errors go by Kafka's names (``Produce``, ``NOT_LEADER_OR_FOLLOWER``);
numbers work too. The broker logs every injection.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class FaultsUnavailable(RuntimeError):
    """The broker was started without fault injection."""


class FaultControl:
    """The fault methods, for anything that knows its broker's admin port."""

    def __init__(self, admin_host: str, admin_port: int | None):
        self.admin_host = admin_host
        self.admin_port = admin_port

    @property
    def admin_url(self) -> str:
        if self.admin_port is None:
            raise FaultsUnavailable("this broker was started with faults=False")
        return f"http://{self.admin_host}:{self.admin_port}"

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps({k: v for k, v in (body or {}).items() if v is not None}).encode()
        req = urllib.request.Request(self.admin_url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            try:
                detail = json.loads(detail)["error"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ValueError(f"the broker refused {path}: {detail}") from None

    def faults(self) -> Any:
        """What is injected now (the broker's view)."""
        with urllib.request.urlopen(self.admin_url + "/faults", timeout=30) as resp:
            return json.loads(resp.read())

    def inject_errors(self, api: str | int, error: str | int, count: int = 1, *,
                      topic: str | None = None, partition: int | None = None,
                      client_id: str | None = None) -> None:
        """The next ``count`` requests of ``api`` (matching the topic, partition and
        client id when given) are answered with ``error`` without being handled."""
        self._post("/faults/errors", {"api": api, "error": error, "count": count, "topic": topic,
                                      "partition": partition, "client_id": client_id})

    def delay(self, ms: int, api: str | int | None = None) -> None:
        """Add ``ms`` to every response (of ``api``, or all); delay(0) takes it off."""
        self._post("/faults/delay", {"api": api, "ms": ms})

    def disconnect_after(self, requests: int = 0, api: str | int | None = None, times: int = 1) -> None:
        """After ``requests`` more requests (of ``api``, or any), the next one is
        handled and its connection closed instead of answered; ``times`` times."""
        self._post("/faults/disconnect", {"after": requests, "api": api, "times": times})

    def refuse_connections(self, seconds: float) -> None:
        """New connections are closed on accept for ``seconds``."""
        self._post("/faults/refuse", {"seconds": seconds})

    def pause(self) -> None:
        """Stop answering: every request is held, unanswered, until resume()."""
        self._post("/faults/pause")

    def resume(self) -> None:
        self._post("/faults/resume")

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker ``to`` (one of the replicas) the partition's leader."""
        self._post("/faults/move-leader", {"topic": topic, "partition": partition, "to": to})

    def shrink_isr(self, topic: str, partition: int, isr: list[int]) -> None:
        """Set the partition's in-sync replicas to ``isr`` (the leader stays in it)."""
        self._post("/faults/shrink-isr", {"topic": topic, "partition": partition, "isr": isr})

    def expire_member(self, group: str, member_id: str | None = None) -> str:
        """Expire a member's session in ``group`` (any member when not named), as
        if its heartbeats had stopped; returns the member id expired."""
        return str(self._post("/faults/expire-member", {"group": group, "member_id": member_id})
                   ["member_id"])

    def clear_faults(self) -> None:
        self._post("/faults/clear")
