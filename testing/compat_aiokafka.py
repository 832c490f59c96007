"""Run aiokafka's integration suite (its tests/) against a samsa test broker.

aiokafka's conftest starts Kafka in Docker: the session fixture ``kafka_server``
runs the image named by ``--docker-image`` (every integration test is skipped
without one) and yields (host, port, ssl port, SASL plaintext port, SASL SSL port,
container); ``setup_test_class`` puts those, and ``kafka_version`` (the image tag's
last ``_`` part), on each test class; ``acl_manager`` runs kafka-acls.sh in the
container and ``kerberos_utils`` makes a keytab with ktutil. There is no option for
an external broker, and a plugin's fixture cannot override a conftest's, so
``-p samsa.testing.compat_aiokafka`` answers those fixtures' setup itself
(pytest_fixture_setup: its function is swapped for ours before it runs):

- ``docker``: None (no Docker client is made);
- ``kafka_server``: one samsa broker for the run, configured as the suite's image
  is (2 partitions per topic), its plaintext port; the TLS and SASL ports are None,
  so the tests that need them fail at once (samsa gives one secure listener, not
  the image's three, and not its certificates or Kerberos);
- ``kerberos_utils``: None (GSSAPI tests fail);
- the container: a stand-in whose commands fail, so ACL tests fail with
  "Failed to apply ACL" (kafka-acls.sh is not there).

``--docker-image`` defaults to ``samsa:4.0.0`` (the suite reads Kafka 4.0.0 from it,
which is what samsa serves) and ``--no-pull`` is set.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from .broker import Broker

IMAGE = "samsa:4.0.0"
# What the suite's Docker image is started with (NUM_PARTITIONS=2)
AIOKAFKA_CONFIGS = {"num.partitions": 2, "group.min.session.timeout.ms": 1000}

_started: list[Broker] = []


class NoContainer:
    """In place of the Docker container: its commands fail, saying why."""

    def exec_run(self, cmd: Any, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        return 1, b"samsa.testing.compat_aiokafka: no container to run this in: " + str(cmd).encode()


def _kafka_server(request: pytest.FixtureRequest) -> tuple[Any, ...]:
    broker = Broker(**AIOKAFKA_CONFIGS).start()  # type: ignore[arg-type]
    _started.append(broker)
    return "127.0.0.1", broker.port, None, None, None, NoContainer()


_REPLACED: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "docker": lambda request: None,
    "kafka_server": _kafka_server,
    "kerberos_utils": lambda request: None,
}


def pytest_configure(config: pytest.Config) -> None:
    # the suite's own options (its conftest adds them); absent when it is not loaded
    if getattr(config.option, "docker_image", IMAGE) is None:
        config.option.docker_image = IMAGE
    if hasattr(config.option, "no_pull"):
        config.option.no_pull = True


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> None:
    # The conftest's function is swapped for ours; pytest then calls, caches and
    # tears down as for any fixture (a value cannot be returned here: None is one).
    make = _REPLACED.get(fixturedef.argname)
    if make is not None:
        def stand_in(**kwargs: Any) -> Any:  # the conftest's arguments, set up already
            return make(request)
        fixturedef.func = stand_in


def pytest_unconfigure(config: object) -> None:
    while _started:
        _started.pop().stop()
