"""samsa's command-line tools over secured listeners, with Kafka's flags for
client properties: the console producer (--producer.config,
--producer-property) and the console consumer (--consumer.config,
--consumer-property), each also with --command-config/--command-property,
their Kafka 4.2 names (KIP-1147), kafka-reassign-partitions' and kafka-acls'
--command-config, and
kafka-leader-election's --admin.config (and --command-config).

One 2-broker ZooKeeper cluster serves the module (reassignments and leader
elections need a controller), each broker with four listeners:
  PLAINTEXT       between the brokers, and the tests' readiness probe
  SSL             TLS, no client certificate asked for
  SASL_SSL        SASL PLAIN inside TLS
  SASL_PLAINTEXT  SASL PLAIN
The AclAuthorizer is on. super.users are User:admin (a SASL login) and
User:ANONYMOUS, which is what the brokers are to each other over PLAINTEXT
and what an SSL client without a certificate is; User:alice (SASL) is an
ordinary user, so what she may do shows that a tool logged in as her.

Refusals: a wrong password, or a broker certificate the tool does not trust,
is one line on stderr and exit 1 in every tool; a missing file, a bad value
or a malformed KEY=VALUE is one usage error naming the flag (exit 2).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import require_zookeeper
from tests.support.broker_process import REPO_ROOT, BrokerProcess
from tests.support.cluster import Cluster
from tests.support.kafka_wire import free_port
from tests.support.tls_certs import make_certs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
USERS_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')


def _login(user: str, password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{user}" password="{password}";')


class _SecuredCluster(Cluster):
    """Brokers with the four listeners above, replicating over PLAINTEXT."""

    def __init__(self, work_dir: Path, certs) -> None:
        super().__init__(work_dir, size=2, offsets_partitions=3)
        self.certs = certs
        self.ports = {i: {name: free_port() for name in LISTENERS} for i in range(2)}

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        ports = self.ports[broker_id]
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}",
                             port=ports["PLAINTEXT"], broker_id=broker_id, overrides={
                                 "zookeeper.connect": self.zookeeper_connect, **self.overrides,
                                 "listeners": listeners, "advertised.listeners": listeners,
                                 "listener.security.protocol.map":
                                     ",".join(f"{n}:{n}" for n in LISTENERS),
                                 "inter.broker.listener.name": "PLAINTEXT",
                                 "sasl.enabled.mechanisms": "PLAIN",
                                 "listener.name.sasl_ssl.plain.sasl.jaas.config": USERS_JAAS,
                                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": USERS_JAAS,
                                 "ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": str(self.certs.server),
                                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "super.users": "User:admin;User:ANONYMOUS",
                                 "allow.everyone.if.no.acl.found": "false",
                                 "offsets.topic.replication.factor": "1",
                                 # the preferred leader is moved back by the tool, not by the broker
                                 "auto.leader.rebalance.enable": "false"})

    def address(self, listener: str, broker_id: int = 0) -> str:
        return f"127.0.0.1:{self.ports[broker_id][listener]}"


class _Files:
    """Kafka client properties files for the tools."""

    def __init__(self, directory: Path, certs) -> None:
        self.dir = directory
        trust = f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
        # an SSL client; linger.ms and client.id mean nothing to samsa's tools
        self.ssl = self.write("ssl", "security.protocol=SSL\n" + trust
                              + "linger.ms=5\nclient.id=tool-security\n")
        self.untrusting = self.write("untrusting", "security.protocol=SSL\nssl.truststore.type=PEM\n"
                                     f"ssl.truststore.location={certs.rogue_ca}\n")
        self.admin_sasl_ssl = self.sasl("admin-sasl-ssl", "SASL_SSL", "admin", "admin-secret", trust)
        self.alice_sasl = self.sasl("alice-sasl", "SASL_PLAINTEXT", "alice", "alice-secret")
        self.admin_sasl = self.sasl("admin-sasl", "SASL_PLAINTEXT", "admin", "admin-secret")
        self.wrong_password = self.sasl("wrong", "SASL_SSL", "admin", "not-the-password", trust)

    def write(self, name: str, text: str) -> Path:
        path = self.dir / f"{name}.properties"
        path.write_text(text)
        return path

    def sasl(self, name: str, protocol: str, user: str, password: str, extra: str = "") -> Path:
        return self.write(name, f"security.protocol={protocol}\nsasl.mechanism=PLAIN\n"
                                f"sasl.jaas.config={_login(user, password)}\n{extra}")


@pytest.fixture(scope="module")
def certs():
    work = Path(tempfile.mkdtemp(prefix="samsa-tool-sec-certs-"))
    yield make_certs(work)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def files(certs):
    work = Path(tempfile.mkdtemp(prefix="samsa-tool-sec-files-"))
    yield _Files(work, certs)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def secured(certs):
    require_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="samsa-tool-sec-"))
    cluster = _SecuredCluster(work, certs)
    try:
        yield cluster.start()
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(autouse=True)
def _log_tails_on_failure(request):
    yield
    if "secured" not in request.fixturenames:
        return
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        request.getfixturevalue("secured").print_log_tails()


def _samsa(*args: object, input: str | None = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "samsa", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, input=input)


def _ok(p: "subprocess.CompletedProcess[str]") -> "subprocess.CompletedProcess[str]":
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p


def _one_line_refusal(p: "subprocess.CompletedProcess[str]", rc: int = 1) -> str:
    assert p.returncode == rc and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def _usage_error(p: "subprocess.CompletedProcess[str]") -> str:
    """argparse's refusal, as the existing tools give it: exit 2, one error line."""
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, p.stderr
    return errors[0]


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


