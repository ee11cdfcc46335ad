"""A real HTTP server on 127.0.0.1 (http.server on a thread) that records the POSTs a webhook
action sends and answers them as planned: a status code each, or "hang" (never answer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG = "hang"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookServer:
    url: str  # the base URL, http://127.0.0.1:<port>
    plan: list[int | str] = field(default_factory=list)  # answers, in order; then 200
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self) -> int | str:
        with self.lock:
            return self.plan.pop(0) if self.plan else 200


@contextmanager
def webhook_server(plan: list[int | str] | None = None) -> Iterator[WebhookServer]:
    state: WebhookServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with state.lock:
                state.received.append(Received(self.path, dict(self.headers.items()), body))
            answer = state.next_answer()
            if answer == HANG:
                state.release.wait(60)
                return
            self.send_response(int(answer))
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:  # keep test output clean
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = WebhookServer(f"http://127.0.0.1:{server.server_address[1]}", list(plan or []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
