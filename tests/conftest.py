"""Shared fixtures: a real S3 endpoint (moto's HTTP server on 127.0.0.1) and paths to test data."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).parent / "data"
GOLDEN_DIR = DATA_DIR / "golden"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Endpoint:
    """A running moto server plus the environment a client (or a subprocess) needs to reach it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.env = {
            "AWS_ENDPOINT_URL": url,
            "AWS_ENDPOINT_URL_S3": url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }

    def client(self, service: str = "s3"):
        import boto3

        return boto3.client(service, endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def new_bucket(self) -> str:
        name = f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """Start moto's real HTTP server once per test session and point boto3 at it via env vars."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = S3Endpoint(f"http://127.0.0.1:{port}")
    saved = {k: os.environ.get(k) for k in endpoint.env}
    os.environ.update(endpoint.env)
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture
def no_current_hook() -> Iterator[None]:
    """No hook is current when the test begins or after it ends: `get_hook` in the test does
    not find another test's hook, and the next test does not find this one's."""
    from smdebug_lite.hooks import singleton

    singleton.del_hook()
    yield
    singleton.del_hook()


@pytest.fixture(params=["keras2", "keras3"])
def K(request: pytest.FixtureRequest):
    """The Keras package under test: ``tf_keras`` (Keras 2) or ``keras`` (Keras 3)."""
    return pytest.importorskip("tf_keras" if request.param == "keras2" else "keras")


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint) -> str:
    """A fresh, empty bucket on the session's S3 endpoint."""
    return s3_endpoint.new_bucket()


@pytest.fixture
def count_value_calls(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], int]:
    """How many times each (tensor, step) was read through ``Tensor.value`` during the test:
    for checks that a cache or a batch read reads each value once."""
    from smdebug_lite.modes import ModeKeys
    from smdebug_lite.trials import Tensor

    calls: dict[tuple[str, int], int] = {}
    original = Tensor.value

    def counting(self, step_num, mode=ModeKeys.GLOBAL, worker=None):
        calls[(self.name, step_num)] = calls.get((self.name, step_num), 0) + 1
        return original(self, step_num, mode=mode, worker=worker)

    monkeypatch.setattr(Tensor, "value", counting)
    return calls


def kept_log_records(logger_name: str, level: int = logging.WARNING) -> Iterator[list]:
    """Records of `logger_name` and its children at `level` and above, in a list, while the
    generator is suspended (for fixtures: the library's root logger does not propagate to
    pytest's capture)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=level)
    log = logging.getLogger(logger_name)
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`), the tests of a module that share a module- or
    class-scoped fixture (a trained trial, a built site) run in one worker, so the fixture is
    built once; every other test goes wherever a worker is free. Modules holding `slow` tests
    come first (each module's tests stay together and in order), so that the long tests do not
    start last and leave the other workers idle at the end."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(by_module, key=lambda module: not any(
        item.get_closest_marker("slow") for item in by_module[module]))
    items[:] = []
    for module in ordered:
        for item in by_module[module]:
            items.append(item)
            if _shares_a_module_fixture(item):
                item.add_marker(pytest.mark.xdist_group(module))


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope in ("module", "class")
                                    for defs in info.name2fixturedefs.values() for d in defs)
