"""Each fault mode of tools/faultproxy actually happens, seen on the wire."""

import hashlib
import http.client
import os
import time

import pytest
from botocore.exceptions import ClientError

from harness import rawhttp


@pytest.fixture
def obj(s3client, bucket):
    data = os.urandom(256 * 1024)
    s3client.put_object(Bucket=bucket, Key="obj", Body=data)
    return bucket, "obj", data


def test_passthrough_keeps_signed_requests_valid(faultproxy, bucket):
    c = faultproxy.client()
    c.put_object(Bucket=bucket, Key="dir/a b+c", Body=b"hello", Metadata={"k": "v"})
    o = c.get_object(Bucket=bucket, Key="dir/a b+c")
    assert o["Body"].read() == b"hello" and o["Metadata"] == {"k": "v"}
    # the Host the client signed (the proxy's) reaches the server unchanged
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/dir/a%%20b%%2Bc" % bucket)
    assert r.status == 200 and r.body == b"hello"
    # and a bad signature is still refused through the proxy
    hdrs = rawhttp.sign_headers("GET", faultproxy.endpoint + "/%s/x" % bucket, secret_key="bad")
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/x" % bucket, headers=hdrs, sign=False)
    assert r.code == "SignatureDoesNotMatch"
    st = faultproxy.stats()
    assert st["requests"]["by_kind"]["GetObject"] == 3
    assert st["requests"]["by_kind"]["PutObject"] == 1


def test_keep_alive_connection_is_reused(faultproxy, obj):
    bucket, key, data = obj
    conn = http.client.HTTPConnection("127.0.0.1", faultproxy.port, timeout=10)
    for _ in range(5):
        r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key), conn=conn)
        assert r.body == data
    conn.close()
    assert faultproxy.stats()["connections"]["opened"] == 1


def test_latency_first_byte_and_per_mib(faultproxy, obj):
    bucket, key, data = obj
    faultproxy.set_faults(latency={"first_byte_ms": 300})
    t0 = time.monotonic()
    r = rawhttp.request(faultproxy.endpoint, "HEAD", "/%s/%s" % (bucket, key))
    assert r.status == 200 and time.monotonic() - t0 >= 0.3
    faultproxy.set_faults(latency={"per_mib_ms": 2000})  # 256 KiB -> 0.5 s
    t0 = time.monotonic()
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key))
    assert r.body == data and time.monotonic() - t0 >= 0.45
    assert faultproxy.faults_injected("latency") == 2


@pytest.mark.parametrize("status,code", [(500, "InternalError"), (502, "BadGateway"),
                                         (503, "SlowDown"), (504, "GatewayTimeout"),
                                         (400, "RequestTimeout")])
def test_error_statuses(faultproxy, obj, status, code):
    bucket, key, data = obj
    faultproxy.set_faults(errors={"status": status, "code": code, "nth": 2})
    c = faultproxy.client()
    assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    with pytest.raises(ClientError) as ei:
        c.get_object(Bucket=bucket, Key=key)
    assert ei.value.response["Error"]["Code"] == code
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    assert faultproxy.faults_injected("errors") == 1


def test_errors_only_for_upload_part_and_retried_by_boto3(faultproxy, bucket):
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown", "method": "PUT",
                                  "query": "partNumber", "nth": 1, "count": 2})
    c = faultproxy.client(retries=5)
    data = os.urandom(6 * 1024 * 1024)
    up = c.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    e1 = c.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=data)["ETag"]
    c.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}]})
    st = faultproxy.stats()
    assert st["faults"]["errors"] == 2
    assert st["faults_by_kind"] == {"errors:UploadPart": 2}
    assert st["requests"]["by_kind"]["UploadPart"] == 3


def test_error_rate_is_seeded(faultproxy, obj):
    bucket, key, _ = obj

    def pattern():
        faultproxy.reset()
        faultproxy.set_faults(seed=42, errors={"status": 503, "rate": 0.5})
        return [rawhttp.request(faultproxy.endpoint, "HEAD", "/%s/%s" % (bucket, key)).status
                for _ in range(20)]

    first = pattern()
    assert first == pattern()
    assert 3 <= first.count(503) <= 17


