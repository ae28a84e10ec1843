"""The protocol client (om-s3) against a real S3 server (versitygw, Swift, AIStore).

Data is seeded and checked with boto3, an independent client."""

import hashlib
import os

import pytest

from harness.mount import seed
from harness.omtools import OmS3

ODD_KEYS = [
    "plain.bin",
    "with space/and+plus~tilde%percent.bin",
    "unicode/d\u00e9j\u00e0 vu/\u65e5\u672c\u8a9e.txt",
    "sym!$&'()*,;=@[].txt",
]


def rand(n, seed=0):
    return hashlib.shake_256(b"%d" % seed).digest(n) if n else b""


@pytest.mark.parametrize("size", [0, 1, 1024 * 1024 + 1])
def test_put_then_boto3_reads_identical(oms3, bucket, s3client, tmp_path, size):
    data = rand(size, size)
    f = tmp_path / "src"
    f.write_bytes(data)
    out = oms3.fields(oms3.run(bucket, "put", "obj", f))
    assert out["etag"] == hashlib.md5(data).hexdigest()
    assert s3client.get_object(Bucket=bucket, Key="obj")["Body"].read() == data


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_keys_round_trip(oms3, bucket, s3client, tmp_path, key):
    data = rand(3000, 7)
    s3client.put_object(Bucket=bucket, Key=key, Body=data)
    p = oms3.run(bucket, "get", key)
    assert p.stdout == data
    head = oms3.fields(oms3.run(bucket, "head", key))
    assert int(head["size"]) == 3000
    f = tmp_path / "src"
    f.write_bytes(data[::-1])
    oms3.run(bucket, "put", key + ".2", f)
    assert s3client.get_object(Bucket=bucket, Key=key + ".2")["Body"].read() == data[::-1]
    listed = oms3.run(bucket, "list", "--prefix", key).stdout.decode().splitlines()
    assert listed[0].split("\t")[1] == key


def test_ranged_gets_are_exact(oms3, bucket, s3client):
    data = rand(100000, 3)
    s3client.put_object(Bucket=bucket, Key="r", Body=data)
    for off, ln in [(0, 1), (1, 10), (99999, 1), (50000, 50000), (99990, 100)]:
        assert oms3.run(bucket, "get", "r", off, ln).stdout == data[off:off + ln]
    # at or past the end: empty, not an error
    assert oms3.run(bucket, "get", "r", 100000, 10).stdout == b""
    assert oms3.run(bucket, "get", "r", 200000, 10).stdout == b""


def test_if_match_detects_a_changed_object(oms3, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="v", Body=b"version one")
    etag = oms3.fields(oms3.run(bucket, "head", "v"))["etag"]
    assert oms3.run(bucket, "get", "v", 0, 7, "--if-match", etag).stdout == b"version"
    s3client.put_object(Bucket=bucket, Key="v", Body=b"version two")
    p = oms3.run(bucket, "get", "v", 0, 7, "--if-match", etag, check=False)
    assert p.returncode == 1
    assert b"Stale file handle" in p.stderr and b"412" in p.stderr


def test_missing_key_and_bucket(oms3, bucket):
    p = oms3.run(bucket, "head", "nope", check=False)
    assert p.returncode == 1 and b"No such file or directory" in p.stderr
    p = oms3.run(bucket, "get", "nope", 0, 5, check=False)
    assert p.returncode == 1 and b"NoSuchKey" in p.stderr
    p = oms3.run("no-such-bucket-here", "check", check=False)
    assert p.returncode == 1 and b"NoSuchBucket" in p.stderr


def test_listing_1100_keys_across_pages(oms3, bucket, s3client):
    keys = sorted("k/%04d" % i for i in range(1100))
    seed(s3client, bucket, dict.fromkeys(keys, b"x"))
    page = oms3.run(bucket, "list").stdout.decode().splitlines()
    assert len(page) == 1001 and page[-1].startswith("NEXT\t")
    token = page[-1].split("\t", 1)[1]
    rest = oms3.run(bucket, "list", "--token", token).stdout.decode().splitlines()
    assert [l.split("\t")[1] for l in page[:-1] + rest] == keys
    full = oms3.run(bucket, "list", "--all").stdout.decode().splitlines()
    assert [l.split("\t")[1] for l in full] == keys
    after = oms3.run(bucket, "list", "--start-after", "k/1097").stdout.decode().splitlines()
    assert [l.split("\t")[1] for l in after] == ["k/1098", "k/1099"]
    small = oms3.run(bucket, "list", "--max-keys", "3").stdout.decode().splitlines()
    assert len(small) == 4 and small[-1].startswith("NEXT")


