"""A hook whose s3:// out_dir S3 refuses (credentials rejected, no permission, a missing bucket,
no endpoint at all): real PyTorch training in a subprocess still runs to the end; the hook
reports one error at construction naming the URI and S3's error code, never the credentials,
and stays disabled.

Refused credentials come from a moto server of this module's own, started with IAM
authentication on (the session's server accepts any credentials).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("moto")

REPO = Path(__file__).resolve().parents[2]
SECRET = "wJalrXUtnFEMI-not-a-real-secret-K7MDENG"

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    import smdebug_lite.pytorch as smd

    hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1))
    print("@@CONSTRUCTED disabled=%s" % hook.disabled, flush=True)
    model = nn.Linear(4, 2)
    loss_fn = nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        opt.zero_grad()
        loss = loss_fn(model(torch.randn(8, 4)), torch.zeros(8, 2))
        loss.backward()
        opt.step()
    hook.close()
    print("@@TRAINED steps=%d disabled=%s" % (step + 1, hook.disabled), flush=True)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AuthServer:
    """A moto server that checks credentials: one IAM user (no policy) and one bucket."""

    def __init__(self) -> None:
        import boto3

        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        # The first 3 requests (user, key, bucket) are let through; every later one is checked.
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.skip("moto server with IAM authentication did not start")
                time.sleep(0.1)
        kw = {"endpoint_url": self.url, "region_name": "us-east-1",
              "aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="trainer")
        key = iam.create_access_key(UserName="trainer")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.bucket = "refused-bucket"
        boto3.client("s3", **kw).create_bucket(Bucket=self.bucket)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    try:
        yield server
    finally:
        server.stop()


def _train(tmp_path: Path, out_dir: str, endpoint: str, key_id: str, secret: str
           ) -> tuple[subprocess.CompletedProcess, list[str]]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path), "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
           "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
           "SMDEBUG_S3_MAX_ATTEMPTS": "2"}
    proc = subprocess.run([sys.executable, str(script), out_dir], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)
    return proc, (proc.stdout + proc.stderr).splitlines()


def _check(proc: subprocess.CompletedProcess, lines: list[str], uri: str, code: str,
           *secrets: str) -> str:
    text = "\n".join(lines)
    assert proc.returncode == 0, text[-4000:]
    # Disabled from the start (not after failing writes), and training ran to the end.
    assert "@@CONSTRUCTED disabled=True" in text, text[-4000:]
    assert "@@TRAINED steps=6 disabled=True" in text, text[-4000:]
    errors = [line for line in lines if " ERROR " in line or "Traceback" in line]
    assert len(errors) == 1, errors
    assert uri in errors[0] and code in errors[0], errors[0]
    assert "disabled" in errors[0] and "training continues" in errors[0]
    for secret in secrets:
        assert secret not in text
    return errors[0]


@pytest.mark.parametrize("case", ["InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"])
@pytest.mark.slow
def test_refused_credentials_disable_the_hook_and_training_goes_on(tmp_path, auth_server, case):
    key_id, secret = {
        "InvalidAccessKeyId": ("AKIAUNKNOWNKEY000000", SECRET),
        "SignatureDoesNotMatch": (auth_server.key_id, SECRET),
        "AccessDenied": (auth_server.key_id, auth_server.secret),  # valid, but no permission
    }[case]
    uri = f"s3://{auth_server.bucket}/jobs/run1"
    proc, lines = _train(tmp_path, uri, auth_server.url, key_id, secret)
    _check(proc, lines, uri, case, secret)


def test_missing_bucket_disables_the_hook_at_construction(tmp_path, s3_endpoint):
    uri = "s3://no-such-bucket-for-smdebug-lite/run"
    proc, lines = _train(tmp_path, uri, s3_endpoint.url, "testing", "testing")
    _check(proc, lines, uri, "NoSuchBucket")


@pytest.mark.slow
def test_unreachable_endpoint_disables_the_hook(tmp_path):
    uri = "s3://some-bucket/run"
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    proc, lines = _train(tmp_path, uri, endpoint, "testing", SECRET)
    error = _check(proc, lines, uri, "EndpointConnectionError", SECRET)
    assert "Could not connect" in error
