"""Fixtures shared by all test packages: real broker processes and real Kafka clients.

- ``broker``: a fresh samsa broker (own port, own data dir) for one test.
- ``module_broker``: one broker for a whole module, whose tests use topics and groups of
  names of their own (a module overrides ``broker`` with it); ``module_broker_with`` for
  one with settings.
- ``broker_factory(overrides=None, *, start=True, port=None, startup_timeout=30.0)``:
  more brokers or extra settings; every one is stopped and its directory removed.
- ``tansu``: a fresh Tansu peer broker (in-memory) for one test.
- ``java_tools``: the Java tool look-alikes, built once per session.

Everything here is lazy: unit tests that use none of it pay nothing (no JVM, no download).
When a test fails, the teardown prints the tail of each broker's log (pytest shows it
under "Captured stderr teardown").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.java_client import JavaTools
from tests.support.tansu import TansuProcess


# The test kit's fixtures (samsa_broker, ...): its plugin module itself, since this
# conftest has imported samsa.testing already (tests/support is built on it)
from samsa.testing import pytest_plugins  # noqa: E402,F401
# A separate project of its own, run by tests/integration/test_testkit_sample.py
collect_ignore = ["testkit_sample", "testkit_compat"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "harness_selftest: tests of the test harness itself (Java tools, process helpers), "
                   "run against the Tansu peer broker, not samsa")


# The fixtures that start a process (a broker, ZooKeeper, the JVM, Spark): a test that
# uses one, directly or through another fixture, is an integration test.
PROCESS_FIXTURES = frozenset({"broker_factory", "module_broker", "tansu", "java_tools",
                              "zookeeper", "cluster_factory", "spark",
                              # the test kit's (samsa.testing.plugin)
                              "samsa_broker", "samsa_broker_module", "samsa_broker_session",
                              "samsa_broker_factory", "samsa_cluster", "samsa_cluster_factory"})
_INTEGRATION_DIR = Path(__file__).parent / "integration"


# Under pytest-xdist (scripts/test.sh runs the suite in several workers) a test file is one
# unit of work, so a module-scoped fixture (a cluster, a TLS broker) starts once; the files
# that share an expensive session fixture (Spark's JVM, the dockerd and its images) are one
# unit together, so it is built once. Those units and tests/integration go first: they are
# the long ones, and a long unit started last would leave the other workers idle.
_SHARED_SESSION_UNITS = {"tests/pipeline/": "spark", "tests/integration/containers/": "docker"}


def _work_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    for prefix, unit in _SHARED_SESSION_UNITS.items():
        if path.startswith(prefix):
            return unit
    return path


def _work_unit_order(unit: str) -> int:
    if unit in _SHARED_SESSION_UNITS.values():
        return 0
    return 1 if unit.startswith("tests/integration/") else 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class LongUnitsFirst(OrderedDict):
        def popitem(self, last: bool = True):
            unit = min(self, key=_work_unit_order)  # the first of the longest kind
            return unit, self.pop(unit)

    class SharedFixtureScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.workqueue = LongUnitsFirst()

        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return SharedFixtureScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    # The fast lane (-m "not integration") is every test that starts no process; marking
    # by directory and by fixture here means a new test cannot forget its marker.
    for item in items:
        if _INTEGRATION_DIR in item.path.parents or PROCESS_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.integration)


# The fast-lane guard: while a test that is not marked ``integration`` is set up and runs,
# starting a process fails it, so the marker cannot be forgotten by a test that spawns one
# itself (subprocess, os.fork) rather than through PROCESS_FIXTURES. Not in teardown: a
# session fixture (dockerd) is torn down after whichever test ran last, and may run docker.
_unmarked_test: str | None = None
_real_execute_child = subprocess.Popen._execute_child
_real_fork = os.fork


def _refuse_process(what) -> None:
    raise AssertionError(
        f"{_unmarked_test} starts a process ({what}) but is not marked integration: "
        f"add pytestmark = pytest.mark.integration (or @pytest.mark.integration), "
        f"so that the fast lane (-m \"not integration\") stays free of processes")


def _guarded_execute_child(self, args, *rest, **kwargs):
    if _unmarked_test is not None:
        _refuse_process(args if isinstance(args, (str, bytes)) else " ".join(map(str, args)))
    return _real_execute_child(self, args, *rest, **kwargs)


def _guarded_fork():
    if _unmarked_test is not None:
        _refuse_process("os.fork")
    return _real_fork()


subprocess.Popen._execute_child = _guarded_execute_child
os.fork = _guarded_fork


def _guarded(item):
    global _unmarked_test
    _unmarked_test = None if item.get_closest_marker("integration") else item.nodeid
    try:
        yield
    finally:
        _unmarked_test = None


pytest_runtest_setup = pytest.hookimpl(hookwrapper=True)(_guarded)
pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(_guarded)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Remember each phase's report on the item so teardowns know whether the test failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"_samsa_report_{report.when}", report)


def _test_failed(request) -> bool:
    return any(getattr(getattr(request.node, f"_samsa_report_{when}", None), "failed", False)
               for when in ("setup", "call"))


def _stop_all(request, processes) -> None:
    failed = _test_failed(request)
    for proc in processes:
        try:
            proc.stop()
        finally:
            if failed:
                print(f"\n--- {proc.name} {proc.bootstrap} log tail ({proc.log_path}) ---\n{proc.log_tail(80)}",
                      file=sys.stderr)


@pytest.fixture(scope="session")
def java_tools() -> JavaTools:
    """Compiled ConsoleProducer/ConsoleConsumer/Topics/AdminInfo/ConsumerGroups (cache: $SAMSA_TEST_CACHE)."""
    return JavaTools()


@pytest.fixture
def broker_factory(request):
    """Start samsa brokers with extra ``key=value`` overrides (dict or list of "k=v")."""
    brokers: list[BrokerProcess] = []
    dirs: list[Path] = []

    def start_broker(overrides=None, *, start: bool = True, port: int | None = None,
                     startup_timeout: float = 30.0) -> BrokerProcess:
        work_dir = Path(tempfile.mkdtemp(prefix="samsa-broker-"))
        dirs.append(work_dir)
        b = BrokerProcess(work_dir, port=port, overrides=overrides, startup_timeout=startup_timeout)
        brokers.append(b)
        return b.start() if start else b

    try:
        yield start_broker
    finally:
        try:
            _stop_all(request, brokers)
        finally:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    """A running samsa broker with default settings and an empty data dir."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(request) -> BrokerProcess:
    """One running samsa broker with default settings for every test of a module that asks
    for it, for tests that only use topics (and groups) of names of their own: a broker's
    start and stop cost seconds, many times over in a module of short tests."""
    yield from module_broker_with(request)


