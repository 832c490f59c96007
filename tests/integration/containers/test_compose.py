"""docker-compose.yml: ZooKeeper and three samsa brokers with replication
defaults come up (on the host network, deploy/compose.host-network.yml: no
bridge here), a round trip goes through all three, a real Prometheus scrapes
every broker, and the Grafana dashboard's queries use metrics the brokers
really export.

Neither Prometheus nor Grafana can be pulled here (no registry): Prometheus
is Debian's, run on the host with deploy/prometheus/prometheus.yml's scrape
job pointed at the test's ports; Grafana is not run, its dashboard's
expressions are checked against the brokers' /metrics and evaluated by that
Prometheus instead.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support import dashboard
from tests.support.broker_process import REPO_ROOT
from tests.support.docker import (PACKAGES, SUITE, cached_image, debian_mirror,
                                  require_container_tools, run, text_key, tool, tree_key)
from tests.support.kafka_wire import free_port
from tests.support.prometheus import PrometheusProcess
from tests.support.waiting import wait_until

from .conftest import HOST_NETWORK
from .kafka_io import consume, produce

pytestmark = pytest.mark.timeout(900)

BROKERS = ("samsa-0", "samsa-1", "samsa-2")
PIPELINE_EVENTS = 300


# ------------------------------------------------------------ static checks

def test_compose_files_and_prometheus_config_are_valid():
    require_container_tools()
    for files in ([], ["-f", "docker-compose.yml", "-f", HOST_NETWORK]):
        run([tool("docker-compose"), *files, "config", "-q"], timeout=60, cwd=REPO_ROOT)
    run([tool("promtool"), "check", "config", "deploy/prometheus/prometheus.yml"],
        timeout=60, cwd=REPO_ROOT)


def test_dashboard_panels_use_the_provisioned_datasource():
    provisioned = re.findall(r"^\s*uid:\s*(\S+)", (
        REPO_ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text(), re.M)
    panels = json.loads(dashboard.DASHBOARD.read_text())["panels"]
    assert dashboard.expressions(), "the dashboard has no queries"
    for p in panels:
        for ds in [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]:
            if ds is not None:
                assert ds["uid"] in provisioned, f"panel {p['title']!r}: datasource {ds}"


# ------------------------------------------------------------ the running stack

class Stack:
    def __init__(self, dockerd, cwd: Path, env: dict):
        self.dockerd, self.cwd, self.env = dockerd, cwd, env
        self.bootstraps = [f"127.0.0.1:{env[f'SAMSA_PORT_{i}']}" for i in range(3)]
        self.metrics = [f"127.0.0.1:{env[f'SAMSA_METRICS_PORT_{i}']}" for i in range(3)]

    def compose(self, *args, timeout: float = 300.0, check: bool = True):
        return self.dockerd.compose("-p", self.env["COMPOSE_PROJECT_NAME"], "-f",
                                    "docker-compose.yml", "-f", HOST_NETWORK, *args,
                                    cwd=self.cwd, env=self.env, timeout=timeout, check=check)


@pytest.fixture(scope="module")
def stack(request, dockerd, base, context, samsa_image):
    env = {"COMPOSE_PROJECT_NAME": f"samsatest{uuid.uuid4().hex[:6]}",
           "SAMSA_TAG": samsa_image.split(":")[1], "SAMSA_BASE_IMAGE": base,
           "SAMSA_ZK_PORT": str(free_port()),
           # the generator's events: few and fast, for the pipeline test
           "SAMSA_EVENTS": str(PIPELINE_EVENTS), "SAMSA_EVENT_RATE": "100"}
    for i in range(3):
        env[f"SAMSA_PORT_{i}"] = str(free_port())
        env[f"SAMSA_METRICS_PORT_{i}"] = str(free_port())
    s = Stack(dockerd, context, env)
    # ZooKeeper's image is a minute and a half of apt-get: kept between runs.
    cached_image(dockerd, f"samsa-zookeeper:{env['SAMSA_TAG']}",
                 tree_key(REPO_ROOT / "deploy" / "zookeeper") + "-" + text_key(debian_mirror()),
                 lambda: s.compose("build", "zookeeper", timeout=900))
    # samsa's image through compose's own build section (its layers are cached
    # from the samsa_image fixture's build of the same context).
    s.compose("build", "samsa-0", timeout=600)
    try:
        s.compose("up", "-d", "zookeeper", *BROKERS)
        admin = AdminClient({"bootstrap.servers": s.bootstraps[0]})

        def three_brokers():
            try:
                return len(admin.list_topics(timeout=5).brokers) == 3
            except KafkaException:  # broker 0 not serving yet
                return False
        wait_until(three_brokers, timeout=120, what="three brokers registered in the cluster")
        yield s
    finally:
        if _failed(request):
            print(s.compose("logs", "--tail=40", check=False).stdout.decode(errors="replace"),
                  file=sys.stderr)
        # Not a test of shutdown (test_image has that): brokers stopping all at
        # once wait for each other's controlled shutdown, so a short grace.
        s.compose("down", "-v", "--timeout", "10", timeout=180)


def _failed(request) -> bool:
    """Whether a test of this module failed (tests/conftest.py records reports)."""
    return any(getattr(getattr(item, f"_samsa_report_{when}", None), "failed", False)
               for item in request.session.items if item.nodeid.startswith(request.node.nodeid)
               for when in ("setup", "call"))


@pytest.fixture(scope="module")
def prometheus(stack):
    """Debian's Prometheus with the compose Prometheus's scrape config, its
    targets moved to the ports this test gave the brokers' metrics."""
    text = (REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    targets = ", ".join(f'"{m}"' for m in stack.metrics)
    text, n = re.subn(r"targets: \[[^]]*\]", f"targets: [{targets}]", text)
    assert n == 1, "deploy/prometheus/prometheus.yml: expected one static targets list"
    work = Path(tempfile.mkdtemp(prefix="samsa-prometheus-"))
    prom = PrometheusProcess(work, text).start()
    try:
        yield prom
    finally:
        prom.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_round_trip_through_all_three_brokers_with_replication_defaults(stack):
    topic = f"compose-{uuid.uuid4().hex[:6]}"
    values = [b"v%d" % i for i in range(300)]
    # Auto-created on first produce, with the compose file's defaults.
    produce(stack.bootstraps[0], topic, values)
    md = AdminClient({"bootstrap.servers": stack.bootstraps[1]}).list_topics(topic, timeout=10)
    partitions = md.topics[topic].partitions.values()
    assert len(partitions) == 3
    assert all(sorted(p.replicas) == [0, 1, 2] for p in partitions), \
        [(p.id, p.replicas) for p in partitions]
    # Each broker leads a partition, so the records went through all three.
    assert {p.leader for p in partitions} == {0, 1, 2}
    got = consume(stack.bootstraps[2], topic, len(values), group="compose-round-trip")
    assert sorted(got) == sorted(values)
    # The other two replication defaults of the compose file.
    admin = AdminClient({"bootstrap.servers": stack.bootstraps[2]})
    configs = admin.describe_configs([ConfigResource("topic", topic)])
    [topic_config] = [f.result(30) for f in configs.values()]
    assert topic_config["min.insync.replicas"].value == "2"
    offsets = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    assert offsets.partitions and all(len(p.replicas) == 3 for p in offsets.partitions.values())


def test_prometheus_scrapes_every_broker_and_sees_messages_in(stack, prometheus):
    def all_up():
        targets = prometheus.api("targets")["activeTargets"]
        return len(targets) == 3 and all(t["health"] == "up" for t in targets)
    wait_until(all_up, timeout=60, what="Prometheus scraping all three brokers")
    # Records after the first scrape, so the counter rises between two scrapes.
    produce(stack.bootstraps[0], f"rate-{uuid.uuid4().hex[:6]}", [b"x"] * 200)
    query = 'sum(rate(kafka_server_brokertopicmetrics_messagesin_total{topic=""}[1m]))'
    result = wait_until(lambda: [r for r in prometheus.query(query) if float(r["value"][1]) > 0],
                        timeout=90, what=f"{query} > 0")
    assert float(result[0]["value"][1]) > 0


# ------------------------------------------------------------ the dashboard

def test_dashboard_metric_names_are_exported_by_the_brokers(stack):
    # Traffic first: the per-topic and per-request series appear with it.
    topic = f"dash-{uuid.uuid4().hex[:6]}"
    produce(stack.bootstraps[0], topic, [b"d"] * 30)
    consume(stack.bootstraps[1], topic, 30, group="dashboard", commit=True)  # lag series
    assert not dashboard.unexported(stack.metrics)


def test_dashboard_queries_return_data_from_prometheus(stack, prometheus):
    # A wrong label or matcher parses but selects nothing: every query must
    # return series once the brokers have had traffic (earlier tests, and this).
    produce(stack.bootstraps[0], f"dashq-{uuid.uuid4().hex[:6]}", [b"q"] * 30)
    for title, expr in dashboard.expressions():
        wait_until(lambda: prometheus.query(expr), timeout=90,
                   what=f"data for panel {title!r}: {expr}")


# ------------------------------------------------------------ the pipeline

def _pipeline_image_key(context: Path) -> str:
    """What the pipeline's image is built from (deploy/pipeline/Dockerfile and the compose
    files' build sections): the files of the build context it copies, the wheels it installs
    (their names carry their versions; samsa's own wheel it does not install) and the base
    image (debootstrap's suite, packages and mirror)."""
    h = hashlib.sha256()
    for name in ("deploy/pipeline", "pipeline", "pyproject.toml", "samsa/__init__.py",
                 "wheelhouse/pip-install", "docker-compose.yml", HOST_NETWORK):
        top = context / name
        for f in sorted(p for p in [top, *top.rglob("*")] if p.is_file()):
            h.update(str(f.relative_to(context)).encode() + b"\0" + f.read_bytes())
    wheels = sorted(p.name for p in (context / "wheelhouse").glob("*.whl")
                    if not p.name.startswith("samsa-"))
    return h.hexdigest()[:12] + "-" + text_key(SUITE, PACKAGES, debian_mirror(), *wheels)


_COUNT_ROWS = """
import pyarrow.dataset as ds
d = ds.dataset("/var/lib/samsa-pipeline/events", format="parquet", partitioning="hive")
t = d.to_table(columns=["partition", "offset"])
print(t.num_rows, len(set(zip(t["partition"].to_pylist(), t["offset"].to_pylist()))))
"""


def test_pipeline_streams_the_generators_events_into_parquet(stack):
    """The pipeline service (deploy/pipeline/Dockerfile: PySpark, Java 17) runs
    the streaming job against the three brokers, the generator service feeds
    it; every generated event lands in the Parquet dataset once, and SIGTERM
    stops the job cleanly."""
    # Java and PySpark make this build two and a half minutes of apt-get and pip: kept
    # between runs, as ZooKeeper's image is, for as long as nothing it is built from changes.
    cached_image(stack.dockerd, f"samsa-pipeline:{stack.env['SAMSA_TAG']}",
                 _pipeline_image_key(stack.cwd),
                 lambda: stack.compose("build", "pipeline", timeout=900))
    stack.compose("up", "-d", "generator", "pipeline")

    def container(service):
        return stack.compose("ps", "-q", service).stdout.decode().strip()
    generator = container("generator")
    wait_until(lambda: stack.dockerd.inspect(generator, "{{.State.Status}}") == "exited",
               timeout=120, what="the generator to finish")
    assert stack.dockerd.inspect(generator, "{{.State.ExitCode}}") == "0", \
        stack.dockerd.logs(generator)[-2000:]

    def rows():
        p = stack.compose("exec", "-T", "pipeline", "python", "-c", _COUNT_ROWS, check=False,
                          timeout=120)
        if p.returncode != 0:  # no dataset yet (Spark still starting)
            return None
        found, distinct = map(int, p.stdout.split())
        return (found, distinct) if found >= PIPELINE_EVENTS else None
    # Spark's start in a fresh container, then 5 s micro-batches, on 2 busy cores.
    got = wait_until(rows, timeout=300, interval=2.0,
                     what=f"{PIPELINE_EVENTS} events in the pipeline's Parquet dataset")
    assert got == (PIPELINE_EVENTS, PIPELINE_EVENTS), got  # each record once
    pipeline = container("pipeline")
    stack.compose("stop", "-t", "60", "pipeline", timeout=120)
    assert stack.dockerd.inspect(pipeline, "{{.State.ExitCode}}") == "0", \
        stack.dockerd.logs(pipeline)[-2000:]
