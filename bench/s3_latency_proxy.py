"""An S3 endpoint with S3's latency, for benchmarks: a proxy in front of moto's server.

moto on 127.0.0.1 answers in about a millisecond, so a client that makes its requests one
after another looks nearly as fast there as one that overlaps them. S3 makes each request wait
tens of milliseconds for its first byte, and then it is the number of requests made one after
another that decides. This proxy forwards every request to an upstream (moto's server) and
holds the response until `delay_s` after the request arrived (moto's own time counts within
it), then streams the body as it comes.

Optionally (`rate_cap`) it refuses requests beyond S3's rate per prefix, 5,500 GET/HEAD and
3,500 PUT/POST/DELETE per second, with 503 SlowDown, as S3 does. The prefix is the bucket and
the first `prefix_depth` segments of the key (1 by default: a trial's own prefix, such as
`bucket/job`). S3 starts with one partition for a new bucket and splits it by prefix under
sustained load.

Each client connection gets its own thread (ThreadingHTTPServer) and its own kept-alive
connection to the upstream, so concurrent requests overlap as they do on S3, and a client
that reuses its connections pays no extra connection setup. `MotoProcess` runs moto's server in
a process of its own, so that moto's work (the CPU-heavy part) and the proxy's threads do not
share one interpreter lock. A standalone run starts one unless `--upstream` names an endpoint:

    .venv/bin/python bench/s3_latency_proxy.py --delay-ms 20 [--rate-cap] [--upstream URL]
"""

from __future__ import annotations

import argparse
import http.client
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

# Requests per second per prefix before S3 answers 503 SlowDown.
S3_READS_PER_S = 5500  # GET, HEAD
S3_WRITES_PER_S = 3500  # PUT, POST, DELETE (COPY is a PUT)
_READS = frozenset({"GET", "HEAD"})
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate",
                         "proxy-authorization", "te", "trailer", "trailers",
                         "transfer-encoding", "upgrade", "expect"})
_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
_STREAM_BYTES = 64 * 1024


@dataclass(frozen=True)
class Served:
    """One request: time.monotonic() when it arrived and when its response's headers left."""

    method: str
    path: str
    arrived: float
    answered: float
    status: int


@dataclass
class ProxyStats:
    """What the proxy saw; `in_flight_max` is the most requests it held at one time."""

    requests: int = 0
    slowdowns: int = 0
    in_flight: int = 0
    in_flight_max: int = 0
    connections: int = 0
    by_method: dict[str, int] = field(default_factory=dict)


class RateCap:
    """Requests per prefix over the last second, S3's way: the excess is refused, not queued."""

    def __init__(self, reads_per_s: int = S3_READS_PER_S, writes_per_s: int = S3_WRITES_PER_S,
                 prefix_depth: int = 1) -> None:
        self.reads_per_s, self.writes_per_s = reads_per_s, writes_per_s
        self.prefix_depth = prefix_depth
        self._seen: dict[tuple[bool, str], deque[float]] = {}
        self._lock = threading.Lock()

    def prefix(self, path: str) -> str:
        """'bucket/first-segment' of a path-style request (a LIST's `prefix` parameter for a
        bucket listing)."""
        url = urlsplit(path)
        bucket, _, key = url.path.lstrip("/").partition("/")
        if not key:
            key = (parse_qs(url.query).get("prefix") or [""])[0]
        segments = key.split("/")[: self.prefix_depth] if self.prefix_depth else []
        return "/".join([bucket, *segments])

    def allow(self, method: str, path: str, now: float) -> bool:
        read = method in _READS
        cap = self.reads_per_s if read else self.writes_per_s
        with self._lock:
            window = self._seen.setdefault((read, self.prefix(path)), deque())
            while window and window[0] <= now - 1.0:
                window.popleft()
            if len(window) >= cap:
                return False
            window.append(now)
            return True


