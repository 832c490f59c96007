"""Apache Kafka's ZooKeeper layout (2.x/3.x): znode paths and their JSON.

Pure: bytes in, values out, no ZooKeeper client. samsa writes exactly what
a Kafka broker of those versions writes, so ZooKeeper tooling, ZooKeeper-era
clients and a Kafka broker looking at the same ensemble see Kafka brokers.
Field types follow Kafka's quirks on purpose: ``/cluster/id``'s version and
the broker registration's timestamp are strings, ``/controller_epoch`` is a
bare decimal, producer-id block bounds are strings.

Parsing is lenient the way Kafka's is (unknown fields ignored, optional
fields defaulted) so znodes written by a Kafka broker or an older tool read
back too; a znode that is not JSON of the expected shape raises
``ZNodeFormatError`` naming the path.
"""
from __future__ import annotations

import dataclasses
import json
import urllib.parse
from typing import Any, Mapping, Sequence

# zookeeper.connect is read by config/ (a bad one refuses start-up naming the key)
from samsa.config.zk_connect import parse_connect as parse_connect  # re-exported: z.parse_connect

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"
DEFAULT_BROKER_CONFIG = "<default>"
PRODUCER_ID_BLOCK_SIZE = 1000

# Created at start by every broker, as Kafka does, so watches have parents.
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, BROKER_SEQID, CONFIG_CHANGES, CONFIG_TOPICS,
                    CONFIG_BROKERS, "/config/clients", "/config/users", "/config/ips",
                    DELETE_TOPICS, ISR_CHANGE_NOTIFICATION, LOG_DIR_EVENT_NOTIFICATION,
                    CONSUMERS, "/admin")


class ZNodeFormatError(ValueError):
    """A znode's data is not what Kafka writes there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"znode {path}: {reason}")
        self.path = path


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def parse_partition_state_path(path: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition state znode's path; None for any other path."""
    prefix = BROKER_TOPICS + "/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    if len(parts) != 4 or parts[1] != "partitions" or parts[3] != "state" \
            or not parts[2].isdigit():
        return None
    return parts[0], int(parts[2])


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(broker: int | None) -> str:
    """``None`` is the cluster-wide default (``/config/brokers/<default>``)."""
    return f"{CONFIG_BROKERS}/{DEFAULT_BROKER_CONFIG if broker is None else broker}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def consumer_id_path(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def consumer_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def _dump(value: object) -> bytes:
    # Kafka's JSON has no spaces; tools compare and display it as is.
    return json.dumps(value, separators=(",", ":")).encode()


_DECODER = json.JSONDecoder()


