"""The pytest plugin: samsa brokers as fixtures (entry point ``pytest11``: ``samsa``).

    def test_produce(samsa_broker):                   # a fresh broker for this test
        producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})

    @pytest.mark.samsa_broker(num_partitions=3, sasl_users={"alice": "s3cret"})
    def test_configured(samsa_broker): ...            # configs for this test's broker

    def test_two(samsa_broker_factory):
        a, b = samsa_broker_factory(), samsa_broker_factory(auto_create_topics_enable=False)

    def test_failover(samsa_cluster): ...             # ZooKeeper + 3 brokers
    def test_five(samsa_cluster_factory): samsa_cluster_factory(brokers=5)

``samsa_broker_module`` and ``samsa_broker_session`` share one broker across a
module or the whole run. When a test fails, the tail of each of its brokers' logs
is attached to its report (a section per broker). Every broker and cluster is
stopped and its directory removed at teardown, whatever happened.
"""
from __future__ import annotations

from typing import Any, Callable, Generator, Iterator

import pytest

from .broker import Broker, Cluster

LOG_LINES = 200


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "samsa_broker(**configs): broker configs (and sasl_users, "
                                       "tls) for the samsa_broker fixture")
    config.addinivalue_line("markers", "samsa_cluster(brokers=3, **configs): the samsa_cluster "
                                       "fixture's size and configs")


def _tail(text: str, lines: int = LOG_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _logs_of(value: Any) -> list[tuple[str, str]]:
    """(title, log tail) of every broker a fixture value holds."""
    if isinstance(value, Broker):
        return [(f"samsa broker {value.bootstrap_servers} log", _tail(value.log_text()))]
    if isinstance(value, Cluster):
        return [(f"samsa cluster broker {i} {b.bootstrap} log", b.log_tail(LOG_LINES))
                for i, b in enumerate(value.brokers)]
    started = getattr(value, "samsa_started", None)  # the factories
    if started is not None:
        return [part for item in started for part in _logs_of(item)]
    return []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    seen: set[int] = set()
    for value in getattr(item, "funcargs", {}).values():
        if id(value) in seen:
            continue
        seen.add(id(value))
        for title, text in _logs_of(value):
            report.sections.append((f"{title} ({report.when})", text))


def _stopping(thing: Broker | Cluster) -> Iterator[Any]:
    try:
        yield thing.start()
    finally:
        thing.stop()


def _marker_kwargs(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    marker = request.node.get_closest_marker(name)
    return dict(marker.kwargs) if marker else {}


@pytest.fixture
def samsa_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A fresh broker for one test (configs from ``@pytest.mark.samsa_broker(...)``)."""
    yield from _stopping(Broker(**_marker_kwargs(request, "samsa_broker")))


@pytest.fixture(scope="module")
def samsa_broker_module() -> Iterator[Broker]:
    """One broker for every test of a module."""
    yield from _stopping(Broker())


@pytest.fixture(scope="session")
def samsa_broker_session() -> Iterator[Broker]:
    """One broker for the whole test run."""
    yield from _stopping(Broker())


class _Factory:
    def __init__(self, make: Callable[..., Broker | Cluster]):
        self.make = make
        self.samsa_started: list[Broker | Cluster] = []

    def __call__(self, **configs: Any) -> Any:
        thing = self.make(**configs)
        self.samsa_started.append(thing)
        try:
            return thing.start()
        except BaseException:
            self.samsa_started.remove(thing)
            thing.stop()
            raise

    def stop_all(self) -> None:
        errors = []
        for thing in reversed(self.samsa_started):
            try:
                thing.stop()
            except Exception as e:  # the others are stopped all the same
                errors.append(e)
        if errors:
            raise errors[0]


@pytest.fixture
def samsa_broker_factory() -> Iterator[Callable[..., Broker]]:
    """``samsa_broker_factory(**configs)`` starts a broker; all are stopped at teardown."""
    factory = _Factory(Broker)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def samsa_cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """``samsa_cluster_factory(brokers=3, **configs)`` starts a cluster; all are
    stopped at teardown."""
    factory = _Factory(Cluster)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def samsa_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A real ZooKeeper and 3 brokers for one test (``@pytest.mark.samsa_cluster(...)``)."""
    yield from _stopping(Cluster(**_marker_kwargs(request, "samsa_cluster")))
