"""samsa as the broker of other projects' integration tests.

    import samsa.testing
    with samsa.testing.Broker() as b:           # started in a fraction of a second
        produce_to(b.bootstrap_servers)
        b.inject_errors("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)

- ``Broker(**configs)``, ``Cluster(brokers=3, **configs)``: broker.py
- the faults a test may inject: faults.py (the admin endpoint: docs/testing.md)
- the pytest plugin (fixtures ``samsa_broker``, ``samsa_broker_module``,
  ``samsa_broker_session``, ``samsa_cluster``, ``samsa_broker_factory``,
  ``samsa_cluster_factory``): plugin.py, loaded by the ``pytest11`` entry point or
  ``pytest_plugins = ["samsa.testing"]``
- ``samsa testing serve``: a broker for tests in other languages (tools/testing.py)
"""
from __future__ import annotations

from .broker import Broker, Cluster, ClusterBroker
from .faults import FaultsUnavailable


def _plugin_names() -> list[str]:
    # ``pytest_plugins = ["samsa.testing"]`` loads this module as a plugin, which
    # brings in the fixtures (plugin.py). Where the pytest11 entry point has loaded
    # plugin.py already (under the name "samsa"), naming that registration again
    # keeps pytest from registering the same module twice.
    from importlib.metadata import entry_points
    import os
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return ["samsa.testing.plugin"]
    found = [ep for ep in entry_points(group="pytest11", name="samsa")
             if ep.value == "samsa.testing.plugin"]
    return ["samsa"] if found else ["samsa.testing.plugin"]


pytest_plugins = _plugin_names()

__all__ = ["Broker", "Cluster", "ClusterBroker", "FaultsUnavailable"]
