"""A small HTTP proxy on 127.0.0.1 that makes an S3 endpoint flaky, on a seeded schedule.

Put in front of moto's server (point boto3 at `proxy.url` with AWS_ENDPOINT_URL), it forwards
each request and, as its random.Random(seed) draws, answers instead with 503 SlowDown, or
forwards it and sends back only part of the answer before closing the connection (a reset: in
the middle of the body, or of the headers when there is no body, as for a PUT), or answers 403
AccessDenied. It answers `Expect: 100-continue` itself, and logs every request it forwards
(`forwarded`) so tests can check the order in which objects reached the upstream. One request per connection
(responses say `Connection: close`), each on its own thread. It is bounded: it stops by itself
after `lifetime_s` seconds or `max_requests` requests, and on `stop()` / leaving the `with`.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

# (status line, S3 error code) of the throttling / transient answers the proxy can give.
SLOWDOWN = (b"503 Slow Down", "SlowDown")
INTERNAL_ERROR = (b"500 Internal Server Error", "InternalError")
REQUEST_TIMEOUT = (b"400 Bad Request", "RequestTimeout")
_DENIED = (b"403 Forbidden", "AccessDenied")


def _error_body(code: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>injected by the fault proxy</Message></Error>").encode()


@dataclass
class Counts:
    requests: int = 0
    slowdowns: int = 0
    resets: int = 0
    denied: int = 0
    by_method: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Forwarded:
    """One request that reached the upstream: `sent` and `answered` are time.monotonic() when
    it was sent there and when the upstream's whole answer had come back."""

    method: str
    path: str
    sent: float
    answered: float
    status: int


def _error_response(status: bytes, code: str) -> bytes:
    body = _error_body(code)
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/xml\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


def _read_request(conn: socket.socket) -> bytes | None:
    """One request, whole. `Expect: 100-continue` is answered here and not forwarded: botocore
    sends it with every PUT and holds the body back for about a second until the interim answer
    comes, and the proxy waits for the body before forwarding."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    kept, length = [lines[0]], 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"expect" and value.strip().lower() == b"100-continue":
            if not body:
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            continue
        if key == b"content-length":
            length = int(value.strip())
        kept.append(line)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return b"\r\n".join(kept) + b"\r\n\r\n" + body


def _with_connection_close(message: bytes) -> bytes:
    head, _, body = message.partition(b"\r\n\r\n")
    lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body


class FaultProxy:
    def __init__(self, upstream: str, seed: int = 0, slowdown: float = 0.0, reset: float = 0.0,
                 denied: float = 0.0, lifetime_s: float = 300.0, max_requests: int = 100_000,
                 throttles: tuple[tuple[bytes, str], ...] = (SLOWDOWN,)):
        """`slowdown`, `reset`, `denied`: probability of each fault per request; a throttled
        request is answered with one of `throttles`, in turn."""
        u = urlparse(upstream)
        self.throttles = throttles
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.rng = random.Random(seed)
        self.slowdown, self.reset, self.denied = slowdown, reset, denied
        self.lifetime_s, self.max_requests = lifetime_s, max_requests
        self.counts = Counts()
        self.forwarded: list[Forwarded] = []  # every request that reached the upstream
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._sock.close()

    def _draw(self, method: str) -> str:
        with self._lock:
            self.counts.requests += 1
            self.counts.by_method[method] = self.counts.by_method.get(method, 0) + 1
            r = self.rng.random()
            if r < self.denied:
                self.counts.denied += 1
                return "denied"
            if r < self.denied + self.slowdown:
                self.counts.slowdowns += 1
                return "slowdown"
            if r < self.denied + self.slowdown + self.reset:
                return "reset"
            return "pass"

    def _serve(self) -> None:
        deadline = time.monotonic() + self.lifetime_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self.counts.requests >= self.max_requests:
                break
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        self._stop.set()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            request = _read_request(conn)
            if request is None:
                return
            method = request.split(b" ", 1)[0].decode("ascii", "replace")
            action = self._draw(method)
            if action == "denied":
                conn.sendall(_error_response(*_DENIED))
                return
            if action == "slowdown":
                with self._lock:
                    throttle = self.throttles[self.counts.slowdowns % len(self.throttles)]
                conn.sendall(_error_response(*throttle))
                return
            response = self._forward(_with_connection_close(request), method)
            head, sep, body = response.partition(b"\r\n\r\n")
            if action == "reset":
                with self._lock:
                    self.counts.resets += 1
                # A body is cut in its middle; a response without one (a PUT's) in the middle
                # of its headers. Either way the upstream has done the request.
                conn.sendall(head + sep + body[: len(body) // 2] if len(body) >= 2
                             else head[: len(head) // 2])
                conn.shutdown(socket.SHUT_RDWR)  # the rest never comes
                return
            conn.sendall(_with_connection_close(response))
        except OSError:
            pass
        finally:
            conn.close()

    def _forward(self, request: bytes, method: str = "") -> bytes:
        sent = time.monotonic()
        with socket.create_connection(self.upstream, timeout=30) as up:
            up.sendall(request)
            chunks = []
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        response = b"".join(chunks)
        path = request.split(b" ", 2)[1].decode("ascii", "replace")
        status_line = response.split(b"\r\n", 1)[0].split(b" ")
        status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
        with self._lock:
            self.forwarded.append(Forwarded(method, path, sent, time.monotonic(), status))
        return response