def module_broker_with(request, overrides=None):
    """The body of a module-scoped broker fixture (``yield from`` it), with settings of the
    module's own; a failed test of the module prints the broker's log tail."""
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-broker-"))
    b = BrokerProcess(work_dir, overrides=overrides)
    try:
        yield b.start()
    finally:
        try:
            b.stop()
        finally:
            if _module_failed(request):
                print(f"\n--- {b.name} {b.bootstrap} log tail ({b.log_path}) ---\n{b.log_tail(80)}",
                      file=sys.stderr)
            shutil.rmtree(work_dir, ignore_errors=True)


def _module_failed(request) -> bool:
    """Whether a test of this module failed (pytest_runtest_makereport records reports)."""
    prefix = request.node.nodeid
    return any(getattr(getattr(item, f"_samsa_report_{when}", None), "failed", False)
               for item in request.session.items if item.nodeid.startswith(prefix)
               for when in ("setup", "call"))


@pytest.fixture
def tansu(request):
    """A running Tansu 0.6 broker (in-memory storage) on a free port."""
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-tansu-"))
    peer = TansuProcess(work_dir)
    try:
        peer.start()
        yield peer
    finally:
        try:
            _stop_all(request, [peer])
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)


@pytest.fixture
def zookeeper(request):
    """A running ZooKeeper server (Debian's package) on a free port, fresh data."""
    from tests.support.zookeeper import ZooKeeperProcess, zookeeper_installed
    if not zookeeper_installed():
        # The test setup (scripts/setup.sh --test) installs it: missing is a setup failure.
        pytest.fail("ZooKeeper is not installed (Debian package 'zookeeper'; "
                    "scripts/setup.sh --test installs it)")
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-zk-"))
    server = ZooKeeperProcess(work_dir)
    try:
        server.start()
        yield server
    finally:
        try:
            _stop_all(request, [server])
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)


def _cleanup_test_networks(include_own: bool) -> None:
    # Network namespaces of runs that died (tests/support/netns.py names them after
    # the owning pid): removed at the start, ours too at the end. Only as root.
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return
    from tests.support.netns import cleanup_stale
    cleanup_stale(include_own=include_own)


def pytest_sessionstart(session):
    _cleanup_test_networks(include_own=False)


def pytest_sessionfinish(session, exitstatus):
    _cleanup_test_networks(include_own=True)