def _create(cluster: _SecuredCluster, files: _Files, topic: str, partitions: int = 1,
            replication: int = 1) -> None:
    _ok(_samsa("topics", "--bootstrap-server", cluster.address("SSL"), "--command-config",
               files.ssl, "--create", "--topic", topic, "--partitions", partitions,
               "--replication-factor", replication))
    cluster.wait_for_leaders(topic, partitions)


# ------------------------------------------------------------------ console tools

def test_console_producer_and_consumer_over_ssl_and_sasl(secured, files):
    topic = _topic()
    _create(secured, files, topic, partitions=2, replication=2)
    first = [f"ssl-{i}" for i in range(50)]
    _ok(_samsa("console-producer", "--bootstrap-server", secured.address("SSL"), "--topic", topic,
               "--producer.config", files.ssl, input="\n".join(first) + "\n"))
    # --producer-property over --producer.config: the file's SSL becomes SASL_SSL,
    # and its wrong password gives way to the right one.
    second = [f"sasl-ssl-{i}" for i in range(50)]
    _ok(_samsa("console-producer", "--bootstrap-server", secured.address("SASL_SSL"),
               "--topic", topic, "--producer.config", files.wrong_password,
               "--producer-property", f"sasl.jaas.config={_login('admin', 'admin-secret')}",
               "--producer-property", "acks=all", input="\n".join(second) + "\n"))
    # Kafka 4.2's names for the same flags.
    third = [f"command-config-{i}" for i in range(50)]
    _ok(_samsa("console-producer", "--bootstrap-server", secured.address("SASL_SSL"),
               "--topic", topic, "--command-config", files.wrong_password,
               "--command-property", f"sasl.jaas.config={_login('admin', 'admin-secret')}",
               input="\n".join(third) + "\n"))
    wanted = sorted(first + second + third)
    # kafka-get-offsets' --command-config: the log ends, over TLS
    ends = _ok(_samsa("get-offsets", "--bootstrap-server", secured.address("SSL"),
                      "--topic", topic, "--command-config", files.ssl))
    assert sum(int(line.rsplit(":", 1)[1]) for line in ends.stdout.splitlines()) == len(wanted)

    # Over SSL, in a group: the coordinator too is reached over TLS.
    got = _ok(_samsa("console-consumer", "--bootstrap-server", secured.address("SSL", 1),
                     "--topic", topic, "--consumer.config", files.ssl, "--from-beginning",
                     "--group", f"g-{topic}", "--max-messages", len(wanted),
                     "--timeout-ms", 30000))
    assert sorted(got.stdout.splitlines()) == wanted, got.stderr
    assert f"Processed a total of {len(wanted)} messages" in got.stderr
    # Over SASL_PLAINTEXT with properties alone; group.id from them, as --group:
    # the group's committed offsets win over --from-beginning, so the first record
    # read is one written after the commit above, never one read before it.
    _ok(_samsa("console-producer", "--bootstrap-server", secured.address("SSL"), "--topic", topic,
               "--producer.config", files.ssl, input="after-the-commit\n"))
    wanted = sorted(wanted + ["after-the-commit"])
    sasl = [f"--consumer-property={line}" for line in
            files.admin_sasl.read_text().splitlines()]
    got = _ok(_samsa("console-consumer", "--bootstrap-server", secured.address("SASL_PLAINTEXT"),
                     "--topic", topic, *sasl, "--consumer-property", f"group.id=g-{topic}",
                     "--from-beginning", "--max-messages", 1, "--timeout-ms", 30000))
    assert got.stdout == "after-the-commit\n" and "Processed a total of 1 messages" in got.stderr, got.stderr
    got = _ok(_samsa("console-consumer", "--bootstrap-server", secured.address("SASL_PLAINTEXT"),
                     "--topic", topic, *sasl, "--from-beginning", "--max-messages", len(wanted),
                     "--timeout-ms", 30000))
    assert sorted(got.stdout.splitlines()) == wanted, got.stderr
    # Kafka 4.2's names for the same flags.
    got = _ok(_samsa("console-consumer", "--bootstrap-server", secured.address("SASL_SSL"),
                     "--topic", topic, "--command-config", files.wrong_password,
                     "--command-property", f"sasl.jaas.config={_login('admin', 'admin-secret')}",
                     "--from-beginning", "--max-messages", len(wanted), "--timeout-ms", 30000))
    assert sorted(got.stdout.splitlines()) == wanted, got.stderr


