"""BrokerConfig loading: defaults, precedence, validation, resolution rules."""
import logging

import pytest

from samsa.config import BROKER_KEYS, BrokerConfig, ConfigError, Listener, env_key, load_broker_config
from samsa.config.values import INT_MAX, LONG_MAX


def load(*overrides, env=None, path=None):
    return load_broker_config(path, list(overrides), environ=env or {})


def write(tmp_path, text):
    p = tmp_path / "server.properties"
    p.write_text(text)
    return str(p)


def test_defaults_match_kafka():
    c = load()
    assert c == BrokerConfig()
    assert c.broker_id == 0
    assert c.listeners == [("PLAINTEXT", "", 9092)]
    assert c.advertised_listeners == [("PLAINTEXT", "localhost", 9092)]
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.num_partitions == 1
    # the one default that differs from Kafka's (3): samsa's network threads share one
    # interpreter lock, so more than one adds latency and no throughput
    assert c.num_network_threads == 1
    assert c.socket_request_max_bytes == 104857600
    assert c.socket_send_buffer_bytes == c.socket_receive_buffer_bytes == 102400
    assert c.message_max_bytes == 1048588
    assert c.auto_create_topics_enable is True and c.delete_topic_enable is True
    assert c.log_segment_bytes == 1073741824
    assert c.log_roll_ms == 168 * 3600000 and c.log_roll_jitter_ms == 0
    assert c.log_retention_ms == 168 * 3600000 and c.log_retention_bytes == -1
    assert c.log_retention_check_interval_ms == 300000
    assert c.log_flush_interval_messages == LONG_MAX and c.log_flush_interval_ms == LONG_MAX
    assert c.log_message_timestamp_type == "CreateTime"
    assert c.compression_type == "producer"
    assert c.log_cleanup_policy == ["delete"]
    assert c.log_cleaner_min_cleanable_ratio == 0.5
    assert c.max_connections == INT_MAX and c.max_connections_per_ip == INT_MAX
    assert c.connections_max_idle_ms == 600000
    assert c.zookeeper_connect is None and c.zookeeper_session_timeout_ms == 18000
    assert c.offsets_topic_num_partitions == 50 and c.offsets_topic_replication_factor == 3
    assert c.default_replication_factor == 1
    assert c.group_initial_rebalance_delay_ms == 3000
    assert (c.group_min_session_timeout_ms, c.group_max_session_timeout_ms) == (6000, 1800000)
    assert c.offsets_retention_minutes == 10080
    assert c.metrics_port == 0 and c.cluster_id is None
    assert (c.quota_window_num, c.quota_window_size_seconds) == (11, 1)
    assert (c.controller_quota_window_num, c.controller_quota_window_size_seconds) == (11, 1)
    assert c.raw == {} and c.origins == {}


def test_every_key_has_a_field_and_valid_default():
    for name, ck in BROKER_KEYS.items():
        assert ck.doc, name
        if ck.default is not None and ck.validator is not None:
            assert ck.validator.check(ck.default), name


def test_file_values_and_types(tmp_path):
    path = write(tmp_path, """
broker.id = 7
listeners=PLAINTEXT://0.0.0.0:19092
log.dirs=/d1, /d2 ,/d3
auto.create.topics.enable=FALSE
log.cleanup.policy = compact , delete
log.cleaner.min.cleanable.ratio=0.25
num.partitions= 4
zookeeper.connect=zk1:2181,zk2:2181/samsa
""")
    c = load(path=path)
    assert c.broker_id == 7
    assert c.listeners == [Listener("PLAINTEXT", "0.0.0.0", 19092)]
    assert c.advertised_listeners == [Listener("PLAINTEXT", "localhost", 19092)]
    assert c.log_dirs == ["/d1", "/d2", "/d3"]
    assert c.auto_create_topics_enable is False
    assert c.log_cleanup_policy == ["compact", "delete"]
    assert c.log_cleaner_min_cleanable_ratio == 0.25
    assert c.num_partitions == 4
    assert c.zookeeper_connect == "zk1:2181,zk2:2181/samsa"
    assert c.origins["broker.id"] == "file"
    assert c.raw["num.partitions"] == " 4" or c.raw["num.partitions"] == "4"
    assert c.is_set("broker.id") and not c.is_set("num.network.threads")


