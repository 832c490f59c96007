"""A blocking Kafka client for samsa's own command line tools.

One connection, one request at a time (``submit``/``receive`` let a reader keep
its next Fetch in flight), over the same sans-IO core as the asyncio client (``client/core.py``): versions are picked from what the
broker advertises in ApiVersions, capped at what protocol/ can encode.

``Cluster`` adds what a tool needs once a cluster has more than one broker:
connections to each partition leader and group coordinator, opened at the
address Metadata (or FindCoordinator) advertises for it.

How a tool gets the SASL login and TLS context it hands ``run_tool`` from its
flags (``--command-config`` and the like) is ``client/properties.py``'s.
"""
from __future__ import annotations

import socket
import ssl
import sys
import time
from typing import Callable

from samsa.client.core import ClientCore, NoCommonVersionError
from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.messages import (ApiVersionsRequest, FindCoordinatorRequest, ListOffsetsRequest,
                               MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest)
from samsa.protocol.model import ApiKey

from samsa.client.sasl import (ReauthenticationClock, SaslClientError, SaslClientSettings,
                                   authenticate)


class ClientError(Exception):
    pass


class AuthenticationError(ClientError):
    """The broker refused this client's SASL login (trying again will not help)."""


class SimpleClient:
    def __init__(self, bootstrap: str, client_id: str | None = "samsa-cli", timeout: float = 30.0,
                 sasl: SaslClientSettings | None = None, tls: ssl.SSLContext | None = None):
        host, _, port = bootstrap.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"expected host:port, got {bootstrap!r}")
        self.address = bootstrap
        self._endpoint = (host or "localhost", int(port))
        self._timeout = timeout
        self.tls = tls  # an SSL listener (the tool's --command-config said so)
        self.core = ClientCore(client_id)
        self.sock = self._connect()
        # True from the moment a request is registered until its answer is
        # read: an exception that leaves it set (Ctrl-C, a timeout) may have
        # left half a request sent or half an answer unread, so the stream is
        # out of step with the core and the next call starts on a fresh
        # connection instead of reading another request's answer.
        self._unsettled = False
        self._sasl = sasl
        # KIP-368: a SASL session that ends (connections.max.reauth.ms) is
        # renewed on this connection before the request that would find it
        # ended, as Kafka's clients do (a console consumer runs for hours).
        self._session = ReauthenticationClock()
        self._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        self._authenticate()

    def _authenticate(self) -> None:
        """SASL on a SASL_PLAINTEXT listener (SaslHandshake v1, SaslAuthenticate);
        the same again to re-authenticate. Starts the session's clock."""
        if self._sasl is None:
            return
        handshake = self._versioned_call(
            17, SaslHandshakeRequest(mechanism=self._sasl.mechanism), highest=1)
        if handshake.error_code:
            raise AuthenticationError(f"SASL mechanism {self._sasl.mechanism} refused by the broker "
                              f"(enabled: {', '.join(handshake.mechanisms)})")
        session_lifetime_ms = 0

        def exchange(token: bytes) -> bytes:
            nonlocal session_lifetime_ms
            answer = self._versioned_call(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code:
                raise AuthenticationError(error_text(answer.error_code, answer.error_message))
            session_lifetime_ms = answer.session_lifetime_ms  # the last answer's counts
            return bytes(answer.auth_bytes)
        try:
            authenticate(self._sasl, exchange)
        except SaslClientError as e:
            raise AuthenticationError(str(e)) from None
        self._session.authenticated(session_lifetime_ms)

    def _reauthenticate_if_due(self) -> None:
        """Between requests (one at a time: nothing is in flight here). A
        failure leaves the connection to be replaced by the next call."""
        if self._sasl is None or self._unsettled or not self._session.due:
            return  # an unsettled connection is replaced (and authenticated) anyway
        if self.core.in_flight:
            return  # (a submitted request's answer is still to come: the next call, then)
        try:
            self._authenticate()
        except ClientError as e:
            self._unsettled = True
            raise ClientError(f"SASL re-authentication at {self.address} failed: {e}") from None

    @property
    def sasl(self) -> SaslClientSettings | None:
        """How this client authenticates (the same for every broker of a cluster)."""
        return self._sasl

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._endpoint, timeout=self._timeout)
        if self.tls is None:
            return sock
        try:
            return self.tls.wrap_socket(sock, server_hostname=self._endpoint[0])
        except BaseException:
            sock.close()
            raise

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        return self.core.broker_versions

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _reconnect(self) -> None:
        self.sock.close()
        self.core = ClientCore(self.core.client_id)
        try:
            self.sock = self._connect()
        except OSError as e:
            raise ClientError(f"cannot reach the broker at {self.address}: "
                              f"{e.strerror or e}") from None
        self._unsettled = False
        self._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        self._authenticate()

    def _call(self, api_key: int, version: int, request):
        if self._unsettled:
            self._reconnect()
        self._unsettled = True
        correlation_id, data = self.core.request(request, api_key=api_key, version=version)
        try:
            response = self._exchange(correlation_id, data)
        except OSError as e:
            # a ClientError, so that an EPIPE here is not mistaken for the
            # tool's stdout reader going away (which ends a tool quietly)
            raise ClientError(f"connection to {self.address} broke: "
                              f"{e.strerror or e}") from None
        self._unsettled = False
        return response

    def _exchange(self, correlation_id: int, data: bytes):
        self.sock.sendall(data)
        return self._answer(correlation_id)

    def _answer(self, correlation_id: int):
        """The response to ``correlation_id``; answers to older requests that nobody
        waited for (``submit`` without ``receive``) are read and dropped on the way."""
        while True:
            try:
                frame = self._read_exactly(self.core.frame_size(self._read_exactly(4)))
                answered, response = self.core.receive_frame(frame)
            except ProtocolError as e:
                raise ClientError(f"bad response from the broker: {e}") from None
            if answered == correlation_id:
                return response

    def _read_exactly(self, size: int) -> bytearray:
        """The next ``size`` bytes, read straight into a buffer of their own: a
        Fetch response of many megabytes is received once and decoded in place
        (its records are views of this buffer), not appended to a stream
        buffer, sliced out and copied again."""
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ClientError(f"the broker at {self.address} closed the connection")
            got += n
        return buf

    def version_for(self, api_key: int) -> int:
        try:
            return self.core.version_for(api_key)
        except NoCommonVersionError as e:
            raise ClientError(str(e)) from None

    def call(self, api_key: int, request, highest: int | None = None):
        """Send ``request`` at the highest common version (at most ``highest``)."""
        self._reauthenticate_if_due()
        return self._versioned_call(api_key, request, highest)

    def _versioned_call(self, api_key: int, request, highest: int | None = None):
        try:
            version = self.core.version_for(api_key, highest)
        except NoCommonVersionError as e:
            raise ClientError(str(e)) from None
        return self._call(api_key, version, request)

    def submit(self, api_key: int, request, highest: int | None = None) -> int:
        """Send ``request`` without waiting for its answer; its correlation id, for
        ``receive``. A reader keeps its next Fetch in flight this way while it decodes the
        current response. Answers come back in request order: one that is never received is
        read and dropped by the next call or ``receive`` on this connection."""
        return self._send(api_key, request, highest, expects_response=True)

    def receive(self, correlation_id: int):
        """The response to a request ``submit`` sent on this connection."""
        if self._unsettled or not self.core.outstanding(correlation_id):
            # the connection was replaced since (a failed call): the request is lost
            raise ClientError(f"the request to {self.address} was lost with its connection")
        self._unsettled = True
        try:
            response = self._answer(correlation_id)
        except OSError as e:
            raise ClientError(f"connection to {self.address} broke: "
                              f"{e.strerror or e}") from None
        self._unsettled = False
        return response

    def send(self, api_key: int, request, highest: int | None = None) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        self._send(api_key, request, highest, expects_response=False)

    def _send(self, api_key: int, request, highest: int | None, expects_response: bool) -> int:
        self._reauthenticate_if_due()
        try:
            version = self.core.version_for(api_key, highest)
        except NoCommonVersionError as e:
            raise ClientError(str(e)) from None
        if self._unsettled:
            self._reconnect()
        self._unsettled = True
        correlation_id, data = self.core.request(request, api_key=api_key, version=version,
                                                 expects_response=expects_response)
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise ClientError(f"connection to {self.address} broke: {e.strerror or e}") from None
        self._unsettled = False
        return correlation_id