def _load(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZNodeFormatError(path, "empty")
    try:
        # (json.loads of bytes first guesses their encoding: Kafka's is UTF-8)
        value = _DECODER.decode(data.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise ZNodeFormatError(path, f"not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ZNodeFormatError(path, "not a JSON object")
    return value


def _int_list(path: str, value: object) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        raise ZNodeFormatError(path, f"expected a list of broker ids, got {value!r}")
    return list(value)


# ----------------------------------------------------------------- /cluster/id

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    cluster_id = _load(CLUSTER_ID, data).get("id")
    if not isinstance(cluster_id, str):
        raise ZNodeFormatError(CLUSTER_ID, "no id")
    return cluster_id


# ----------------------------------------------------------- /brokers/ids/<id>

@dataclasses.dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[tuple[str, str, int], ...]   # (listener name, host, port)
    security_protocols: Mapping[str, str]         # listener name -> protocol
    rack: str | None = None
    timestamp_ms: int = 0


def encode_broker(reg: BrokerRegistration) -> bytes:
    # host/port are the first PLAINTEXT endpoint, for clients older than endpoints.
    plaintext = [(h, p) for name, h, p in reg.endpoints
                 if reg.security_protocols.get(name, name) == "PLAINTEXT"]
    host, port = plaintext[0] if plaintext else (None, -1)
    value: dict[str, Any] = {
        "version": 5,
        "host": host,
        "port": port,
        "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),
        "endpoints": [f"{name}://{_host_for_url(h)}:{p}" for name, h, p in reg.endpoints],
        "listener_security_protocol_map": dict(reg.security_protocols),
    }
    if reg.rack is not None:
        value["rack"] = reg.rack
    value["features"] = {}
    return _dump(value)


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    path = broker_path(broker_id)
    value = _load(path, data)
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    for url in value.get("endpoints") or []:
        name, sep, rest = str(url).partition("://")
        host, _, port = rest.rpartition(":")
        if not sep or not port.isdigit():
            raise ZNodeFormatError(path, f"bad endpoint {url!r}")
        endpoints.append((name, host.strip("[]"), int(port)))
    if not endpoints and value.get("host") is not None:  # version 1 registrations
        endpoints.append(("PLAINTEXT", value["host"], int(value.get("port", -1))))
    try:
        timestamp = int(value.get("timestamp", 0))
    except (TypeError, ValueError):
        timestamp = 0
    return BrokerRegistration(broker_id, tuple(endpoints),
                              {str(k): str(v) for k, v in protocols.items()},
                              value.get("rack"), timestamp)


# -------------------------------------------------------- /brokers/topics/<t>

@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    partitions: Mapping[int, Sequence[int]]   # partition -> replica list
    topic_id: str | None = None               # Kafka's 22-character base64url id
    adding_replicas: Mapping[int, Sequence[int]] = dataclasses.field(default_factory=dict)
    removing_replicas: Mapping[int, Sequence[int]] = dataclasses.field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    def by_partition(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(m.items())}
    value: dict[str, Any] = {
        "version": 3,
        "partitions": by_partition(assignment.partitions),
        "adding_replicas": by_partition(assignment.adding_replicas),
        "removing_replicas": by_partition(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        value["topic_id"] = assignment.topic_id
    return _dump(value)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    path = topic_path(topic)
    value = _load(path, data)

    def by_partition(field: str) -> dict[int, list[int]]:
        raw = value.get(field) or {}
        if not isinstance(raw, dict):
            raise ZNodeFormatError(path, f"{field} is not an object")
        try:
            return {int(p): _int_list(path, r) for p, r in raw.items()}
        except ValueError as e:
            raise ZNodeFormatError(path, f"bad partition in {field}: {e}") from None
    partitions = by_partition("partitions")
    if not partitions:
        raise ZNodeFormatError(path, "no partitions")
    topic_id = value.get("topic_id")
    return TopicAssignment(partitions, topic_id if isinstance(topic_id, str) else None,
                           by_partition("adding_replicas"), by_partition("removing_replicas"))


# ------------------------------------- /brokers/topics/<t>/partitions/<p>/state

@dataclasses.dataclass(frozen=True)
class PartitionState:
    leader: int                 # -1: no leader (offline)
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: PartitionState) -> bytes:
    # What _dump writes for these fields, formatted directly: the controller
    # encodes one per partition it decides on (30,000 at a broker's death at
    # scale), and json.dumps with separators builds an encoder per call.
    isr = ",".join(str(int(r)) for r in state.isr)
    return (f'{{"version":1,"leader":{int(state.leader)},"leader_epoch":{int(state.leader_epoch)},'
            f'"controller_epoch":{int(state.controller_epoch)},"isr":[{isr}]}}').encode()


def decode_partition_state(topic: str, partition: int, data: bytes) -> PartitionState:
    # Decoded per partition on every change (30,000 at a broker's death at
    # scale, by the controller taking office and by every broker): a well-formed
    # state takes the short way; anything else the checks below, for their errors.
    try:
        value = _DECODER.decode(data.decode())
        isr = value["isr"]
        if type(isr) is list and all(type(r) is int for r in isr):
            return PartitionState(int(value["leader"]), int(value["leader_epoch"]), tuple(isr),
                                  int(value["controller_epoch"]))
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
        pass
    path = partition_state_path(topic, partition)
    value = _load(path, data)
    try:
        return PartitionState(int(value["leader"]), int(value["leader_epoch"]),
                              tuple(_int_list(path, value["isr"])),
                              int(value["controller_epoch"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ZNodeFormatError(path, f"missing or bad field {e}") from None


# ------------------------------------------------ /controller, /controller_epoch

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    value = _load(CONTROLLER, data)
    try:
        return int(value["brokerid"])
    except (KeyError, TypeError, ValueError):
        raise ZNodeFormatError(CONTROLLER, "no brokerid") from None


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (AttributeError, UnicodeDecodeError, ValueError):
        raise ZNodeFormatError(CONTROLLER_EPOCH, f"not a number: {data!r}") from None


# ------------------------------------- /config/{topics,brokers}/<name>, changes

def encode_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(config)})


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    value = _load(path, data)
    config = value.get("config") or {}
    if not isinstance(config, dict):
        raise ZNodeFormatError(path, "config is not an object")
    return {str(k): str(v) for k, v in config.items()}


# users, clients and ips are Kafka's; groups (GROUP config resources, KIP-848's
# consumer.* and KIP-932's share.* keys) are samsa's, in the same layout
_ENTITY_TYPES = ("users", "clients", "ips", "groups")
_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def sanitize_entity_name(name: str) -> str:
    """A user or client id as Kafka writes it in a znode name (its Sanitizer:
    URL encoding with ``*`` as %2A and space as %20), so "User:a/b" or "*"
    cannot escape their znode. A name is never the default entity: a user
    literally called "<default>" is ``%3Cdefault%3E``, as in Kafka; the default
    entity is spelled by ``_entity_name(None)``."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in name.encode("utf-8"))


def desanitize_entity_name(name: str) -> str:
    return urllib.parse.unquote(name)


def _entity_name(name: str | None) -> str:
    return DEFAULT_BROKER_CONFIG if name is None else sanitize_entity_name(name)


# The one place that spells entity paths for quotas and SCRAM credentials
# alike (None: the default entity).

def user_entity_path(user: str | None) -> str:
    return f"users/{_entity_name(user)}"


def user_client_entity_path(user: str | None, client_id: str | None) -> str:
    return f"users/{_entity_name(user)}/clients/{_entity_name(client_id)}"


def client_entity_path(client_id: str | None) -> str:
    return f"clients/{_entity_name(client_id)}"


def entity_config_path(entity_path: str) -> str:
    """``users/alice`` -> ``/config/users/alice``; the names are sanitized
    already; only users, clients, ips, groups and user/client pairs are entities."""
    parts = entity_path.split("/")
    if (parts[0] not in _ENTITY_TYPES or len(parts) not in (2, 4) or not all(parts)
            or (len(parts) == 4 and (parts[0], parts[2]) != ("users", "clients"))):
        raise ValueError(f"not an entity path: {entity_path!r}")
    return f"/config/{entity_path}"


def encode_config_change(entity_path: str) -> bytes:
    """``entity_path`` is e.g. ``topics/<t>`` or ``brokers/<id>``."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes) -> str:
    value = _load(path, data)
    entity = value.get("entity_path")
    if not isinstance(entity, str):
        raise ZNodeFormatError(path, "no entity_path")
    return entity


# --------------------------------------------- /isr_change_notification/...

def encode_isr_change(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p}
                                               for t, p in partitions]})


def decode_partition_list(path: str, data: bytes) -> list[tuple[str, int]]:
    """The ``{"version":1,"partitions":[{"topic":..,"partition":..}]}`` shape of
    ISR change notices and preferred replica elections."""
    value = _load(path, data)
    try:
        return [(str(e["topic"]), int(e["partition"])) for e in value.get("partitions") or []]
    except (KeyError, TypeError, ValueError):
        raise ZNodeFormatError(path, "bad partitions list") from None


def encode_reassignment(partitions: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """/admin/reassign_partitions as ZooKeeper-era kafka-reassign-partitions writes it."""
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)}
        for (t, p), r in sorted(partitions.items())]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    value = _load(REASSIGN_PARTITIONS, data)
    try:
        return {(str(e["topic"]), int(e["partition"])): _int_list(REASSIGN_PARTITIONS,
                                                                  e["replicas"])
                for e in value.get("partitions") or []}
    except (KeyError, TypeError, ValueError):
        raise ZNodeFormatError(REASSIGN_PARTITIONS, "bad partitions list") from None


# ------------------------------------------------- /latest_producer_id_block

@dataclasses.dataclass(frozen=True)
class ProducerIdBlock:
    broker: int
    start: int   # inclusive
    end: int     # inclusive


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump({"version": 1, "broker": block.broker, "block_start": str(block.start),
                  "block_end": str(block.end)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    if not data:
        return None
    value = _load(LATEST_PRODUCER_ID_BLOCK, data)
    try:
        return ProducerIdBlock(int(value["broker"]), int(value["block_start"]),
                               int(value["block_end"]))
    except (KeyError, TypeError, ValueError):
        raise ZNodeFormatError(LATEST_PRODUCER_ID_BLOCK, "bad block") from None


def next_producer_id_block(latest: ProducerIdBlock | None, broker: int) -> ProducerIdBlock:
    start = 0 if latest is None else latest.end + 1
    return ProducerIdBlock(broker, start, start + PRODUCER_ID_BLOCK_SIZE - 1)
