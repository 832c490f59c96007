"""kafka-python's own integration tests (its 3.0.12 sdist from PyPI), run against a
samsa test broker through ``-p samsa.testing.compat`` instead of its JVM fixtures:
the recipe of docs/testing.md, as a client project would follow it.

The sdist leaves out test/service.py (the process helpers its JVM fixtures use) and
test/__init__.py; the recipe's stand-in has the one class an external broker needs.
Its producer integration tests run whole, and the consumer group tests.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support.java_client import cache_lock, cache_root

SDIST = "kafka-python==3.0.12"
ROOT = Path(__file__).resolve().parent.parent.parent
SERVICE_STAND_IN = '''
class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("samsa.testing.compat: the suite uses an external broker (KAFKA_URI)")
'''


def _sdist() -> Path:
    directory = cache_root() / "sdists"
    directory.mkdir(parents=True, exist_ok=True)
    with cache_lock(directory):
        found = sorted(directory.glob("kafka_python-3.0.12.tar.gz"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                            "--disable-pip-version-check", SDIST, "-d", str(directory)],
                           check=True, capture_output=True, timeout=600)
            found = sorted(directory.glob("kafka_python-3.0.12.tar.gz"))
    return found[0]


def test_kafka_pythons_integration_tests_pass_against_the_plugins_broker(tmp_path):
    with tarfile.open(_sdist()) as tar:
        tar.extractall(tmp_path, filter="data")
    project = tmp_path / "kafka_python-3.0.12"
    (project / "test" / "__init__.py").touch()
    (project / "test" / "service.py").write_text(SERVICE_STAND_IN)
    env = {k: v for k, v in os.environ.items()
           if k not in ("KAFKA_URI", "KAFKA_VERSION", "KAFKA_ROOT", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(project)])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "samsa.testing.compat", "-p", "no:cacheprovider",
         "-p", "no:hypothesispytest", "-o", "addopts=", "-q", "--timeout", "120",
         "test/integration/test_producer_integration.py",
         "test/integration/test_consumer_integration.py::test_group",
         "test/integration/test_consumer_integration.py::test_paused"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    summary = re.findall(r"^(\d+ passed.*) in [\d.]+s", done.stdout, re.M)
    assert summary and "failed" not in summary[-1] and "error" not in summary[-1], done.stdout[-3000:]
    assert int(summary[-1].split()[0]) >= 15, summary


SHAPED = ROOT / "tests" / "testkit_compat"


def _run_shaped(project: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("BROKERS", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)  # samsa importable as if installed
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfs", *args],
                          cwd=SHAPED / project, env=env, capture_output=True, text=True, timeout=600)


def test_aiokafkas_docker_fixtures_are_answered_by_the_recipe():
    # aiokafka's sdist has no tests: a suite of the same shape (its conftest's
    # Docker fixtures, unittest classes on setup_test_class) stands in
    alone = _run_shaped("aiokafka_shaped", "tests")
    assert "5 skipped" in alone.stdout and "--docker-image" in alone.stdout, alone.stdout[-3000:]
    done = _run_shaped("aiokafka_shaped", "-p", "samsa.testing.compat_aiokafka", "tests")
    assert "4 passed" in done.stdout and "1 failed" in done.stdout, done.stdout[-5000:]
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "test_acls_through_the_container" in failed[0]
    assert "Failed to apply ACL" in done.stdout  # the recipe says so: no kafka-acls.sh


def test_confluent_kafka_pythons_byo_cluster_is_the_plugins_broker():
    done = _run_shaped("confluent_shaped", "-p", "samsa.testing.compat_confluent", "tests/integration")
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-5000:] + done.stderr[-2000:]