# ------------------------------------------------------------------ reassignment, election

def test_reassignment_and_preferred_leader_election_over_tls_and_sasl(secured, files, tmp_path):
    topic = _topic()
    _create(secured, files, topic, replication=2)
    replicas = secured.assignment(topic)["partitions"][0]
    leader = secured.partition_state(topic, 0)["leader"]
    assert leader == replicas[0]
    reordered = list(reversed(replicas))  # the other broker becomes the preferred leader
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": reordered}]}))

    out = _ok(_samsa("reassign-partitions", "--bootstrap-server", secured.address("SSL"),
                     "--command-config", files.ssl, "--reassignment-json-file", plan,
                     "--execute"))
    assert out.stdout.splitlines()[-1] == f"Successfully started partition reassignment for {topic}-0"
    wait_until(lambda: secured.assignment(topic)["partitions"][0] == reordered
               and not secured.assignment(topic)["adding_replicas"], 60, "the reordering")
    out = _ok(_samsa("reassign-partitions", "--bootstrap-server", secured.address("SASL_SSL"),
                     "--command-config", files.admin_sasl_ssl, "--reassignment-json-file", plan,
                     "--verify"))
    assert out.stdout.splitlines() == ["Status of partition reassignment:",
                                       f"Reassignment of partition {topic}-0 is completed."]
    out = _ok(_samsa("reassign-partitions", "--bootstrap-server", secured.address("SASL_PLAINTEXT"),
                     "--command-config", files.admin_sasl, "--list"))
    assert out.stdout == "No partition reassignments found.\n"
    assert secured.partition_state(topic, 0)["leader"] == leader  # not moved by the reordering

    out = _ok(_samsa("leader-election", "--bootstrap-server", secured.address("SASL_SSL", 1),
                     "--admin.config", files.admin_sasl_ssl, "--election-type", "preferred",
                     "--topic", topic, "--partition", 0))
    assert out.stdout == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    assert secured.partition_state(topic, 0)["leader"] == reordered[0]
    out = _ok(_samsa("leader-election", "--bootstrap-server", secured.address("SSL"),
                     "--command-config", files.ssl, "--election-type", "preferred",
                     "--topic", topic, "--partition", 0))
    assert out.stdout == f"Valid replica already elected for partitions {topic}-0\n"


