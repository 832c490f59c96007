"""A connection of an SSL (or SASL_SSL) listener: TLS over the raw socket.

The plaintext Connection (connection.py) stays as it is; this subclass
replaces only the two ends that touch the socket:

- reading: ciphertext is received into an ``ssl.MemoryBIO`` and decrypted by an
  ``ssl.SSLObject`` straight into the connection's receive buffer (``read``
  with a buffer), so framing, pipelining and memory accounting are the
  plaintext code's, unchanged. The handshake comes first; no frame is
  dispatched before it completes.
- writing: the write queue (bytes parts and file regions, in response order)
  is encrypted a chunk at a time and the ciphertext sent with ``send``. File
  regions cannot go out with sendfile: the kernel would have to encrypt (kTLS),
  and Python 3.11's ssl module cannot hand a session's keys to the kernel.
  So a region is read with ``os.pread`` (from the page cache) and encrypted
  here; bench/bench_tls.py measures what that costs against plaintext. (The
  memory BIOs cost little: 0.68 s of server CPU per GB encrypted and sent,
  against 0.64 for an ``ssl.SSLSocket``; the cipher is most of it.)
  At most one chunk of ciphertext waits for the socket at a time, so a slow
  reader holds back plaintext in the write queue, where the backpressure of
  the plaintext code already counts it.

A client that fails the handshake (plaintext bytes, garbage, an untrusted or
missing client certificate when ssl.client.auth=required) is closed with one
rate-limited log line. With a verified client certificate on an SSL listener
the connection's principal is User:<subject DN mapped by
ssl.principal.mapping.rules>; without one it stays User:ANONYMOUS. (On
SASL_SSL listeners SASL decides the principal, as in Kafka.)
"""
from __future__ import annotations

import os
import socket
import ssl
from typing import TYPE_CHECKING, cast

from samsa.broker.network.connection import CHUNK, Connection, SockAddress, _Region
from samsa.broker.security.principal import user
from samsa.broker.security.ssl_principal import NoMatchingRule, subject_dn

if TYPE_CHECKING:  # pragma: no cover
    from samsa.broker.network.processor import Processor

# Ciphertext received per recv call, and plaintext encrypted per step.
RAW_CHUNK = 256 * 1024
PLAIN_CHUNK = 256 * 1024
# Small response parts are joined before encryption: one TLS record for a
# response header and its body instead of one each.
JOIN_BELOW = 16 * 1024


