"""The benchmarks' S3 latency proxy (bench/s3_latency_proxy.py) behaves as S3 does where the
read benchmarks depend on it: every response waits for the first-byte delay, concurrent
requests overlap instead of queueing, bodies arrive whole, and the rate cap refuses the excess
of a prefix with 503 SlowDown while other prefixes go on. Through it, a compacted trial on S3
is seen asking for what its manifest names together."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from bench.s3_latency_proxy import LatencyProxy, RateCap
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial

DELAY_S = 0.2


def client(url: str):
    import boto3

    return boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": 1},
                                      max_pool_connections=32))


@pytest.fixture
def bucket(s3_endpoint) -> str:
    name = s3_endpoint.new_bucket()
    direct = s3_endpoint.client()
    direct.put_object(Bucket=name, Key="job/big", Body=os.urandom(3 << 20))
    for k in range(10):
        direct.put_object(Bucket=name, Key=f"job/index/{k}.json", Body=b"{}")
        direct.put_object(Bucket=name, Key=f"other/index/{k}.json", Body=b"{}")
    return name


def test_every_response_waits_for_the_delay_and_bodies_arrive_whole(s3_endpoint, bucket):
    want = s3_endpoint.client().get_object(Bucket=bucket, Key="job/big")["Body"].read()
    with LatencyProxy(s3_endpoint.url, DELAY_S) as proxy:
        c = client(proxy.url)
        for call in (lambda: c.get_object(Bucket=bucket, Key="job/big")["Body"].read(),
                     lambda: c.get_object(Bucket=bucket, Key="job/big",
                                          Range="bytes=1000-1999")["Body"].read(),
                     lambda: c.head_object(Bucket=bucket, Key="job/big"),
                     lambda: c.list_objects_v2(Bucket=bucket, Prefix="job/index/"),
                     lambda: c.put_object(Bucket=bucket, Key="job/new", Body=b"x" * 70000)):
            t0 = time.perf_counter()
            got = call()
            assert time.perf_counter() - t0 >= DELAY_S
            if isinstance(got, bytes):
                assert got in (want, want[1000:2000])
        listed = c.list_objects_v2(Bucket=bucket, Prefix="job/index/")["Contents"]
        assert len(listed) == 10
        assert c.get_object(Bucket=bucket, Key="job/new")["Body"].read() == b"x" * 70000
        assert proxy.stats.slowdowns == 0


def test_concurrent_requests_overlap(s3_endpoint, bucket):
    delay = 1.0  # (long beside the requests' own work, which a loaded machine stretches)
    with LatencyProxy(s3_endpoint.url, delay) as proxy:
        c = client(proxy.url)
        c.head_object(Bucket=bucket, Key="job/big")  # the client is built, untimed
        keys = [f"job/index/{k}.json" for k in range(10)]
        with ThreadPoolExecutor(10) as pool:
            t0 = time.perf_counter()
            got = list(pool.map(lambda k: c.get_object(Bucket=bucket, Key=k)["Body"].read(),
                                keys))
            spent = time.perf_counter() - t0
        assert got == [b"{}"] * 10
        # One after another would take 10 x the delay.
        assert delay <= spent < 4 * delay, spent
        assert proxy.stats.in_flight_max >= 5


def test_prefix_of_a_request():
    cap = RateCap(prefix_depth=1)
    assert cap.prefix("/bucket/job/index/000/x.json") == "bucket/job"
    assert cap.prefix("/bucket/job") == "bucket/job"
    assert cap.prefix("/bucket?list-type=2&prefix=job%2Findex%2F") == "bucket/job"
    assert RateCap(prefix_depth=0).prefix("/bucket/job/x") == "bucket"
    assert RateCap(prefix_depth=2).prefix("/bucket/job/index/x") == "bucket/job/index"


def test_the_rate_cap_refuses_the_excess_of_a_prefix(s3_endpoint, bucket):
    per_s = 10
    with LatencyProxy(s3_endpoint.url, 0.0, RateCap(reads_per_s=per_s)) as proxy:
        c = client(proxy.url)

        def get(key: str) -> str:
            try:
                c.get_object(Bucket=bucket, Key=key)["Body"].read()
                return "ok"
            except ClientError as e:
                return e.response["Error"]["Code"]

        keys = [f"job/index/{k % 10}.json" for k in range(40)]
        with ThreadPoolExecutor(8) as pool:
            t0 = time.perf_counter()
            results = list(pool.map(get, keys))
            spent = time.perf_counter() - t0
        ok = results.count("ok")
        assert set(results) <= {"ok", "SlowDown"}
        assert results.count("SlowDown") == proxy.stats.slowdowns > 0
        # At most `per_s` in any one second (the proxy's window), however long the burst took.
        assert per_s <= ok <= per_s * (1 + int(spent)), (ok, spent)
        assert get("other/index/0.json") == "ok"  # another prefix has its own budget
        time.sleep(1.05)
        assert get("job/index/0.json") == "ok"  # the window has moved on


def test_a_compacted_trial_asks_for_what_its_manifest_names_together(s3_endpoint, s3_bucket,
                                                                      tmp_path, monkeypatch):
    """After the manifest's head, its chunks' prefixes, the last index file it covers and the
    listing after that need nothing else: they are requested together, not one round trip
    after another."""
    from test_manifest import write_steps
    from test_s3_trial import upload_dir

    write_steps(tmp_path / "t", range(60), end=True)
    assert compact_trial(str(tmp_path / "t"), chunk_steps=20).chunks_written == 3
    uri = upload_dir(s3_endpoint.client(), tmp_path / "t", s3_bucket, "runs/together")
    # (The requests count as together when each arrives before the first answer: the delay
    # leaves the client that long to send them, which a loaded machine stretches.)
    with LatencyProxy(s3_endpoint.url, 0.5, keep_log=True) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        trial = create_trial(uri)
        assert trial.steps() == list(range(60)) and trial.index_files_read == 0
        log = proxy.log
    head = next(r for r in log if r.path.endswith("/manifest/manifest.json"))
    after = [r for r in log if r.arrived >= head.answered]
    first_answer = min(r.answered for r in after)
    together = {"prefix" if "/manifest/chunks/" in r.path else "listing" if "list-type=2" in r.path
                else "last index file" if "/index/" in r.path else r.path
                for r in after if r.arrived < first_answer}
    assert {"prefix", "listing", "last index file"} <= together, log
