"""Fault injection for test brokers (samsa.testing.faults.enable; issue 28).

Off unless that key is set, which the config refuses with a listener beyond
loopback. When on, every request passes through ``FaultInjector.wrap`` (the one
hook: the network is given the wrapped dispatcher instead of the dispatcher, so a
broker without faults pays nothing per request), the acceptor asks ``refusing()``,
and a small HTTP endpoint on 127.0.0.1 (endpoint.py, documented in
docs/testing.md) changes the rules. Each injection is logged on "broker.faults".

- rules.py: what is injected (pure state, thread-safe: processors share it)
- responses.py: an API's answer carrying an error code for every part of a request
- injector.py: applying the rules to a request
- actions.py: one-off faults on the broker's state (leader moves, ISR, group members)
- endpoint.py: the HTTP endpoint
"""
from .injector import FaultInjector

__all__ = ["FaultInjector"]
