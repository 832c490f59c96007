"""The fault-injection endpoint: a small JSON-over-HTTP API on 127.0.0.1.

Runs on the broker's main loop. Every route is a POST with a JSON object body
(GET /faults: the rules in force); answers are JSON, 400 with {"error": why} for a
request it cannot apply. docs/testing.md lists the routes for other languages.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable

from .injector import FaultInjector
from .rules import DisconnectRule, ErrorRule, RuleError, api_key, api_name, error_code
from .partitions import PARTITIONED
from .responses import can_answer

log = logging.getLogger("broker.faults")

Action = Callable[[dict[str, Any]], Awaitable[Any]]
MAX_BODY = 64 * 1024


def _int(body: dict[str, Any], key: str, default: int | None = None, minimum: int = 0) -> int:
    value = body.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise RuleError(f"{key}: expected a number >= {minimum}, got {value!r}")
    return int(value)


class FaultEndpoint:
    def __init__(self, injector: FaultInjector, actions: dict[str, Action] | None = None) -> None:
        self.injector = injector
        self.rules = injector.rules
        self.routes: dict[str, Action] = {
            "/faults/errors": self._errors, "/faults/delay": self._delay,
            "/faults/disconnect": self._disconnect, "/faults/refuse": self._refuse,
            "/faults/pause": self._pause, "/faults/resume": self._resume,
            "/faults/clear": self._clear, **(actions or {})}
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.warning("fault injection is ON (samsa.testing.faults.enable): endpoint on "
                    "http://127.0.0.1:%d; this broker is for tests only", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ------------------------------------------------------------ HTTP

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, answer = await self._answer(reader)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            status, answer = 400, {"error": f"bad HTTP request: {e}"}
        except Exception as e:
            # An action that failed inside the broker (a leader move the controller
            # refused, ...): the caller gets the reason instead of a connection left open.
            log.exception("fault endpoint: %s failed", type(e).__name__)
            status, answer = 500, {"error": f"{type(e).__name__}: {e}"}
        body = json.dumps(answer).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        try:
            await writer.drain()
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, Any]:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) < 2:
            raise ValueError("no request line")
        method, path = request_line[0], request_line[1].split("?")[0].rstrip("/")
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length > MAX_BODY:
            raise ValueError("body too large")
        raw = await reader.readexactly(length) if length else b""
        if method == "GET" and path == "/faults":
            return 200, self.rules.describe()
        route = self.routes.get(path)
        if route is None or method != "POST":
            return 404, {"error": f"no route {method} {path}; POST one of {sorted(self.routes)}, "
                                  f"or GET /faults"}
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise RuleError("the body must be a JSON object")
            return 200, await route(body)
        except RuleError as e:
            return 400, {"error": str(e)}
        except json.JSONDecodeError as e:
            return 400, {"error": f"the body is not JSON: {e}"}

    # ------------------------------------------------------------ rules

    async def _errors(self, body: dict[str, Any]) -> Any:
        api = api_key(body.get("api"))
        if not can_answer(api):
            raise RuleError(f"errors cannot be injected into {api_name(api)} responses")
        partition = body.get("partition")
        if partition is not None and body.get("topic") is None:
            raise RuleError("partition needs topic")
        if body.get("topic") is not None and api not in PARTITIONED:
            raise RuleError(f"{api_name(api)} requests name no partitions: a topic scope works "
                            f"for {', '.join(sorted(api_name(a) for a in PARTITIONED))}")
        rule = ErrorRule(api, error_code(body.get("error")), _int(body, "count", 1, 1),
                         body.get("topic"), None if partition is None else _int(body, "partition"),
                         body.get("client_id"))
        with self.rules.lock:
            self.rules.errors.append(rule)
        log.info("fault set: the next %d %s request(s)%s answered %s", rule.remaining,
                 api_name(api), _scope(rule), rule.error.name)
        return rule.describe()

    async def _delay(self, body: dict[str, Any]) -> Any:
        api = None if body.get("api") is None else api_key(body["api"])
        ms = _int(body, "ms")
        with self.rules.lock:
            if ms:
                self.rules.delays[api] = ms / 1000
            else:
                self.rules.delays.pop(api, None)
        log.info("fault set: %s answered %d ms late", "every response" if api is None
                 else f"{api_name(api)} responses", ms)
        return self.rules.describe()

    async def _disconnect(self, body: dict[str, Any]) -> Any:
        api = None if body.get("api") is None else api_key(body["api"])
        after = _int(body, "after", 0)
        rule = DisconnectRule(api, after, after, _int(body, "times", 1, 1))
        with self.rules.lock:
            self.rules.disconnects.append(rule)
        log.info("fault set: after %d more %s request(s), the next one's connection closes "
                 "instead of an answer (%d time(s))", after,
                 "" if api is None else api_name(api), rule.times)
        return rule.describe()

    async def _refuse(self, body: dict[str, Any]) -> Any:
        seconds = body.get("seconds")
        if not isinstance(seconds, (int, float)) or seconds < 0:
            raise RuleError(f"seconds: expected a number >= 0, got {seconds!r}")
        self.rules.refuse_until = time.monotonic() + seconds
        log.info("fault set: new connections refused for %.3f s", seconds)
        return self.rules.describe()

    async def _pause(self, body: dict[str, Any]) -> Any:
        self.rules.paused = True
        log.info("fault set: paused: requests are held unanswered until resumed")
        return self.rules.describe()

    async def _resume(self, body: dict[str, Any]) -> Any:
        self.rules.paused = False
        log.info("fault cleared: resumed: held requests are answered")
        return self.rules.describe()

    async def _clear(self, body: dict[str, Any]) -> Any:
        self.rules.clear()
        log.info("faults cleared")
        return self.rules.describe()


def _scope(rule: ErrorRule) -> str:
    parts = []
    if rule.topic is not None:
        parts.append(f"on {rule.topic}" + ("" if rule.partition is None else f"-{rule.partition}"))
    if rule.client_id is not None:
        parts.append(f"from client {rule.client_id}")
    return (" " + " ".join(parts)) if parts else ""