def test_precedence_file_env_override(tmp_path):
    path = write(tmp_path, "num.partitions=2\nnum.network.threads=5\nlog.segment.bytes=1000\n")
    env = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_NUM_NETWORK_THREADS": "6"}
    c = load_broker_config(path, ["num.partitions=4"], environ=env)
    assert c.num_partitions == 4                 # override > env > file
    assert c.num_network_threads == 6            # env > file
    assert c.log_segment_bytes == 1000           # file > default
    assert c.origins == {"num.partitions": "override", "num.network.threads": "env",
                         "log.segment.bytes": "file"}


@pytest.mark.parametrize("var, key", [
    ("KAFKA_LOG_DIRS", "log.dirs"),
    ("KAFKA_BROKER_ID", "broker.id"),
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("KAFKA_SOME__UNDERSCORE_KEY", "some_underscore.key"),
    ("KAFKA_A___DASH_B", "a-dash.b"),
    ("KAFKA_HEAP_OPTS", None), ("KAFKA_OPTS", None), ("KAFKA_JMX_OPTS", None),
    ("KAFKA_LOG4J_OPTS", None), ("KAFKA_DEBUG", None), ("KAFKA_JMX_PORT", None),
    ("PATH", None), ("KAFKA_", None),
])
def test_env_key_mapping(var, key):
    assert env_key(var) == key


def test_env_ignores_jvm_vars_without_warning(caplog):
    env = {"KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-Dx", "KAFKA_LOG_DIRS": "/x", "HOME": "/r"}
    with caplog.at_level(logging.WARNING, logger="config"):
        c = load(env=env)
    assert c.log_dirs == ["/x"]
    assert caplog.records == []


def test_unknown_key_warns_and_is_kept_in_raw(caplog, tmp_path):
    path = write(tmp_path, "broker.id=0\nno.such.key=1\n")  # (a file of only unknown keys: refused)
    with caplog.at_level(logging.WARNING, logger="config"):
        c = load("another.unknown=2", path=path)
    msgs = [r.getMessage() for r in caplog.records if r.name == "config"]
    assert any("no.such.key" in m and "file" in m for m in msgs)
    assert any("another.unknown" in m and "override" in m for m in msgs)
    assert c.raw["no.such.key"] == "1"


@pytest.mark.parametrize("bad", ["novalue", "=x", " =x"])
def test_bad_override_form(bad):
    with pytest.raises(ConfigError) as ei:
        load(bad)
    assert repr(bad) in str(ei.value) and "key=value" in str(ei.value)


def test_override_value_may_contain_equals_and_be_empty():
    c = load("zookeeper.connect=h:2181/a=b", "max.connections.per.ip.overrides=")
    assert c.zookeeper_connect == "h:2181/a=b"
    assert c.max_connections_per_ip_overrides == ""


def test_missing_file_names_path(tmp_path):
    missing = str(tmp_path / "nope.properties")
    with pytest.raises(ConfigError) as ei:
        load(path=missing)
    assert missing in str(ei.value)


def test_error_message_format():
    with pytest.raises(ConfigError) as ei:
        load("log.segment.bytes=abc")
    assert str(ei.value) == "invalid value 'abc' for log.segment.bytes: expected an integer >= 14"
    assert (ei.value.key, ei.value.value, ei.value.allowed) == (
        "log.segment.bytes", "abc", "an integer >= 14")