# Errors after which fresh metadata (a new leader, a loaded coordinator) may help.
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                       ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                       ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_COORDINATOR,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NETWORK_EXCEPTION})


class Cluster:
    """The brokers of one cluster as a tool sees them: the bootstrap connection
    for cluster-wide requests, and one connection per other broker, opened when
    first needed at the host and port Metadata advertised for it."""

    def __init__(self, bootstrap: SimpleClient) -> None:
        self.bootstrap = bootstrap
        self.addresses: dict[int, str] = {}
        self._conns: dict[int, SimpleClient] = {}

    def metadata(self, topics: list[str] | None, *, auto_create: bool = False):
        """A Metadata response for ``topics`` (None: all); learns broker addresses."""
        req = MetadataRequest(allow_auto_topic_creation=auto_create, topics=None if topics is None
                              else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
        resp = self.bootstrap.call(ApiKey.METADATA, req)
        for b in resp.brokers:
            self._learn(b.node_id, f"{b.host}:{b.port}")
        return resp

    def brokers(self) -> dict[int, str]:
        """{node id: host:port} of every live broker, from Metadata (no topics)."""
        resp = self.metadata([])
        return {b.node_id: f"{b.host}:{b.port}" for b in sorted(resp.brokers,
                                                                key=lambda b: b.node_id)}

    def _learn(self, node_id: int, address: str) -> None:
        if self.addresses.get(node_id, address) != address:
            self._drop(node_id)  # the broker moved: reconnect on next use
        self.addresses[node_id] = address

    def leaders(self, topic: str, *, auto_create: bool = False,
                attempts: int = 10) -> dict[int, int]:
        """{partition: leader node id (-1: none)} of ``topic``. A topic being
        created (or a metadata store catching up) is waited for, briefly."""
        for attempt in range(attempts):
            t = self.metadata([topic], auto_create=auto_create).topics[0]
            if t.error_code == 0 and t.partitions:
                return {p.partition_index: p.leader_id for p in t.partitions}
            code = t.error_code or ErrorCode.LEADER_NOT_AVAILABLE
            # an unknown topic is final unless we asked for it to be created
            final = code not in RETRIABLE or (code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                              and not auto_create)
            if final or attempt == attempts - 1:
                raise ClientError(f"topic {topic}: {error_text(code)}")
            time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    def list_offsets(self, wanted: dict[tuple[str, int], int],
                     attempts: int = 5) -> dict[tuple[str, int], int]:
        """ListOffsets at each partition's leader: {(topic, partition): timestamp}
        (-1 latest, -2 earliest, or epoch ms) -> {(topic, partition): offset}
        (-1 for a timestamp after the last record)."""
        out: dict[tuple[str, int], int] = {}
        todo = dict(wanted)
        L = ListOffsetsRequest
        for attempt in range(attempts):
            by_leader: dict[int, dict[str, list[int]]] = {}
            for topic in sorted({t for t, _ in todo}):
                leaders = self.leaders(topic)
                for (t, p) in todo:
                    if t == topic:
                        if p not in leaders:
                            raise ClientError(f"topic {t} has no partition {p}")
                        by_leader.setdefault(leaders[p], {}).setdefault(t, []).append(p)
            retry: dict[tuple[str, int], int] = {}
            last_error = ErrorCode.LEADER_NOT_AVAILABLE
            for leader, topics in by_leader.items():
                if leader < 0:
                    retry.update({(t, p): todo[(t, p)] for t, ps in topics.items() for p in ps})
                    continue
                resp = self.broker(leader).call(ApiKey.LIST_OFFSETS, L(replica_id=-1, isolation_level=0, topics=[
                    L.ListOffsetsTopic(name=t, partitions=[
                        L.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                               timestamp=todo[(t, p)], max_num_offsets=1)
                        for p in sorted(ps)]) for t, ps in sorted(topics.items())]))
                for rt in resp.topics:
                    for rp in rt.partitions:
                        tp = (rt.name, rp.partition_index)
                        if rp.error_code == 0:
                            out[tp] = rp.offset
                        elif rp.error_code in RETRIABLE and attempt < attempts - 1:
                            retry[tp] = todo[tp]
                            last_error = rp.error_code
                        else:
                            raise ClientError(f"{tp[0]}:{tp[1]}: {error_text(rp.error_code)}")
            if not retry:
                return out
            todo = retry
            time.sleep(0.1 * (attempt + 1))
        raise ClientError(f"no leader for {', '.join(f'{t}:{p}' for t, p in sorted(todo))}: "
                          f"{error_text(last_error)}")

    def controller(self) -> SimpleClient:
        """The connection to the controller (Metadata's controller id), which
        handles reassignments and leader elections."""
        controller_id = self.metadata([]).controller_id
        if controller_id < 0:
            raise ClientError("the cluster has no controller now")
        return self.broker(controller_id)

    def broker(self, node_id: int) -> SimpleClient:
        """The connection to broker ``node_id`` (opened on first use)."""
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        address = self.addresses.get(node_id)
        if address is None:
            raise ClientError(f"broker {node_id} is not in the cluster's metadata")
        try:
            conn = SimpleClient(address, client_id=self.bootstrap.core.client_id,
                                sasl=self.bootstrap.sasl, tls=self.bootstrap.tls)
        except OSError as e:
            raise ClientError(f"cannot reach broker {node_id} at {address}: "
                              f"{e.strerror or e}") from None
        self._conns[node_id] = conn
        return conn

    def forget(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (after it broke or stopped leading)."""
        self._drop(node_id)

    def coordinator(self, group_id: str, attempts: int = 10) -> SimpleClient:
        """The connection to ``group_id``'s coordinator, asked with FindCoordinator;
        a coordinator still loading is waited for, briefly."""
        for attempt in range(attempts):
            node, host, port, code, message = self._find_coordinator(group_id)
            if code == 0:
                self._learn(node, f"{host}:{port}")
                return self.broker(node)
            if code not in RETRIABLE or attempt == attempts - 1:
                raise ClientError(f"cannot find the coordinator of group {group_id}: "
                                  f"{error_text(code, message)}")
            time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def coordinator_node(self, group_id: str) -> tuple[int, str, int]:
        """(node id, host, port) of ``group_id``'s coordinator (what tools print)."""
        node, host, port, code, message = self._find_coordinator(group_id)
        if code:
            raise ClientError(f"cannot find the coordinator of group {group_id}: "
                              f"{error_text(code, message)}")
        return node, host, port

    def _find_coordinator(self, group_id: str) -> tuple[int, str, int, int, str | None]:
        if self.bootstrap.version_for(ApiKey.FIND_COORDINATOR) >= 4:  # v4+ batches keys
            resp = self.bootstrap.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key_type=0,
                                                                  coordinator_keys=[group_id]))
            c = resp.coordinators[0]
            return c.node_id, c.host, c.port, c.error_code, c.error_message
        resp = self.bootstrap.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group_id, key_type=0))
        return resp.node_id, resp.host, resp.port, resp.error_code, resp.error_message

    def _drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for node_id in list(self._conns):
            self._drop(node_id)


