"""Connection creation rates (KIP-612), decided the way Kafka's
ConnectionQuotas decides them.

Three bounds, each a rate of new connections per second measured like every
other quota (quota.window.num windows of quota.window.size.seconds, see
rate.py):

- broker-wide ``max.connection.creation.rate``, over every listener except
  the protected one (the inter-broker listener of a broker with several
  listeners), so clients reconnecting in a storm cannot keep other brokers
  out;
- per listener, ``listener.name.<l>.max.connection.creation.rate``, else
  the broker-wide value (BrokerConfig.listener_value resolves it, as Kafka
  configures a listener from the broker's keys with its prefix overriding);
- per client address, the ``connection_creation_rate`` of the ip entity
  (``ips/<ip>``, else ``ips/<default>``); unset means no bound at all.

A connection over the broker or listener rate is not refused: the acceptor
waits ``accept_delay_ms`` before it takes the next one (connections queue in
the listen backlog meanwhile). A connection over its address's rate is
closed after ``ip_throttle_ms`` without being served, and it is taken back
out of every measurement it was recorded in, so it counts neither against
the address's rate nor against anyone else's.

Pure decisions on caller-supplied times in milliseconds; any thread (one
lock: the acceptors, the metadata store's change notices and the metrics
scrape all call in).
"""
from __future__ import annotations

import ipaddress
import threading
from typing import Mapping, NamedTuple

from samsa.config.values import INT_MAX

from .manager import IdleExpiry, QuotaWindow
from .rate import WindowedRate, throttle_time_ms

# Kafka's default for every connection creation rate (Int.MaxValue): no bound.
UNBOUNDED = INT_MAX


def canonical_ip(text: str) -> str:
    """One spelling per address, so an ip entity matches its peers however
    either is written: IPv6 compressed, IPv4-mapped IPv6 (a dual-stack
    listener's view of an IPv4 peer) as the IPv4 address, as Java's
    InetAddress sees both. Text that is no address is kept as it is."""
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


class _Sensor:
    """A measured rate with its bound (Kafka: a Sensor with a quota)."""
    __slots__ = ("rate", "bound", "last_used_ms")

    def __init__(self, window: QuotaWindow, bound: int, now_ms: float = 0.0) -> None:
        self.rate = WindowedRate(window.samples, window.window_ms)
        self.bound = bound
        self.last_used_ms = now_ms

    def record(self, now_ms: float, max_throttle_ms: float) -> int:
        """Count one connection; how long to hold it back to get back within
        the bound (0 within it), never more than ``max_throttle_ms``."""
        self.rate.record(1.0, now_ms)
        if now_ms > self.last_used_ms:
            self.last_used_ms = now_ms
        if self.bound == UNBOUNDED:  # measured for the metrics, never over it
            return 0
        throttle = throttle_time_ms(self.rate.rate(now_ms), self.bound,
                                    self.rate.window_size(now_ms))
        return int(min(throttle, max_throttle_ms))

    def unrecord(self, now_ms: float) -> None:
        self.rate.record(-1.0, now_ms)


class _Listener:
    __slots__ = ("protected", "sensor", "throttles", "ip_throttles")

    def __init__(self, window: QuotaWindow, protected: bool, rate: int) -> None:
        self.protected = protected
        self.sensor = _Sensor(window, rate)
        # Throttle times handed out, for their average (Kafka's Avg over the
        # quota windows, of non-zero throttles only): connection-accept- and
        # ip-connection-accept-throttle-time.
        self.throttles = WindowedRate(window.samples, window.window_ms)
        self.ip_throttles = WindowedRate(window.samples, window.window_ms)


class ListenerRates(NamedTuple):
    """One listener's measurements, for the metrics."""
    listener: str
    accept_rate: float         # connection-accept-rate{listener}
    throttle_time: float       # connection-accept-throttle-time{listener}
    ip_throttle_time: float    # ip-connection-accept-throttle-time{listener}