def test_error_on_put_keeps_connection_usable(faultproxy, bucket):
    faultproxy.set_faults(errors={"status": 500, "nth": 1})
    conn = http.client.HTTPConnection("127.0.0.1", faultproxy.port, timeout=10)
    r = rawhttp.request(faultproxy.endpoint, "PUT", "/%s/k" % bucket, body=b"x" * 100000, conn=conn)
    assert r.status == 500
    r = rawhttp.request(faultproxy.endpoint, "PUT", "/%s/k" % bucket, body=b"y" * 1000, conn=conn)
    assert r.status == 200
    conn.close()


def test_reset_mid_body(faultproxy, obj):
    bucket, key, data = obj
    faultproxy.set_faults(reset={"after_bytes": 10000, "kind": "GetObject"})
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key))
    assert r.status == 200 and int(r.header("content-length")) == len(data)
    assert r.error is not None and len(r.body) <= 10000
    assert data.startswith(r.body)
    assert faultproxy.faults_injected("reset") == 1


def test_reset_during_upload_stores_nothing(faultproxy, s3client, bucket):
    s3client.put_object(Bucket=bucket, Key="k", Body=b"old")
    faultproxy.set_faults(reset={"after_bytes": 50000, "direction": "request", "method": "PUT"})
    with pytest.raises(OSError):
        rawhttp.request(faultproxy.endpoint, "PUT", "/%s/k" % bucket, body=os.urandom(1 << 20))
    time.sleep(0.2)
    assert s3client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"old"


@pytest.mark.parametrize("spec,expect", [({"bytes": 1000}, 1000), ({"fraction": 0.25}, 65536)])
def test_truncate_announces_full_length(faultproxy, obj, spec, expect):
    bucket, key, data = obj
    faultproxy.set_faults(truncate=spec)
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key))
    assert int(r.header("content-length")) == len(data)
    assert isinstance(r.error, http.client.IncompleteRead)
    assert r.body == data[:expect]
    assert faultproxy.faults_injected("truncate") == 1


def test_truncated_ranged_get(faultproxy, obj):
    bucket, key, data = obj
    faultproxy.set_faults(truncate={"bytes": 10})
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key),
                        headers={"Range": "bytes=100-199"})
    assert r.status == 206 and r.header("content-length") == "100"
    assert r.body == data[100:110] and r.error is not None


def test_short_put_is_stored_as_success(faultproxy, s3client, bucket):
    data = os.urandom(100000)
    faultproxy.set_faults(short_put={"fraction": 0.5})
    c = faultproxy.client()
    r = c.put_object(Bucket=bucket, Key="k", Body=data)  # botocore sends Content-MD5
    short = data[:50000]
    assert r["ETag"] == '"%s"' % hashlib.md5(short).hexdigest()
    o = s3client.get_object(Bucket=bucket, Key="k")
    assert o["ContentLength"] == 50000 and o["Body"].read() == short
    assert faultproxy.faults_injected("short_put") == 1


def test_short_put_on_upload_part_only(faultproxy, s3client, bucket):
    faultproxy.set_faults(short_put={"bytes": 1024, "kind": "UploadPart", "nth": 2})
    c = faultproxy.client()
    parts = [os.urandom(5 * 1024 * 1024), os.urandom(300000)]
    up = c.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [c.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=i + 1, Body=p)["ETag"]
             for i, p in enumerate(parts)]
    assert etags[1] == '"%s"' % hashlib.md5(parts[1][:1024]).hexdigest()
    c.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    assert s3client.head_object(Bucket=bucket, Key="mp")["ContentLength"] == len(parts[0]) + 1024


def test_modes_combine_and_reset_clears(faultproxy, obj):
    bucket, key, data = obj
    faultproxy.set_faults(latency={"first_byte_ms": 50}, truncate={"bytes": 5})
    cfg = faultproxy.config()
    assert cfg["latency"]["first_byte_ms"] == 50 and cfg["truncate"]["bytes"] == 5
    r = rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key))
    assert len(r.body) == 5
    faultproxy.set_faults(truncate=None)
    assert rawhttp.request(faultproxy.endpoint, "GET", "/%s/%s" % (bucket, key)).body == data
    faultproxy.reset()
    st = faultproxy.stats()
    assert st["requests"]["total"] == 0 and faultproxy.config()["latency"] is None
