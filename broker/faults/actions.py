"""One-off faults on the broker's state: the endpoint's routes that act at once.

- expire-member: the group coordinator ends a member's session now (this broker
  must coordinate the group);
- move-leader: the controller makes another replica the partition's leader, by
  Kafka's own means: the replica list reordered with that broker first (a
  reassignment that moves no data), then a preferred leader election (this broker
  must be the controller; a single embedded broker has no one to move to).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from samsa.protocol.errors import ErrorCode

from .rules import RuleError

log = logging.getLogger("broker.faults")

Action = Callable[[dict[str, Any]], Awaitable[Any]]
DECIDE_TIMEOUT_S = 15.0


def _str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise RuleError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _int(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RuleError(f"{key}: expected an integer >= 0, got {value!r}")
    return value


def fault_actions(broker: Any) -> dict[str, Action]:
    """The endpoint's routes that act on ``broker`` (a broker.server.Broker)."""

    async def expire_member(body: dict[str, Any]) -> Any:
        group = _str(body, "group")
        member_id = body.get("member_id")
        coordinator = broker.coordinator
        if coordinator is None:
            raise RuleError("the group coordinator has not started")
        expired = coordinator.expire_member(group, member_id)
        if expired is None:
            raise RuleError(f"no member {member_id or '(any)'} of group {group} on this broker's "
                            f"coordinator (broker {broker.cfg.broker_id})")
        log.info("fault: expired member %s of group %s (its session ended now)", expired, group)
        return {"member_id": expired}

    async def move_leader(body: dict[str, Any]) -> Any:
        topic, partition, to = _str(body, "topic"), _int(body, "partition"), _int(body, "to")
        controller = broker.controller
        if controller is None or not hasattr(controller, "reassign") or not getattr(controller, "active", False):
            raise RuleError(f"broker {broker.cfg.broker_id} is not the controller: ask the "
                            f"controller's endpoint (a single embedded broker has no other leader)")
        tp = (topic, partition)
        meta = broker.services.store.partition(topic, partition)
        if meta is None:
            raise RuleError(f"no partition {topic}-{partition}")
        replicas = list(meta.replicas)
        loop = asyncio.get_running_loop()
        if to not in replicas:
            raise RuleError(f"broker {to} is not a replica of {topic}-{partition} (replicas {replicas})")
        order = [to] + [r for r in replicas if r != to]
        if order != list(replicas):
            await loop.run_in_executor(None, controller.reassign, {tp: order}, DECIDE_TIMEOUT_S)
            deadline = time.monotonic() + DECIDE_TIMEOUT_S
            while tp in (controller.reassignments() or {}) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        answer = await loop.run_in_executor(None, controller.elect_leaders, [tp], False, DECIDE_TIMEOUT_S)
        code = (answer or {}).get(tp, ErrorCode.NONE)
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            raise RuleError(f"the election of {to} for {topic}-{partition} failed: {ErrorCode(code).name}")
        log.info("fault: moved the leadership of %s-%d to broker %d (replicas now %s)",
                 topic, partition, to, order)
        return {"topic": topic, "partition": partition, "leader": to, "replicas": order}

    async def shrink_isr(body: dict[str, Any]) -> Any:
        topic, partition = _str(body, "topic"), _int(body, "partition")
        isr = body.get("isr")
        if not isinstance(isr, list) or not all(isinstance(r, int) for r in isr):
            raise RuleError(f"isr: expected a list of broker ids, got {isr!r}")
        me = broker.cfg.broker_id
        replicas = broker.replicas
        leader = replicas.leader(topic, partition) if replicas is not None else None
        if leader is None:
            raise RuleError(f"broker {me} does not lead {topic}-{partition}: ask its leader's endpoint")
        if me not in isr:
            raise RuleError(f"the leader ({me}) stays in the ISR")
        wanted = tuple(r for r in leader.isr if r in isr)
        if not leader.force_isr(wanted):
            raise RuleError(f"an ISR change of {topic}-{partition} is being written: try again")
        replicas.propose_isr(leader, wanted)
        deadline = time.monotonic() + DECIDE_TIMEOUT_S
        while leader.isr != wanted and leader.pending_isr == wanted and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        log.info("fault: shrank the ISR of %s-%d to %s", topic, partition, list(leader.isr))
        return {"topic": topic, "partition": partition, "isr": list(leader.isr)}

    return {"/faults/expire-member": expire_member, "/faults/move-leader": move_leader,
            "/faults/shrink-isr": shrink_isr}
