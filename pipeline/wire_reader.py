"""An executor's range read over samsa's own wire client, decoded straight into Arrow.

Instead of librdkafka and one ``Message`` per record, a task sends Fetch requests to the
partition's leader with samsa's blocking client (client/blocking.py) and hands each response's
records to ``protocol.records.columns`` (its per-record loop in C), whose buffers become the
Arrow batch (fetch_arrow.py). Connections are kept per Python worker process, by bootstrap
servers and security settings, across tasks (Spark's Kafka source pools its consumers per executor for the same
reason).

It is the executors' default reader (``SAMSA_SPARK_READER=librdkafka`` in their environment
chooses confluent-kafka's). ``unsupported(opts)`` says why a read stays with confluent-kafka:
the compiled decoder is missing (logged once), or the ``kafka.*`` options ask for what this
reader does not do (a SASL mechanism other than PLAIN/SCRAM, other client settings it would
ignore). The next Fetch goes out before the current response is decoded (``next_fetch_offset``,
a walk over the response's batch headers in C, says where it starts, however many batches the
response holds), so the broker works on it meanwhile. TLS and
SASL are read from the same librdkafka keys the confluent-kafka reader is given
(``security.protocol``, ``sasl.mechanism(s)``, ``sasl.username``/``sasl.password``,
``ssl.ca.location``, ``ssl.certificate.location``/``ssl.key.location``/``ssl.key.password``,
``ssl.endpoint.identification.algorithm``), with librdkafka's defaults.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa

from samsa.client.blocking import (RETRIABLE, AuthenticationError, ClientError, Cluster,
                                   SimpleClient, error_text)
from samsa.client.sasl import SUPPORTED_MECHANISMS, SaslClientSettings
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records.columns import COMPILED, PartitionDecoder, next_fetch_offset

from .fetch_arrow import columns_to_batch
from .options import ReadOptions
from .ranges import OffsetRange

log = logging.getLogger(__name__)

READER_ENV = "SAMSA_SPARK_READER"
# The kafka.* options this reader honours, or may ignore (librdkafka tuning it has no use for).
_UNDERSTOOD = frozenset({"bootstrap.servers", "isolation.level", "client.id",
                         "fetch.queue.backoff.ms", "max.partition.fetch.bytes",
                         "fetch.max.bytes", "fetch.wait.max.ms", "socket.timeout.ms",
                         "security.protocol", "sasl.mechanism", "sasl.mechanisms",
                         "sasl.username", "sasl.password", "ssl.ca.location",
                         "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                         "ssl.endpoint.identification.algorithm"})
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PARTITION_FETCH_BYTES = 10 * 1024 * 1024
FETCH_MAX_BYTES = 50 * 1024 * 1024
FETCH_WAIT_MS = 100
_LAST_FETCH_BY_NAME = 12  # v13 names topics by id

_said_slower = False


# The values of READER_ENV that choose the confluent-kafka reader (anything else: this one).
CONFLUENT_KAFKA = frozenset({"librdkafka", "confluent-kafka", "confluent_kafka"})


def wanted() -> bool:
    """This reader is the default; ``SAMSA_SPARK_READER=librdkafka`` (or ``confluent-kafka``)
    in the executors' environment chooses confluent-kafka's."""
    return os.environ.get(READER_ENV, "").strip().lower() not in CONFLUENT_KAFKA


def unsupported(opts: ReadOptions) -> str | None:
    """Why this read cannot use the wire reader (None: it can)."""
    global _said_slower
    if not COMPILED:
        if not _said_slower:
            log.warning("the compiled record decoder is not built: the samsa source reads with "
                        "confluent-kafka")
            _said_slower = True
        return "the compiled record decoder is not built"
    others = sorted(set(opts.client_options) - _UNDERSTOOD)
    if others:
        return f"kafka.{others[0]} is not supported by the wire reader yet"
    options = opts.client_options
    protocol = options.get("security.protocol", "plaintext").strip().upper()
    if protocol not in _PROTOCOLS:
        return f"kafka.security.protocol={protocol} is not one of {', '.join(_PROTOCOLS)}"
    if protocol.startswith("SASL_") and _mechanism(options) not in SUPPORTED_MECHANISMS:
        return f"kafka.sasl.mechanism={_mechanism(options)} is not supported by the wire reader"
    return None


def _mechanism(options: Mapping[str, str]) -> str:
    return (options.get("sasl.mechanism") or options.get("sasl.mechanisms") or "GSSAPI").strip()


def _security(options: Mapping[str, str]) -> tuple[SaslClientSettings | None, ssl.SSLContext | None]:
    """The SASL login and TLS context the librdkafka keys ask for (``unsupported`` checked
    the protocol and mechanism); ClientError naming a missing or unreadable one."""
    protocol = options.get("security.protocol", "plaintext").strip().upper()
    sasl = tls = None
    if protocol.startswith("SASL_"):
        missing = [k for k in ("sasl.username", "sasl.password") if k not in options]
        if missing:
            raise ClientError(f"kafka.{missing[0]} is required with kafka.security.protocol={protocol}")
        sasl = SaslClientSettings(_mechanism(options), options["sasl.username"],
                                  options["sasl.password"])
    if protocol.endswith("SSL"):
        try:
            tls = ssl.create_default_context(cafile=options.get("ssl.ca.location"))
            if options.get("ssl.certificate.location"):
                tls.load_cert_chain(options["ssl.certificate.location"],
                                    options.get("ssl.key.location"), options.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as e:
            raise ClientError(f"the TLS files of kafka.ssl.* cannot be used: {e}") from None
        # librdkafka verifies the broker's host name unless told "none" (since 2.0)
        tls.check_hostname = options.get("ssl.endpoint.identification.algorithm",
                                         "https").strip().lower() == "https"
    return sasl, tls


# Per Python worker process: one Cluster (its connections to every broker) per bootstrap list
# and security settings.
_clusters: dict[tuple, Cluster] = {}


def _cluster_key(options: Mapping[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in options.items()
                        if k == "bootstrap.servers" or k.startswith(("security.", "sasl.", "ssl."))))


def _cluster(options: Mapping[str, str]) -> Cluster:
    key = _cluster_key(options)
    cluster = _clusters.get(key)
    if cluster is not None:
        return cluster
    bootstrap = options["bootstrap.servers"]
    sasl, tls = _security(options)
    errors = []
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        try:
            cluster = Cluster(SimpleClient(address, client_id="samsa-spark-executor",
                                           sasl=sasl, tls=tls))
        except AuthenticationError:
            raise
        except ssl.SSLCertVerificationError as e:
            raise AuthenticationError(f"{address}: {e}") from None
        except (OSError, ClientError) as e:
            errors.append(f"{address}: {e}")
            continue
        _clusters[key] = cluster
        return cluster
    raise ClientError(f"no broker of {bootstrap} could be reached: {'; '.join(errors)}")


def _drop(options: Mapping[str, str]) -> None:
    cluster = _clusters.pop(_cluster_key(options), None)
    if cluster is not None:
        cluster.close()


def read_range_wire(opts: ReadOptions, rng: OffsetRange, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Records ``[rng.start, rng.end)`` as RecordBatches of at most ``batch_rows`` rows, with the
    librdkafka reader's data-loss rules (client.read_range)."""
    from .client import DATA_LOSS_HINT, DataLossError, KafkaSourceError

    where = f"topic-partition {rng.topic}-{rng.partition}"
    tp = (rng.topic, rng.partition)
    bootstrap = opts.bootstrap_servers
    committed = opts.client_options.get("isolation.level", "read_uncommitted").strip().lower() \
        == "read_committed"
    poll_timeout = opts.poll_timeout_ms / 1000.0
    part_bytes = int(opts.client_options.get("max.partition.fetch.bytes", PARTITION_FETCH_BYTES))
    client_options = {**opts.client_options, "bootstrap.servers": bootstrap}
    deadline = time.monotonic() + poll_timeout
    cluster: Cluster | None
    while True:
        # A broker that died (the pooled cluster's bootstrap connection, or the leader) is
        # tried again on fresh connections, through every bootstrap server, within the poll
        # timeout, as the confluent-kafka reader retries its offset lookup
        try:
            cluster = _cluster(client_options)
            low = cluster.list_offsets({tp: -2})[tp]
            high = cluster.list_offsets({tp: -1})[tp]
            break
        except (ClientError, OSError) as e:
            _drop(client_options)
            if isinstance(e, AuthenticationError) or time.monotonic() + 0.5 >= deadline:
                raise KafkaSourceError(f"Cannot get the offsets of {where} from "
                                       f"kafka.bootstrap.servers='{bootstrap}': {e}") from None
            log.warning("getting the offsets of %s: %s (retrying)", where, e)
            time.sleep(0.5)
    start, end = rng.start, rng.end
    if start < low or end > high:
        lost = f"offsets [{start}, {end}) were to be read, the partition now holds [{low}, {high})"
        if opts.fail_on_data_loss:
            raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where}: {lost}.")
        log.warning("failOnDataLoss=false: skipping missing records of %s: %s", where, lost)
        start, end = max(start, low), min(end, high)
        if start >= end:
            return
    decoder = PartitionDecoder(rng.topic, rng.partition, with_headers=opts.include_headers,
                               read_committed=committed)
    F = FetchRequest

    def fetch(offset: int) -> FetchRequest:
        return F(replica_id=-1, max_wait_ms=FETCH_WAIT_MS, min_bytes=1,
                 max_bytes=FETCH_MAX_BYTES, isolation_level=1 if committed else 0,
                 session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                 topics=[F.FetchTopic(topic=rng.topic, partitions=[F.FetchPartition(
                     partition=rng.partition, current_leader_epoch=-1, fetch_offset=offset,
                     last_fetched_epoch=-1, log_start_offset=-1,
                     partition_max_bytes=part_bytes)])])

    position = start
    last_progress = time.monotonic()
    leader = -1
    # The Fetch sent ahead (offset, correlation id) on the leader's connection: the broker
    # reads and sends the next response while this one is decoded (and handed to Spark).
    ahead: tuple[int, int] | None = None
    while position < end:
        if time.monotonic() - last_progress > poll_timeout:
            raise KafkaSourceError(
                f"No records from {where} at offset {position} (reading [{start}, {end})) within "
                f"kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
        try:
            if cluster is None:
                cluster = _cluster(client_options)
            if leader < 0:
                leader = cluster.leaders(rng.topic).get(rng.partition, -1)
                if leader < 0:
                    time.sleep(0.1)
                    continue
            conn = cluster.broker(leader)
            if ahead is None or ahead[0] != position:
                # (a Fetch sent ahead for another offset is answered and dropped unread)
                ahead = (position, conn.submit(ApiKey.FETCH, fetch(position),
                                               highest=_LAST_FETCH_BY_NAME))
            resp = conn.receive(ahead[1])
            ahead = None
        except (ClientError, OSError) as e:
            # the leader died or moved: ask again who leads, on fresh connections; when asking
            # failed (the bootstrap broker died), through every bootstrap server again
            if isinstance(e, AuthenticationError):
                raise KafkaSourceError(f"Reading {where} at offset {position} failed: "
                                       f"{e}") from None
            log.warning("reading %s at offset %d: %s (retrying)", where, position, e)
            if cluster is not None and leader >= 0:
                cluster.forget(leader)
            else:
                _drop(client_options)
                cluster = None
            leader, ahead = -1, None
            time.sleep(0.1)
            continue
        code = resp.error_code or resp.responses[0].partitions[0].error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if opts.fail_on_data_loss:
                raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where} from "
                                    f"offset {position}: {error_text(code)}")
            break
        if code in RETRIABLE:
            assert cluster is not None  # (it answered)
            cluster.forget(leader)
            leader = -1
            time.sleep(0.1)
            continue
        if code:
            raise KafkaSourceError(f"Reading {where} at offset {position} failed: "
                                   f"{error_text(code)}")
        pd = resp.responses[0].partitions[0]
        records = pd.records or b""
        following = next_fetch_offset(records, position)
        if position < following < end:
            try:
                ahead = (following, conn.submit(ApiKey.FETCH, fetch(following),
                                                highest=_LAST_FETCH_BY_NAME))
            except ClientError:
                ahead = None  # (the next round finds the connection broken, and says so)
        aborted = [(a.producer_id, a.first_offset) for a in pd.aborted_transactions or ()]
        # The whole response, whatever its rows: a fetch holds at most max.partition.fetch.bytes,
        # and a response decoded in part would be fetched again from there.
        nxt = decoder.decode(records, position, aborted, end)
        if nxt > position:
            position = nxt
            last_progress = time.monotonic()
        elif decoder.columns.rows and records:
            # the columns are full (2 GiB of keys or values): hand them over, then go on
            yield from _sliced(columns_to_batch(decoder.take(), rng.topic, rng.partition), batch_rows)
            continue
        elif pd.high_watermark <= position and opts.fail_on_data_loss:
            raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where}: offsets "
                                f"up to {end} were to be read, the log ends at "
                                f"{pd.high_watermark}.")
        elif pd.high_watermark <= position:
            break
        if decoder.columns.rows >= batch_rows:
            yield from _sliced(columns_to_batch(decoder.take(), rng.topic, rng.partition), batch_rows)
    if decoder.columns.rows:
        yield from _sliced(columns_to_batch(decoder.take(), rng.topic, rng.partition), batch_rows)


def _sliced(batch: pa.RecordBatch, rows: int) -> Iterator[pa.RecordBatch]:
    """``batch`` in pieces of at most ``rows`` rows (slices share its buffers: no copy). The
    decoder stops after the record batch that fills the columns, which may take it past."""
    for at in range(0, batch.num_rows, rows):
        yield batch.slice(at, rows)