class _Handler(BaseHTTPRequestHandler):
    """One client connection; its requests go over one kept-alive upstream connection."""

    protocol_version = "HTTP/1.1"
    server: _Server
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.lock:
            self.server.stats.connections += 1

    def finish(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        super().finish()

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET  # noqa: N815

    def _request_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _proxy(self) -> None:
        arrived = time.monotonic()
        srv = self.server
        method = self.command
        with srv.lock:
            srv.stats.requests += 1
            srv.stats.by_method[method] = srv.stats.by_method.get(method, 0) + 1
            srv.stats.in_flight += 1
            srv.stats.in_flight_max = max(srv.stats.in_flight_max, srv.stats.in_flight)
        try:
            body = self._request_body()
            if srv.rate_cap is not None and not srv.rate_cap.allow(method, self.path, arrived):
                with srv.lock:
                    srv.stats.slowdowns += 1
                self._hold(arrived)
                srv.note(Served(method, self.path, arrived, time.monotonic(), 503))
                self.send_response_only(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(_SLOWDOWN)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(_SLOWDOWN)
                return
            response = self._forward(method, body)
            self._hold(arrived)
            srv.note(Served(method, self.path, arrived, time.monotonic(), response.status))
            self._relay(method, response)
        finally:
            with srv.lock:
                srv.stats.in_flight -= 1

    def _hold(self, arrived: float) -> None:
        wait = arrived + self.server.delay_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _forward(self, method: str, body: bytes | None) -> http.client.HTTPResponse:
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
        if body is not None and not any(k.lower() == "content-length" for k, _ in headers):
            headers.append(("Content-Length", str(len(body))))
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed
            if self._upstream is None:
                host, port = self.server.upstream
                self._upstream = http.client.HTTPConnection(host, port, timeout=60)
            try:
                self._upstream.putrequest(method, self.path, skip_host=True,
                                          skip_accept_encoding=True)
                for k, v in headers:
                    self._upstream.putheader(k, v)
                self._upstream.endheaders(body)
                return self._upstream.getresponse()
            except (http.client.RemoteDisconnected, ConnectionError, http.client.BadStatusLine):
                self._upstream.close()
                self._upstream = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _relay(self, method: str, response: http.client.HTTPResponse) -> None:
        self.send_response_only(response.status, response.reason)
        length = response.getheader("Content-Length")
        bodiless = method == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
        chunked = length is None and not bodiless
        for k, v in response.getheaders():
            if k.lower() not in _HOP_BY_HOP:
                self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if bodiless:
            response.read()
        else:
            while chunk := response.read1(_STREAM_BYTES):
                if chunked:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        if response.will_close and self._upstream is not None:
            self._upstream.close()
            self._upstream = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, upstream: tuple[str, int], delay_s: float, rate_cap: RateCap | None,
                 host: str, port: int, keep_log: bool) -> None:
        self.upstream, self.delay_s, self.rate_cap = upstream, delay_s, rate_cap
        self.stats = ProxyStats()
        self.log: list[Served] | None = [] if keep_log else None
        self.lock = threading.Lock()
        super().__init__((host, port), _Handler)

    def note(self, served: Served) -> None:
        if self.log is not None:
            with self.lock:
                self.log.append(served)


class LatencyProxy:
    """The proxy on `host` (a free port by default), serving from a thread until `stop()`.
    `keep_log`: every request is kept in `log` (`Served`), to see which ones overlapped."""

    def __init__(self, upstream: str, delay_s: float = 0.020, rate_cap: RateCap | bool = False,
                 host: str = "127.0.0.1", port: int = 0, keep_log: bool = False) -> None:
        u = urlsplit(upstream)
        cap = RateCap() if rate_cap is True else (rate_cap or None)
        self._server = _Server((u.hostname or "127.0.0.1", u.port or 80), delay_s, cap, host,
                               port, keep_log)
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="latency-proxy",
                                        daemon=True)

    @property
    def stats(self) -> ProxyStats:
        return self._server.stats

    @property
    def log(self) -> list[Served]:
        with self._server.lock:
            return list(self._server.log or ())

    def start(self) -> LatencyProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MotoProcess:
    """moto's S3 server (`moto_server`) in its own process on a free port of 127.0.0.1."""

    def __init__(self, start_timeout_s: float = 60.0) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        exe = Path(sys.executable).with_name("moto_server")
        self._proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start on {self.url}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=20.0, help="first-byte delay (default 20)")
    ap.add_argument("--rate-cap", action="store_true",
                    help="refuse requests beyond S3's rate per prefix with 503 SlowDown")
    ap.add_argument("--prefix-depth", type=int, default=1,
                    help="key segments after the bucket that make a throttled prefix")
    ap.add_argument("--upstream", help="an S3 endpoint URL (default: start moto's server)")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    moto = None if args.upstream else MotoProcess()
    upstream = args.upstream or moto.url
    cap = RateCap(prefix_depth=args.prefix_depth) if args.rate_cap else None
    proxy = LatencyProxy(upstream, args.delay_ms / 1000, cap, port=args.port).start()
    print(f"S3 with {args.delay_ms:g} ms first-byte delay at {proxy.url} (upstream {upstream}); "
          f"AWS_ENDPOINT_URL={proxy.url}; Ctrl-C stops it", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stops moto's process too
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
        if moto is not None:
            moto.stop()
        print(f"stats: {proxy.stats}")


if __name__ == "__main__":
    main()