@pytest.mark.parametrize("key, value, allowed", [
    ("log.segment.bytes", "13", ">= 14"),
    ("log.segment.bytes", "1.5", ">= 14"),
    ("log.segment.bytes", "1_000", ">= 14"),
    ("log.segment.bytes", "3000000000", "2147483647"),         # over INT range
    ("num.partitions", "0", ">= 1"),
    ("num.partitions", "", "an integer"),
    ("broker.id", "-1", ">= 0"),
    ("log.retention.ms", "9223372036854775808", "9223372036854775807"),
    ("log.retention.check.interval.ms", "0", ">= 1"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("delete.topic.enable", "1", "true or false"),
    ("log.message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
    ("compression.type", "brotli", "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("log.cleanup.policy", "compact,shred", "compact, delete"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "in [0, 1]"),
    ("log.cleaner.min.cleanable.ratio", "half", "in [0, 1]"),
    ("log.cleaner.min.cleanable.ratio", "NaN", "in [0, 1]"),
    ("metrics.port", "70000", "in [0, 65535]"),
    ("offsets.topic.replication.factor", "40000", "32767"),    # SHORT
    ("listeners", "PLAINTEXT:9092", "NAME://host:port"),
    ("listeners", "PLAINTEXT://host:99999", "NAME://host:port"),
    ("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2", "appears twice"),
    ("listeners", "FOO://a:1", "listener.security.protocol.map"),
    ("listeners", "", "at least one"),
    ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092", "routable"),
    ("advertised.listeners", "SSL://h:9093", "listener names defined in listeners"),
    ("listener.security.protocol.map", "PLAINTEXT:TLS", "SASL_SSL"),
    ("inter.broker.listener.name", "SSL", "listener name"),
    ("log.dirs", " , ", "at least one directory"),
    ("group.min.session.timeout.ms", "2000000", "group.max.session.timeout.ms"),
    ("producer.id.expiration.ms", "0", ">= 1"),
    ("producer.id.expiration.check.interval.ms", "soon", "int"),
    ("controller.quota.window.num", "0", ">= 1"),
    ("controller.quota.window.size.seconds", "0", ">= 1"),
    ("controller.quota.window.size.seconds", "1.5", "integer"),
])
def test_bad_values_name_key_value_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as ei:
        load(f"{key}={value}")
    msg = str(ei.value)
    assert key in msg and repr(value) in msg and allowed in msg, msg
    assert ei.value.key == key


def test_bad_value_from_env_and_file_too(tmp_path):
    with pytest.raises(ConfigError, match="num.partitions"):
        load(env={"KAFKA_NUM_PARTITIONS": "many"})
    with pytest.raises(ConfigError, match="'many' for num.partitions"):
        load(path=write(tmp_path, "num.partitions=many\n"))


@pytest.mark.parametrize("value, expected", [
    ("true", True), ("TRUE", True), (" True ", True), ("false", False), ("fAlSe", False)])
def test_booleans_case_insensitive(value, expected):
    assert load(f"delete.topic.enable={value}").delete_topic_enable is expected


@pytest.mark.parametrize("value, expected", [(" 12 ", 12), ("+12", 12), ("-1", -1)])
def test_integers_trimmed_and_signed(value, expected):
    assert load(f"log.retention.bytes={value}").log_retention_bytes == expected


@pytest.mark.parametrize("overrides, ms", [
    ((), 168 * 3600000),
    (("log.retention.hours=1",), 3600000),
    (("log.retention.minutes=5", "log.retention.hours=1"), 300000),
    (("log.retention.ms=1234", "log.retention.minutes=5", "log.retention.hours=1"), 1234),
    (("log.retention.ms=1234", "log.retention.hours=1"), 1234),
    (("log.retention.ms=-1",), -1),
    (("log.retention.hours=-1",), -1),
    (("log.retention.minutes=-7",), -1),
    (("log.retention.ms=-5",), -1),
])
def test_retention_precedence(overrides, ms):
    c = load(*overrides)
    assert c.log_retention_ms == ms
    assert c.default_topic_config.retention_ms == ms


def test_roll_and_jitter_precedence():
    c = load("log.roll.hours=2")
    assert c.log_roll_ms == 7200000
    c = load("log.roll.hours=2", "log.roll.ms=500", "log.roll.jitter.hours=1")
    assert c.log_roll_ms == 500 and c.log_roll_jitter_ms == 3600000
    c = load("log.roll.jitter.hours=1", "log.roll.jitter.ms=10")
    assert c.log_roll_jitter_ms == 10


def test_flush_interval_falls_back_to_scheduler_interval():
    assert load("log.flush.scheduler.interval.ms=2000").log_flush_interval_ms == 2000
    assert load("log.flush.scheduler.interval.ms=2000",
                "log.flush.interval.ms=10").log_flush_interval_ms == 10


def test_log_dirs_wins_over_log_dir():
    assert load("log.dir=/one").log_dirs == ["/one"]
    assert load("log.dir=/one", "log.dirs=/a,/b").log_dirs == ["/a", "/b"]


def test_node_id_is_broker_id_synonym():
    assert load("node.id=3").broker_id == 3
    assert load("node.id=3", "broker.id=4").broker_id == 4


def test_listeners_parsing():
    c = load("listeners=plaintext://:0, SSL://[::1]:9093,SASL_PLAINTEXT://my-host.example:9094")
    assert c.listeners == [("PLAINTEXT", "", 0), ("SSL", "::1", 9093),
                           ("SASL_PLAINTEXT", "my-host.example", 9094)]
    assert c.advertised_listeners[0] == ("PLAINTEXT", "localhost", 0)
    assert c.advertised_listeners[1] == ("SSL", "::1", 9093)
    assert c.listener("ssl").port == 9093 and c.listener("nope") is None


def test_custom_listener_names_and_advertised():
    c = load("listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
             "listeners=INTERNAL://:9092,EXTERNAL://:9094",
             "advertised.listeners=EXTERNAL://kafka.example:19094,INTERNAL://:9092",
             "inter.broker.listener.name=internal")
    assert c.listener_security_protocol_map == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}
    assert c.advertised_listeners == [("EXTERNAL", "kafka.example", 19094),
                                      ("INTERNAL", "localhost", 9092)]
    assert c.inter_broker_listener_name == "INTERNAL"


def test_with_bound_ports():
    c = load("listeners=PLAINTEXT://127.0.0.1:0")
    b = c.with_bound_ports({"PLAINTEXT": 40123})
    assert b.listeners == [("PLAINTEXT", "127.0.0.1", 40123)]
    assert b.advertised_listeners == [("PLAINTEXT", "127.0.0.1", 40123)]
    assert c.listeners[0].port == 0


def test_from_dict_and_error_pickles():
    import pickle
    c = BrokerConfig.from_dict({"num.partitions": "3"})
    assert c.num_partitions == 3 and c.origins == {"num.partitions": "override"}
    e = pickle.loads(pickle.dumps(ConfigError("k", "v", "something")))
    assert str(e) == "invalid value 'v' for k: expected something"


def test_repo_server_properties_loads_cleanly(caplog):
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "server.properties"
    with caplog.at_level(logging.WARNING, logger="config"):
        c = load(path=str(path))
    assert caplog.records == []
    assert c.zookeeper_connect is None
    assert c.log_dirs == ["./data"]
    assert c.num_partitions == 1
    assert c.advertised_listeners[0].host == "localhost"
    assert c.offsets_topic_replication_factor == 1


@pytest.mark.parametrize("overrides, key", [
    (("log.retention.ms=0",), "log.retention.ms"),
    (("log.retention.minutes=0",), "log.retention.minutes"),
    (("log.retention.hours=0",), "log.retention.hours"),
    (("log.retention.ms=0", "log.retention.hours=5"), "log.retention.ms"),
])
def test_a_zero_retention_is_refused_as_kafka_refuses_it(overrides, key):
    # KafkaConfig: "log.retention.ms must be unlimited (-1) or, greater than or
    # equal to 1"; a negative value is unlimited (test_retention_precedence)
    with pytest.raises(ConfigError, match=f"for {key}: expected -1"):
        load(*overrides)


@pytest.mark.parametrize("text", [
    "bootstrap.servers=localhost:9092\nacks=all\nkey.serializer=x\nlinger.ms=5\n",  # a client's
    "services:\n  kafka:\n    image: samsa\n",  # not a .properties file at all
])
def test_a_file_without_any_broker_key_is_refused(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="has no broker config key.*server.properties") as e:
        load(path=path)
    assert path in str(e.value) and "\n" not in str(e.value)


def test_a_file_with_one_broker_key_or_none_at_all_is_read(tmp_path):
    assert load(path=write(tmp_path, "")).listeners == [("PLAINTEXT", "", 9092)]
    c = load(path=write(tmp_path, "some.tool.key=1\nlog.dirs=/srv/d\n"))
    assert c.log_dirs == ["/srv/d"]
    c = load(path=write(tmp_path, "listener.name.plaintext.max.connections=5\n"))
    assert c.raw["listener.name.plaintext.max.connections"] == "5"