class ConnectionRateQuotas:
    """The broker's connection creation rates: one per broker, shared by
    its listeners (as Kafka's ConnectionQuotas)."""

    def __init__(self, window: QuotaWindow, broker_rate: int = UNBOUNDED) -> None:
        self.window = window
        # Kafka bounds a connection's delay to one quota window
        self.max_throttle_ms = window.window_ms
        self._lock = threading.Lock()
        self._broker = _Sensor(window, broker_rate)
        self._listeners: dict[str, _Listener] = {}
        self._ip_rates: dict[str, int] = {}
        self._default_ip_rate = UNBOUNDED
        self._ips: dict[str, _Sensor] = {}
        self._expiry = IdleExpiry()

    # ------------------------------------------------------------ configuration

    def add_listener(self, name: str, rate: int = UNBOUNDED, *, protected: bool = False) -> None:
        """A listener, its rate, and whether it is the protected
        inter-broker listener (not bounded by the broker-wide rate)."""
        with self._lock:
            self._listeners[name] = _Listener(self.window, protected, rate)

    def set_rates(self, broker_rate: int, listener_rates: Mapping[str, int]) -> None:
        """The configured rates now (start-up, dynamic config changes); the
        measurements so far are kept and judged against them."""
        with self._lock:
            self._broker.bound = broker_rate
            for name, rate in listener_rates.items():
                self._listeners[name].sensor.bound = rate

    def set_ip_rate(self, ip: str | None, rate: int | None) -> None:
        """An ip entity's connection_creation_rate (``ip`` None: the
        <default> entity; ``rate`` None: removed). Addresses measured so far
        keep their measurements under the new bound; those left without one
        are forgotten (Kafka removes their sensors)."""
        with self._lock:
            if ip is None:
                self._default_ip_rate = UNBOUNDED if rate is None else rate
            elif rate is None:
                self._ip_rates.pop(canonical_ip(ip), None)
            else:
                self._ip_rates[canonical_ip(ip)] = rate
            for addr, sensor in list(self._ips.items()):
                sensor.bound = self._ip_rate(addr)
                if sensor.bound == UNBOUNDED:  # no quota any more: not measured
                    del self._ips[addr]

    def _ip_rate(self, ip: str) -> int:
        return self._ip_rates.get(ip, self._default_ip_rate)

    # ------------------------------------------------------------ decisions

    def accept_delay_ms(self, listener: str, now_ms: float) -> int:
        """Count a connection accepted on ``listener``; how long the
        acceptor waits before it goes on (the longer of the broker-wide and
        the listener's throttle; the protected listener only has its own)."""
        with self._lock:
            lst = self._listeners[listener]
            delay = 0
            if not lst.protected:
                delay = self._broker.record(now_ms, self.max_throttle_ms)
            delay = max(delay, lst.sensor.record(now_ms, self.max_throttle_ms))
            if delay > 0:
                lst.throttles.record(delay, now_ms)
            return delay

    def ip_throttle_ms(self, listener: str, ip: str, now_ms: float) -> int:
        """Count a connection from ``ip`` (after ``accept_delay_ms``); 0 to
        serve it, else how long to hold it before closing it unserved. A
        throttled connection is taken back out of the address's, the
        listener's and the broker's measurements."""
        with self._lock:
            if not self._ip_rates and self._default_ip_rate == UNBOUNDED:
                return 0  # no ip quota at all: nothing to measure
            addr = canonical_ip(ip)
            bound = self._ip_rate(addr)
            if bound == UNBOUNDED:  # Kafka measures only addresses with a quota
                return 0
            # Kafka's IP sensors expire as the client quota sensors do
            self._expiry.sweep(self._ips, now_ms)
            sensor = self._ips.get(addr)
            if sensor is None:
                sensor = self._ips[addr] = _Sensor(self.window, bound, now_ms)
            throttle = sensor.record(now_ms, self.max_throttle_ms)
            if throttle <= 0:
                return 0
            sensor.unrecord(now_ms)
            lst = self._listeners[listener]
            if not lst.protected:
                self._broker.unrecord(now_ms)
            lst.sensor.unrecord(now_ms)
            lst.ip_throttles.record(throttle, now_ms)
            return throttle

    # ------------------------------------------------------------ metrics

    def broker_accept_rate(self, now_ms: float) -> float:
        """broker-connection-accept-rate: connections per second, over the
        listeners the broker-wide rate bounds."""
        with self._lock:
            return self._broker.rate.rate(now_ms)

    def listener_rates(self, now_ms: float) -> list[ListenerRates]:
        with self._lock:
            return [ListenerRates(name, lst.sensor.rate.rate(now_ms),
                                  lst.throttles.average(now_ms),
                                  lst.ip_throttles.average(now_ms))
                    for name, lst in sorted(self._listeners.items())]

    def ip_accept_rates(self, now_ms: float) -> list[tuple[str, float]]:
        """connection-accept-rate{ip}: per address with a quota (the
        metrics page's gauge)."""
        with self._lock:
            return [(addr, s.rate.rate(now_ms)) for addr, s in sorted(self._ips.items())]


__all__ = ["ConnectionRateQuotas", "ListenerRates", "UNBOUNDED", "canonical_ip"]