class TlsConnection(Connection):
    __slots__ = ("_tls", "_bio_in", "_bio_out", "_handshaken", "_cipher_out", "_mapper",
                 "_drain_scheduled", "_peer_done")

    def __init__(self, proc: "Processor", sock: socket.socket, peer: SockAddress,
                 connection_id: str) -> None:
        super().__init__(proc, sock, peer, connection_id)
        tls = proc.server.tls
        if tls is None:  # the processor makes TlsConnections for TLS listeners only
            raise ValueError(f"connection {connection_id}: a TLS connection on a listener without TLS")
        self._bio_in = ssl.MemoryBIO()
        self._bio_out = ssl.MemoryBIO()
        self._tls = tls.context.wrap_bio(self._bio_in, self._bio_out, server_side=True)
        self._mapper = tls.principal_mapper
        self._handshaken = False
        self._cipher_out: memoryview | None = None  # ciphertext the socket did not take yet
        self._drain_scheduled = False
        self._peer_done = False  # the peer's close_notify was read: nothing more comes

    @property
    def idle(self) -> bool:
        return super().idle and self._cipher_out is None

    # ------------------------------------------------------------------ reading

    def _on_readable(self) -> None:
        sock = self._sock
        eof = False
        for _ in range(4):  # bounded, as the plaintext reader
            try:
                data = sock.recv(RAW_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self.close(f"receive failed: {e}")
                return
            if not data:
                eof = True
                break
            self._bio_in.write(data)
            self.last_active = self._loop.time()
            self._proc.bytes_in += len(data)
            if len(data) < RAW_CHUNK:
                break
        self._decrypt()
        if eof and not self.closed:
            self._on_eof()

    def _decrypt(self) -> None:
        if not self._handshaken:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                self._send_cipher()
                return
            except (ssl.SSLError, ValueError) as e:
                self._send_cipher()  # the alert, if the socket takes it
                self._rate_log.warning(
                    "tls-handshake", "closing connection %s: TLS handshake failed: %s",
                    self.ctx.connection_id, getattr(e, "reason", None) or e)
                self.close(None)
                return
            self._handshaken = True
            if not self._authenticated():
                return
            self._send_cipher()
        self._read_plain()

    def _authenticated(self) -> bool:
        """Name the peer by its certificate (SSL listeners); False: refused."""
        cert = self._tls.getpeercert()
        ctx = self.ctx
        if cert and ctx.security_protocol == "SSL":
            # ssl's getpeercert(): the subject is its RDNs, each a tuple of (name, value) pairs
            dn = subject_dn(cast("tuple[tuple[tuple[str, str], ...], ...]", cert.get("subject", ())))
            try:
                ctx.principal = user(self._mapper.name(dn))
            except NoMatchingRule as e:
                self._rate_log.warning("tls-principal", "closing connection %s: %s",
                                       ctx.connection_id, e)
                self.close(None)
                return False
            # An authentication: worth a line (clients with certificates are
            # few and keep their connections).
            self._log.info("connection %s: TLS client certificate %s, principal %s",
                           ctx.connection_id, dn, ctx.principal)
        else:
            self._log.debug("connection %s: %s %s, principal %s", ctx.connection_id,
                            self._tls.version(), (self._tls.cipher() or ("?",))[0], ctx.principal)
        return True

    def _read_plain(self) -> None:
        """Decrypt into the receive buffer and dispatch frames, unless paused
        (after a peer EOF too: requests received before it are answered)."""
        tls = self._tls
        while not (self._paused or self.closed or self._peer_done
                   or self._memory_waiter is not None):
            buf = self._receive_buffer()
            end = self._rend
            if end == len(buf):  # cannot happen after _parse; never mistake it for EOF
                break
            try:
                # with a buffer, read() answers the count read into it (typeshed says bytes)
                n = cast(int, tls.read(len(buf) - end, buf[end:]))
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # close_notify: as a peer EOF
                n = 0
            except ssl.SSLError as e:
                self._rate_log.warning("tls-record", "closing connection %s: TLS error: %s",
                                       self.ctx.connection_id, e.reason or e)
                self.close(None)
                return
            if n == 0:
                self._peer_done = True
                if not self._eof:
                    self._on_eof()
                return
            self._rend = end + n
            if n == len(buf) - end and self._chunk < CHUNK:
                self._chunk *= 2  # a full window: bigger ones next (as _on_readable)
            self._parse()
        if not self.closed:
            self._send_cipher()  # TLS may have answered something (e.g. a key update)

    def _undecrypted(self) -> bool:
        """Bytes taken off the socket that may still hold requests."""
        return (self._handshaken and not self._peer_done
                and (self._bio_in.pending > 0 or self._tls.pending() > 0))

    def _maybe_resume(self) -> None:
        super()._maybe_resume()
        # Bytes already taken off the socket wait in the TLS buffers: no
        # readability event will come for them.
        if (not (self._paused or self.closed or self._drain_scheduled)
                and self._memory_waiter is None and self._undecrypted()):
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if not self.closed:
            self._read_plain()

    # ------------------------------------------------------------------ writing

    def _push_cipher(self) -> bool:
        """Send waiting ciphertext; True when the socket took all of it
        (OSError on a reset or broken pipe)."""
        pending = self._cipher_out
        out = self._bio_out
        if pending is None and out.pending:
            pending = memoryview(out.read())
        while pending is not None:
            try:
                n = self._sock.send(pending)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n < len(pending):
                self._cipher_out = pending[n:]
                return False
            pending = memoryview(out.read()) if out.pending else None
        self._cipher_out = None
        return True

    def _send_cipher(self) -> None:
        try:
            done = self._push_cipher()
        except OSError as e:
            self.close(f"send failed: {e}")
            return
        if not done and not self._writing:
            self._writing = True
            self._loop.add_writer(self._fd, self._flush)

    def _next_plain(self) -> bytes | memoryview:
        """Up to PLAIN_CHUNK bytes from the head of the write queue (taken off it)."""
        wq = self._wq
        item = wq[0]
        if type(item) is _Region:
            want = item.remaining if item.remaining < PLAIN_CHUNK else PLAIN_CHUNK
            data = os.pread(item.file.fileno(), want, item.position)
            if not data:
                raise EOFError(f"{item.file!r} ended at {item.position}, "
                               f"{item.remaining} bytes short of its region")
            item.position += len(data)
            item.remaining -= len(data)
            if not item.remaining:
                wq.popleft()
            return data
        if len(item) >= JOIN_BELOW or len(wq) == 1 or type(wq[1]) is _Region:
            if len(item) > PLAIN_CHUNK:
                wq[0] = item[PLAIN_CHUNK:]
                return item[:PLAIN_CHUNK]
            wq.popleft()
            return item
        parts: list[memoryview] = []
        size = 0
        while wq:
            part = wq[0]
            if type(part) is not memoryview or size + len(part) > PLAIN_CHUNK:
                break
            wq.popleft()
            parts.append(part)
            size += len(part)
        return b"".join(parts)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.closed:
            return
        wq = self._wq
        tls = self._tls
        taken = 0
        try:
            done = self._push_cipher()
            while done and wq and self._handshaken:
                data = self._next_plain()
                taken += len(data)
                tls.write(data)
                done = self._push_cipher()
        except EOFError as e:
            self._log.error("closing connection %s: file region ended early (%s)",
                            self.ctx.connection_id, e)
            self.close(None)
            return
        except (OSError, ValueError, ssl.SSLError) as e:  # reset, EPIPE, closed file
            self._account_sent(taken)
            self.close(f"send failed: {e}")
            return
        self._account_sent(taken)
        if self.closed:
            return
        self._after_flush(not done)

    def _maybe_finish(self) -> None:
        if self._cipher_out is not None:
            return
        if not self._paused and self._undecrypted():
            self._read_plain()  # what came before the EOF is answered first
            if self.closed:
                return
        super()._maybe_finish()
