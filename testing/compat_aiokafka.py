"""Run aiokafka's integration suite (its tests/) against a samsa test broker.

aiokafka's conftest starts Kafka in Docker: ``kafka_image`` skips every
integration test unless ``--docker-image`` names an image (and pulls it unless
``--no-pull``); ``ssl_folder`` runs that image once to make certificates;
``kafka_server`` runs it with four listeners and yields a ``KafkaServer`` (host,
port, ssl_port, sasl_plain_port, sasl_ssl_port, container; ``.hosts``; releases
before 0.8 yielded the same six as a tuple); ``setup_test_class`` puts those, and
``kafka_version`` (the image tag's last ``_`` part), on each test class;
``acl_manager`` and ``kafka_config`` run kafka-acls.sh / kafka-configs.sh in the
container and ``kerberos_utils`` makes a keytab with ktutil. There is no option
for an external broker, and a plugin's fixture cannot override a conftest's, so
``-p samsa.testing.compat_aiokafka`` answers those fixtures' setup itself
(pytest_fixture_setup: its function is swapped for ours before it runs):

- ``docker``: None (no Docker client is made; the conftest still imports the
  ``docker`` package at load, so it must be installed);
- ``ssl_folder``: an empty temporary directory (no certificates: the SSL tests
  fail, as their port is None anyway);
- ``kafka_server``: one samsa broker for the run, configured as the suite's image
  is (2 partitions per topic), its plaintext port, as a tuple that also answers
  the dataclass's attributes; the TLS and SASL ports are None, so the tests that
  need them fail at once (samsa gives one secure listener, not the image's three,
  and not its certificates or Kerberos);
- ``kerberos_utils``: None (GSSAPI tests fail);
- the container: a stand-in whose commands fail, so ACL tests fail with
  "Failed to apply ACL" and SCRAM tests with "Failed to apply Config"
  (kafka-acls.sh and kafka-configs.sh are not there).

``--docker-image`` defaults to ``samsa:4.0.0`` (the suite reads Kafka 4.0.0 from it,
which is what samsa serves) and ``--no-pull`` is set.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, NamedTuple

import pytest

from .broker import Broker

IMAGE = "samsa:4.0.0"
# What the suite's Docker image is started with (NUM_PARTITIONS=2)
AIOKAFKA_CONFIGS = {"num.partitions": 2, "group.min.session.timeout.ms": 1000}

_started: list[Broker] = []
_made: list[Path] = []


class NoContainer:
    """In place of the Docker container: its commands fail, saying why."""

    def exec_run(self, cmd: Any, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        return 1, b"samsa.testing.compat_aiokafka: no container to run this in: " + str(cmd).encode()


class KafkaServer(NamedTuple):
    """What the conftest's kafka_server yields: aiokafka 0.8+ reads the attributes
    of its dataclass, older releases index a tuple (``kafka_server[-1]``)."""

    host: str
    port: int
    ssl_port: int | None
    sasl_plain_port: int | None
    sasl_ssl_port: int | None
    container: NoContainer

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


def _kafka_server(request: pytest.FixtureRequest) -> KafkaServer:
    broker = Broker(**AIOKAFKA_CONFIGS).start()  # type: ignore[arg-type]
    _started.append(broker)
    return KafkaServer("127.0.0.1", broker.port, None, None, None, NoContainer())


def _ssl_folder(request: pytest.FixtureRequest) -> Path:
    # The conftest makes its certificates by running the image; none are made here
    folder = Path(tempfile.mkdtemp(prefix="aiokafka-ssl-"))
    _made.append(folder)
    return folder


_REPLACED: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "docker": lambda request: None,
    "kafka_server": _kafka_server,
    "kerberos_utils": lambda request: None,
    "ssl_folder": _ssl_folder,
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
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)
