"""The protocol client through the fault proxy: every fault ends in the right
bytes or a clean error, never in short or mixed data."""

import hashlib
import os

import pytest

from harness.mount import seed
from harness.omtools import OmS3


def rand(n, seed=0):
    return hashlib.shake_256(b"%d" % seed).digest(n)


@pytest.fixture
def via(faultproxy):
    return OmS3(faultproxy.endpoint)


@pytest.fixture
def obj(s3client, bucket):
    data = rand(3 * 1024 * 1024 + 5, 1)
    s3client.put_object(Bucket=bucket, Key="obj", Body=data)
    return bucket, "obj", data


def test_latency_still_exact(faultproxy, via, obj):
    bucket, key, data = obj
    faultproxy.set_faults(latency={"first_byte_ms": 20, "per_mib_ms": 5})
    assert via.run(bucket, "get", key).stdout == data


@pytest.mark.parametrize("status,code", [(500, "InternalError"), (502, "BadGateway"),
                                         (503, "SlowDown"), (504, "GatewayTimeout"),
                                         (400, "RequestTimeout"), (429, "TooManyRequests")])
def test_transient_errors_retried(faultproxy, via, obj, status, code):
    bucket, key, data = obj
    faultproxy.set_faults(errors={"status": status, "code": code, "kind": "GetObject",
                                  "nth": 1, "count": 2})
    p = via.run(bucket, "get", key, 0, len(data))
    assert p.stdout == data
    assert OmS3.stats(p)["retries"] == 2
    assert faultproxy.faults_injected("errors") == 2


def test_error_burst_longer_than_retries_is_a_clean_error(faultproxy, via, obj, tmp_path):
    bucket, key, data = obj
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown", "kind": "GetObject"})
    p = via.run(bucket, "get", key, 0, len(data), opts="retries=3", check=False)
    assert p.returncode == 1 and b"SlowDown" in p.stderr
    assert p.stdout == b""
    assert OmS3.stats(p)["attempts"] == 4


def test_reset_mid_body_retried(faultproxy, via, obj):
    bucket, key, data = obj
    faultproxy.set_faults(reset={"after_bytes": 1000000, "kind": "GetObject", "nth": 1})
    p = via.run(bucket, "get", key, 0, len(data))
    assert p.stdout == data
    assert OmS3.stats(p)["retries"] == 1


def test_truncated_body_retried(faultproxy, via, obj):
    bucket, key, data = obj
    faultproxy.set_faults(truncate={"fraction": 0.5, "kind": "GetObject", "nth": 1})
    p = via.run(bucket, "get", key, 0, len(data))
    assert p.stdout == data
    st = OmS3.stats(p)
    assert st["short_bodies"] == 1 and st["retries"] == 1


def test_always_truncated_body_is_eio_never_short_data(faultproxy, via, obj):
    bucket, key, data = obj
    faultproxy.set_faults(truncate={"fraction": 0.9, "kind": "GetObject"})
    p = via.run(bucket, "get", key, 0, len(data), opts="retries=2", check=False)
    assert p.returncode == 1 and b"Input/output error" in p.stderr
    assert p.stdout == b""


def test_silently_shortened_put_is_detected(faultproxy, via, bucket, s3client, tmp_path):
    data = rand(200000, 2)
    f = tmp_path / "d"
    f.write_bytes(data)
    faultproxy.set_faults(short_put={"fraction": 0.5, "kind": "PutObject", "nth": 1})
    p = via.run(bucket, "put", "p", f, check=False)
    assert p.returncode == 1 and b"Bad message" in p.stderr
    assert b"differs from the MD5 sent" in p.stderr
    # the stored object really is short: the client said so instead of succeeding
    assert len(s3client.get_object(Bucket=bucket, Key="p")["Body"].read()) < len(data)
    via.run(bucket, "put", "p", f)
    assert s3client.get_object(Bucket=bucket, Key="p")["Body"].read() == data


def test_silently_shortened_part_is_detected(faultproxy, via, bucket, tmp_path):
    f = tmp_path / "d"
    f.write_bytes(rand(11 * 1024 * 1024, 3))
    faultproxy.set_faults(short_put={"bytes": 1000, "kind": "UploadPart", "nth": 2})
    p = via.run(bucket, "mpu", "m", f, "5M", check=False)
    assert p.returncode == 1 and b"upload-part" in p.stderr
    assert b"differs from the MD5 sent" in p.stderr


