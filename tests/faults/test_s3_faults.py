"""Reading trials from a flaky S3: moto's server behind a fault-injecting proxy (fault_proxy.py)
that answers 503 SlowDown / 500 / RequestTimeout or cuts connections in the middle of response
bodies. Every read path retries (whole GETs, ranged GETs, LIST pages), so the values are the
same as read directly; what cannot succeed (a missing bucket, denied access, retries used up)
fails at once with TrialStorageError naming the s3:// URI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from trial_builders import simple_tensors, write_job

from faults.fault_proxy import INTERNAL_ERROR, REQUEST_TIMEOUT, SLOWDOWN, FaultProxy
from smdebug_lite.exceptions import TrialDataTimeout, TrialStorageError
from smdebug_lite.trials import create_trial

pytest.importorskip("moto")


def upload(client, bucket: str, prefix: str, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(root).as_posix()}",
                              Body=path.read_bytes())


def everything(uri: str) -> dict[tuple, object]:
    """Every value the trial holds, by each read path: bulk values() (ranged or whole GETs),
    single values, shapes and reductions."""
    t = create_trial(uri)
    out: dict[tuple, object] = {("steps",): t.steps()}
    for name in t.tensor_names():
        tensor = t.tensor(name)
        for step, value in tensor.values().items():
            out[("values", name, step)] = np.array(value)
        for step in tensor.steps():
            out[("value", name, step)] = np.array(tensor.value(step))
            out[("shape", name, step)] = tensor.shape(step)
            out[("mean", name, step)] = float(tensor.reduction_value(step, "mean"))
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=str(k))
        else:
            assert a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]), k  # NaN means equal


@pytest.fixture
def trials(s3_endpoint, s3_bucket, tmp_path) -> dict[str, str]:
    """An smdebug-written trial (golden) and one our writer wrote, both in the bucket."""
    ours = tmp_path / "ours"
    write_job(str(ours), range(12), lambda s: {**simple_tensors(s),
                                               "big": np.arange(300, dtype=np.float32) * s})
    client = s3_endpoint.client()
    upload(client, s3_bucket, "golden", GOLDEN_DIR / "pt_basic")
    upload(client, s3_bucket, "ours", ours)
    return {"golden": f"s3://{s3_bucket}/golden", "ours": f"s3://{s3_bucket}/ours"}


@pytest.fixture
def via_proxy(s3_endpoint, monkeypatch):
    """Start a FaultProxy in front of moto and point boto3 at it."""
    started: list[FaultProxy] = []

    def start(**kwargs) -> FaultProxy:
        proxy = FaultProxy(s3_endpoint.url, **kwargs).__enter__()
        started.append(proxy)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.mark.parametrize("kind", ["golden", "ours"])
def test_flaky_s3_reads_give_the_same_values(trials, via_proxy, kind):
    direct = everything(trials[kind])
    proxy = via_proxy(seed=7, slowdown=0.05, reset=0.01)
    flaky = [everything(trials[kind]) for _ in range(3)]  # fresh trials: nothing cached
    for got in flaky:
        assert_same(direct, got)
    assert proxy.counts.slowdowns > 0
    assert proxy.counts.requests > 60


@pytest.mark.slow
def test_every_read_path_survives_frequent_resets_and_throttling(trials, via_proxy,
                                                                 monkeypatch):
    """Resets in 15% of GET bodies (objects, ranges and LIST pages alike) and throttling
    answers of each kind in 15% of requests: nothing is lost, nothing is misread."""
    monkeypatch.setenv("SMDEBUG_S3_MAX_ATTEMPTS", "20")
    direct = {k: everything(u) for k, u in trials.items()}
    proxy = via_proxy(seed=3, slowdown=0.15, reset=0.15,
                      throttles=(SLOWDOWN, INTERNAL_ERROR, REQUEST_TIMEOUT))
    for kind, uri in trials.items():
        assert_same(direct[kind], everything(uri))
    assert proxy.counts.resets >= 5 and proxy.counts.slowdowns >= 5


def test_retries_used_up_name_the_uri(trials, via_proxy, monkeypatch):
    monkeypatch.setenv("SMDEBUG_S3_MAX_ATTEMPTS", "3")
    proxy = via_proxy(seed=1, slowdown=1.0)
    with pytest.raises(TrialStorageError) as e:
        create_trial(trials["ours"], timeout=30)
    assert trials["ours"] in str(e.value) and "failed 3 times" in str(e.value)
    assert "SlowDown" in str(e.value)
    assert proxy.counts.slowdowns == 3


def test_missing_bucket_is_named_at_once(s3_endpoint):
    uri = "s3://no-such-bucket-for-smdebug-lite/some/job"
    with pytest.raises(TrialStorageError) as e:
        create_trial(uri, timeout=20)
    msg = str(e.value)
    assert "s3://no-such-bucket-for-smdebug-lite/some/job" in msg
    assert "bucket 'no-such-bucket-for-smdebug-lite' does not exist" in msg
    assert not isinstance(e.value, TrialDataTimeout)


def test_access_denied_names_the_uri_and_no_credentials(trials, via_proxy, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAULTPROXYTEST01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "sEcReT/ValueThatMustNotLeak0123456789")
    proxy = via_proxy(denied=1.0)
    with pytest.raises(TrialStorageError) as e:
        create_trial(trials["golden"], timeout=20)
    msg = str(e.value)
    assert trials["golden"] in msg and "access denied" in msg and "AccessDenied" in msg
    assert "sEcReT" not in msg and "AKIAFAULTPROXYTEST01" not in msg
    assert proxy.counts.denied == 1  # not retried


def test_proxy_stops_by_itself(s3_endpoint):
    proxy = FaultProxy(s3_endpoint.url, lifetime_s=0.3).__enter__()
    proxy._thread.join(60)  # (it ends within a second; a loaded machine may take longer)
    assert not proxy._thread.is_alive()
    proxy.stop()



def test_damaged_files_on_s3_are_named_by_their_s3_uri(s3_endpoint, s3_bucket):
    from smdebug_lite.exceptions import EventFileMissing, IndexFileCorrupted

    client = s3_endpoint.client()
    upload(client, s3_bucket, "job", GOLDEN_DIR / "pt_basic")
    index_key = "job/index/000000000/000000000004_worker_0.json"
    client.put_object(Bucket=s3_bucket, Key=index_key, Body=b'{"meta": {"mo')
    client.delete_object(Bucket=s3_bucket, Key="job/events/000000000006/000000000006_worker_0.tfevents")
    t = create_trial(f"s3://{s3_bucket}/job")
    with pytest.raises(IndexFileCorrupted) as e:
        t.tensor("Sequential_0.weight").value(4)
    assert f"s3://{s3_bucket}/{index_key}" in str(e.value) and "step 4" in str(e.value)
    with pytest.raises(EventFileMissing) as e:
        t.tensor("Sequential_0.weight").value(6)
    assert f"s3://{s3_bucket}/job/events/000000000006/" in str(e.value)
    assert t.tensor("Sequential_0.weight").value(5).shape == (16, 8)