# ------------------------------------------------------------------ ACLs

def test_acls_over_sasl_as_a_super_user_and_what_they_grant(secured, files):
    topic, other = _topic(), _topic()
    for t in (topic, other):
        _create(secured, files, t)
    alice = ["--bootstrap-server", secured.address("SASL_PLAINTEXT"), "--command-config",
             files.alice_sasl]
    # alice is not a super user: the authorizer refuses her DescribeAcls.
    line = _one_line_refusal(_samsa("acls", *alice, "--list"))
    assert "CLUSTER_AUTHORIZATION_FAILED" in line, line

    admin = ["--bootstrap-server", secured.address("SASL_SSL"), "--command-config",
             files.admin_sasl_ssl]
    added = _ok(_samsa("acls", *admin, "--add", "--allow-principal", "User:alice", "--producer",
                       "--topic", topic))
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, " \
           "patternType=LITERAL)`" in added.stdout, added.stdout
    listed = _ok(_samsa("acls", *admin, "--list", "--topic", topic))
    for operation in ("WRITE", "DESCRIBE", "CREATE"):
        assert (f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)"
                in listed.stdout), listed.stdout

    # What the ACLs grant alice, logged in by the console producer's properties.
    # ACLs reach every broker through ZooKeeper's change notices: wait for them.
    producing = ["console-producer", "--producer.config", files.alice_sasl, "--bootstrap-server",
                 secured.address("SASL_PLAINTEXT")]
    wait_until(lambda: _samsa(*producing, "--topic", topic, input="from-alice\n").returncode == 0,
               30, "alice may write to the topic")
    line = _one_line_refusal(_samsa(*producing, "--topic", other, input="not-allowed\n"))
    assert "TOPIC_AUTHORIZATION_FAILED" in line, line
    got = _ok(_samsa("console-consumer", "--bootstrap-server", secured.address("SASL_SSL"),
                     "--consumer.config", files.admin_sasl_ssl, "--topic", topic,
                     "--from-beginning", "--max-messages", 1, "--timeout-ms", 30000))
    assert got.stdout.splitlines() == ["from-alice"]


# ------------------------------------------------------------------ refusals

def _every_tool(cluster: _SecuredCluster, listener: str, config: Path) -> list[tuple]:
    """Each tool's command line to ``listener`` with ``config`` as its properties file."""
    boot = ["--bootstrap-server", cluster.address(listener)]
    return [
        ("console-producer", *boot, "--topic", "t", "--producer.config", config),
        ("console-consumer", *boot, "--topic", "t", "--consumer.config", config,
         "--timeout-ms", 1000),
        ("reassign-partitions", *boot, "--list", "--command-config", config),
        ("leader-election", *boot, "--election-type", "preferred", "--all-topic-partitions",
         "--admin.config", config),
        ("acls", *boot, "--list", "--command-config", config),
        ("get-offsets", *boot, "--topic", "t", "--command-config", config),
    ]


def test_a_wrong_password_is_one_line_in_every_tool(secured, files):
    for args in _every_tool(secured, "SASL_SSL", files.wrong_password):
        line = _one_line_refusal(_samsa(*args, input="x\n"))
        assert line.startswith(f"samsa {args[0]}: ") and "SASL_AUTHENTICATION_FAILED" in line, line


def test_an_untrusted_broker_certificate_is_one_line_in_every_tool(secured, files):
    for args in _every_tool(secured, "SSL", files.untrusting):
        line = _one_line_refusal(_samsa(*args, input="x\n"))
        assert "CERTIFICATE_VERIFY_FAILED" in line, line


_FLAGS = [("console-producer", ("--topic", "t"), "--producer.config", "--producer-property"),
          ("console-producer", ("--topic", "t"), "--command-config", "--command-property"),
          ("console-consumer", ("--topic", "t"), "--consumer.config", "--consumer-property"),
          ("console-consumer", ("--topic", "t"), "--command-config", "--command-property"),
          ("reassign-partitions", ("--list",), "--command-config", None),
          ("leader-election", ("--election-type", "preferred", "--all-topic-partitions"),
           "--admin.config", None),
          ("leader-election", ("--election-type", "preferred", "--all-topic-partitions"),
           "--command-config", None),
          ("acls", ("--list",), "--command-config", None),
          ("get-offsets", ("--topic", "t"), "--command-config", None)]


@pytest.mark.parametrize("tool,args,file_flag,property_flag", _FLAGS,
                         ids=[f"{t[0]} {t[2]}" for t in _FLAGS])
def test_an_unusable_config_is_one_usage_error_naming_the_flag(tool, args, file_flag,
                                                               property_flag, tmp_path):
    """No broker needed: the tool refuses before it connects."""
    run = ("--bootstrap-server", "127.0.0.1:1", *args)
    missing = tmp_path / "missing.properties"
    line = _usage_error(_samsa(tool, *run, file_flag, missing))
    assert f"{file_flag} {missing}: No such file or directory" in line, line
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    line = _usage_error(_samsa(tool, *run, file_flag, gssapi))
    assert f"{file_flag} {gssapi}: sasl.mechanism=GSSAPI is not supported" in line, line
    no_trust = tmp_path / "no-trust.properties"
    no_trust.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                        f"ssl.truststore.location={tmp_path / 'nowhere.pem'}\n")
    line = _usage_error(_samsa(tool, *run, file_flag, no_trust))
    assert f"{file_flag} {no_trust}: " in line and "ssl.truststore.location" in line, line
    if property_flag is None:
        return
    line = _usage_error(_samsa(tool, *run, property_flag, "security.protocol"))
    assert f"{property_flag} expects key=value, got 'security.protocol'" in line, line
    line = _usage_error(_samsa(tool, *run, file_flag, no_trust, property_flag,
                               "security.protocol=SASL_SSL", property_flag, "sasl.mechanism=PLAIN"))
    assert f"{file_flag} {no_trust} with {property_flag}: sasl.jaas.config is required" in line, line


def test_kafka_refuses_both_names_of_one_flag_together(tmp_path):
    props = tmp_path / "plain.properties"
    props.write_text("security.protocol=PLAINTEXT\n")
    line = _usage_error(_samsa("console-consumer", "--bootstrap-server", "127.0.0.1:1",
                               "--topic", "t", "--consumer.config", props,
                               "--command-config", props))
    assert "--command-config: not allowed with argument --consumer.config" in line, line
    line = _usage_error(_samsa("console-producer", "--bootstrap-server", "127.0.0.1:1",
                               "--topic", "t", "--producer.config", props,
                               "--command-config", props))
    assert "--command-config: not allowed with argument --producer.config" in line, line
    line = _usage_error(_samsa("console-producer", "--bootstrap-server", "127.0.0.1:1",
                               "--topic", "t", "--producer-property", "acks=1",
                               "--command-property", "acks=1"))
    assert "--command-property: not allowed with argument --producer-property" in line, line
    line = _usage_error(_samsa("leader-election", "--bootstrap-server", "127.0.0.1:1",
                               "--election-type", "preferred", "--all-topic-partitions",
                               "--admin.config", props, "--command-config", props))
    assert "not allowed with argument --admin.config" in line, line
    line = _usage_error(_samsa("acls", "--authorizer-properties", "zookeeper.connect=h:1",
                               "--list", "--command-config", props))
    assert "--command-config goes with --bootstrap-server" in line, line


def test_a_malformed_authorizer_property_is_one_usage_error_naming_the_flag():
    """kafka-acls parses --authorizer-properties as the tools parse
    --command-property: a KEY without =VALUE is refused, not taken as empty."""
    line = _usage_error(_samsa("acls", "--authorizer-properties", "zookeeper.connect", "--list"))
    assert "--authorizer-properties expects key=value, got 'zookeeper.connect'" in line, line