def test_upload_part_5xx_retried(faultproxy, via, bucket, s3client, tmp_path):
    data = rand(11 * 1024 * 1024, 4)
    f = tmp_path / "d"
    f.write_bytes(data)
    faultproxy.set_faults(errors={"status": 500, "code": "InternalError", "kind": "UploadPart",
                                  "nth": 1, "count": 3})
    p = via.run(bucket, "mpu", "m", f, "5M")
    assert OmS3.stats(p)["retries"] == 3
    assert s3client.get_object(Bucket=bucket, Key="m")["Body"].read() == data


def test_complete_failure_checks_before_resending(faultproxy, via, bucket, s3client, tmp_path):
    data = rand(6 * 1024 * 1024, 5)
    f = tmp_path / "d"
    f.write_bytes(data)
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown",
                                  "kind": "CompleteMultipartUpload", "nth": 1})
    p = via.run(bucket, "mpu", "m", f, "5M")
    assert faultproxy.requests_seen(kind="ListParts") >= 1
    assert faultproxy.requests_seen(kind="CompleteMultipartUpload") == 2
    assert s3client.get_object(Bucket=bucket, Key="m")["Body"].read() == data
    assert OmS3.fields(p)["parts"] == "2"


def test_listing_page_retried_without_duplicates(faultproxy, via, bucket, s3client):
    keys = sorted("l/%04d" % i for i in range(1100))
    seed(s3client, bucket, dict.fromkeys(keys, b"x"))
    faultproxy.set_faults(truncate={"fraction": 0.6, "kind": "ListObjectsV2", "nth": 1})
    p = via.run(bucket, "list", "--all")
    got = [l.split("\t")[1] for l in p.stdout.decode().splitlines()]
    assert got == keys
    assert OmS3.stats(p)["retries"] == 1


# ---- AIStore emulation: 307 to a target for object requests ----

@pytest.fixture
def ais(faultproxy):
    return OmS3(faultproxy.gateway_endpoint)


def test_aistore_redirects_for_every_object_operation(faultproxy, ais, bucket, s3client, tmp_path):
    small = rand(100000, 6)
    big = rand(12 * 1024 * 1024, 7)
    (tmp_path / "s").write_bytes(small)
    (tmp_path / "b").write_bytes(big)
    p = ais.run(bucket, "put", "dir/small file", tmp_path / "s")
    assert OmS3.stats(p)["redirects"] == 1
    assert ais.run(bucket, "get", "dir/small file").stdout == small
    assert int(OmS3.fields(ais.run(bucket, "head", "dir/small file"))["size"]) == len(small)
    p = ais.run(bucket, "mpu", "big", tmp_path / "b", "5M")
    assert OmS3.stats(p)["redirects"] == 5  # create, 3 parts, complete
    assert s3client.get_object(Bucket=bucket, Key="big")["Body"].read() == big
    assert ais.run(bucket, "get", "big", 5 * 1024 * 1024 - 3, 10).stdout == \
        big[5 * 1024 * 1024 - 3:5 * 1024 * 1024 + 7]
    ais.run(bucket, "delete", "dir/small file")
    keys = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["big"]
    assert faultproxy.redirects_issued() >= 9


def test_aistore_listing_is_one_page(faultproxy, ais, bucket, s3client):
    keys = sorted("one/%05d" % i for i in range(1500))
    seed(s3client, bucket, dict.fromkeys(keys, b""))
    p = ais.run(bucket, "list")
    lines = p.stdout.decode().splitlines()
    assert [l.split("\t")[1] for l in lines] == keys  # no NEXT line: one page
    assert OmS3.stats(p)["requests"] == 1


def test_aistore_non_md5_single_put_etag_accepted(faultproxy, ais, bucket, s3client, tmp_path):
    faultproxy.set_faults(aistore={"etag_non_md5": True})
    data = rand(5000, 8)
    (tmp_path / "s").write_bytes(data)
    ais.run(bucket, "put", "x", tmp_path / "s")
    assert s3client.get_object(Bucket=bucket, Key="x")["Body"].read() == data