def error_text(code: int, message: str | None = None) -> str:
    """Kafka's name for an error code, with the broker's message if any."""
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


def run_tool(prog: str, bootstrap: str, action: Callable[[SimpleClient], int],
             sasl: SaslClientSettings | None = None, tls: ssl.SSLContext | None = None) -> int:
    """Connect to ``bootstrap`` (one ``host:port`` or a comma-separated list,
    tried in order, as Kafka's --bootstrap-server takes) and run ``action``; an
    unreachable broker or a broken connection is one line naming the address,
    never a traceback. ``sasl`` / ``tls``: how to reach a SASL or SSL
    listener (from --command-config)."""
    client = None
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()] or [bootstrap]:
        try:
            client = SimpleClient(address, sasl=sasl, tls=tls)
            break
        except (OSError, ValueError) as e:  # ValueError: a port that is not a number
            error = getattr(e, "strerror", None) or e
        except ClientError as e:  # refused authentication (SASL, or TLS certificates)
            print(f"{prog}: {e}", file=sys.stderr)
            return 1
    if client is None:
        print(f"{prog}: cannot reach the broker at {bootstrap}: {error}", file=sys.stderr)
        return 1
    try:
        with client:
            return action(client)
    except BrokenPipeError:
        raise  # the reader went away (| head): the command line ends quietly
    except (OSError, ClientError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1


def run_cluster_tool(prog: str, bootstrap: str, action: Callable[[Cluster], int],
                     sasl: SaslClientSettings | None = None,
                     tls: ssl.SSLContext | None = None) -> int:
    """``run_tool`` for tools that talk to leaders and coordinators, not only
    to the bootstrap broker."""
    def with_cluster(client: SimpleClient) -> int:
        cluster = Cluster(client)
        try:
            return action(cluster)
        finally:
            cluster.close()
    return run_tool(prog, bootstrap, with_cluster, sasl, tls)