def test_delimiter_listing_reports_nested_prefixes(oms3, bucket, s3client):
    for k in ["a/b/c.jpg", "a/d.jpg", "a/e/f", "top.txt", "x/y/z/w"]:
        s3client.put_object(Bucket=bucket, Key=k, Body=b"1")
    lines = oms3.run(bucket, "list", "--prefix", "a/", "--delimiter", "/").stdout.decode()
    entries = sorted(tuple(l.split("\t")[:2]) for l in lines.splitlines())
    assert entries == [("K", "a/d.jpg"), ("P", "a/b/"), ("P", "a/e/")]
    lines = oms3.run(bucket, "list", "--delimiter", "/").stdout.decode()
    entries = sorted(tuple(l.split("\t")[:2]) for l in lines.splitlines())
    assert entries == [("K", "top.txt"), ("P", "a/"), ("P", "x/")]


def test_multipart_round_trip(oms3, bucket, s3client, tmp_path):
    data = rand(12 * 1024 * 1024 + 17, 11)
    f = tmp_path / "big"
    f.write_bytes(data)
    out = oms3.fields(oms3.run(bucket, "mpu", "big", f, "5M"))
    assert out["parts"] == "3"
    assert out["multipart_etag"].endswith("-3")
    assert out["etag"] in (hashlib.md5(data).hexdigest(), out["multipart_etag"])
    assert s3client.get_object(Bucket=bucket, Key="big")["Body"].read() == data
    assert oms3.run(bucket, "uploads").stdout == b""


def test_uploads_list_and_abort(oms3, bucket, s3client):
    up = s3client.create_multipart_upload(Bucket=bucket, Key="orphan")["UploadId"]
    lines = oms3.run(bucket, "uploads").stdout.decode().splitlines()
    assert [l.split("\t")[1:3] for l in lines] == [["orphan", up]]
    oms3.run(bucket, "abort", "orphan", up)
    assert oms3.run(bucket, "uploads").stdout == b""
    assert s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_copy_delete_and_metadata(oms3, bucket, s3client, tmp_path):
    f = tmp_path / "m"
    f.write_bytes(b"meta")
    oms3.run(bucket, "put", "m", f, "--meta", "mode=33188", "--meta", "uid=1000")
    head = oms3.fields(oms3.run(bucket, "head", "m"))
    assert head["mode"] == "100644" and head["uid"] == "1000"
    assert s3client.head_object(Bucket=bucket, Key="m")["Metadata"]["mode"] == "33188"
    oms3.run(bucket, "copy", "m", "dir/m copy")
    assert s3client.get_object(Bucket=bucket, Key="dir/m copy")["Body"].read() == b"meta"
    oms3.run(bucket, "delete", "m")
    keys = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["dir/m copy"]


def test_wrong_secret_is_a_clear_error(s3server, bucket):
    bad = OmS3(s3server.endpoint, env={"AWS_SECRET_ACCESS_KEY": "wrong"})
    p = bad.run(bucket, "check", check=False)
    assert p.returncode == 1
    assert b"Permission denied" in p.stderr and b"SignatureDoesNotMatch" in p.stderr
    assert b"wrong" not in p.stderr


def test_unreachable_endpoint_fails_fast(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = OmS3("http://127.0.0.1:%d" % port).run("b", "check", opts="retries=2", check=False)
    assert p.returncode == 1 and b"No route to host" in p.stderr
    assert OmS3.stats(p)["attempts"] == 3


def test_plain_http_works_whatever_aws_ca_bundle_says(s3server, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="k", Body=b"data")
    o = OmS3(s3server.endpoint, env={"AWS_CA_BUNDLE": "/nonexistent/bundle.pem",
                                     "CURL_CA_BUNDLE": "/nonexistent/bundle.pem"})
    assert o.run(bucket, "get", "k").stdout == b"data"


def test_unknown_option_named(oms3, bucket):
    p = oms3.run(bucket, "check", opts="colour=blue", check=False)
    assert p.returncode == 2 and b"'colour'" in p.stderr


def test_connections_reused_across_requests(oms3, bucket, tmp_path):
    f = tmp_path / "parts"
    f.write_bytes(rand(16 * 5 * 1024 * 1024, 5))
    p = oms3.run(bucket, "mpu", "many", f, "5M")
    st = OmS3.stats(p)
    # create + 16 parts (8 in flight at most) + complete over at most 8 connections
    assert st["requests"] == 18
    assert st["connections"] <= 8
