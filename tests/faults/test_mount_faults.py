"""Reads through objmount with the fault proxy between it and the test server (versitygw or Swift).

Added latency, 5xx bursts, resets mid-body, truncated bodies and stalls end
with byte-identical reads or EIO: never short data, never wrong bytes. Every
successful read is compared with the source; a read either returns the
right bytes or raises. Faults that stay within the retry budget must end
byte-identical; persistent faults must end in EIO. AIStore emulation (307
redirects to a target, a /s3 path prefix, one-page listings, non-MD5 and
multipart ETags) mounts, lists and reads byte-identical."""

import errno
import hashlib
import mmap
import multiprocessing
import os
import random
import re
import signal
import subprocess
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import rawhttp
from harness.mount import MiB, MountFailed, check_bytes, new_bucket, payload, read_checked, seed

PART_OPT = "part_size=5M"
FILES = {"f/empty": 0, "f/one": 1, "f/mib+1": MiB + 1, "f/part+1": 5 * MiB + 1,
         "f/big": 24 * MiB + 7}
FILES.update({"f/small%d.jpg" % i: 100000 + 997 * i for i in range(6)})
BIG = "f/big"


@pytest.fixture(scope="module")
def data(s3server, s3client):
    """(bucket, {key: bytes}) seeded once for the module; never changed."""
    objects = {k: payload(k, n) for k, n in FILES.items()}
    name = new_bucket(s3client, "faults")
    seed(s3client, name, objects)
    return name, objects


def read_each(m, objects, allow_eio):
    """Read every object to EOF with os.read, comparing each chunk with the
    source. Returns {key: None (identical) | OSError (EIO)}."""
    out = {}
    for key, want in objects.items():
        err = read_checked(m.join(key), want)
        if err is not None and not allow_eio:
            raise AssertionError("%s: %r, but the faults were within the retry budget" % (key, err))
        out[key] = err
    return out


def pread_each(m, want, path, n, seed_, allow_eio, lens=(1, 4096, 65536, 300001, MiB + 3)):
    rng = random.Random(seed_)
    fd = os.open(path, os.O_RDONLY)
    errors = 0
    try:
        for _ in range(n):
            off, ln = rng.randrange(len(want) + 10), rng.choice(lens)
            try:
                got = os.pread(fd, ln, off)
            except OSError as e:
                if e.errno != errno.EIO or not allow_eio:
                    raise
                errors += 1
                continue
            check_bytes(got, want[off:off + ln], "pread(%s, %d, %d)" % (path, ln, off))
    finally:
        os.close(fd)
    return errors


def _mmap_child(path, want, seed_):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if len(mm) != len(want):
            os._exit(3)
        rng = random.Random(seed_)
        for _ in range(60):
            off = rng.randrange(len(want))
            ln = rng.choice([1, 4096, 70000, MiB])
            if mm[off:off + ln] != want[off:off + ln]:
                os._exit(1)
    os._exit(0)


def mmap_check(path, want, seed_=1, allow_eio=False):
    """Random mmap slices in a child process: exit 0 = identical; SIGBUS is
    how a failed page fault (EIO) shows; anything else is a failure."""
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=_mmap_child, args=(path, want, seed_))
    p.start()
    p.join(120)
    if p.is_alive():
        p.kill()
        pytest.fail("mmap reader hung on %s" % path)
    if p.exitcode == -signal.SIGBUS and allow_eio:
        return False
    assert p.exitcode == 0, "mmap reader of %s: %s" % (path, {
        1: "wrong bytes", 3: "wrong size"}.get(p.exitcode, "exit %s" % p.exitcode))
    return True


def mounted(mount, faultproxy, data, opts=""):
    bucket, objects = data
    o = PART_OPT + ("," + opts if opts else "")
    return mount(bucket, o, endpoint=faultproxy.endpoint), objects


def everything_identical_after_faults_stop(m, faultproxy, objects):
    faultproxy.reset()
    read_each(m, objects, allow_eio=False)
    m.check_alive()


# -- latency -------------------------------------------------------------------------
def test_latency_reads_are_byte_identical(mount, faultproxy, data):
    faultproxy.set_faults(latency={"first_byte_ms": 15})
    m, objects = mounted(mount, faultproxy, data)
    read_each(m, objects, allow_eio=False)
    pread_each(m, objects[BIG], m.join(BIG), 60, 1, allow_eio=False)
    mmap_check(m.join("f/part+1"), objects["f/part+1"])
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: check_bytes(open(m.join(k), "rb").read(), objects[k], k),
                    [k for k in objects if "small" in k] * 2))
    assert faultproxy.faults_injected("latency") > 0


def test_stalled_request_is_abandoned_and_retried(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data, "stall_timeout=1")
    faultproxy.set_faults(latency={"first_byte_ms": 6000, "kind": "GetObject", "nth": 1})
    t0 = time.monotonic()
    check_bytes(open(m.join("f/small0.jpg"), "rb").read(), objects["f/small0.jpg"], "small0")
    took = time.monotonic() - t0
    assert took < 5, "a stalled GET was waited for %.1f s with stall_timeout=1" % took
    assert faultproxy.faults_injected("latency") == 1


# -- 5xx -----------------------------------------------------------------------------
@pytest.mark.parametrize("status,code", [(503, "SlowDown"), (500, "InternalError"),
                                         (502, "BadGateway"), (504, "GatewayTimeout")])
def test_5xx_burst_within_retries_is_byte_identical(mount, faultproxy, data, status, code):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(errors={"status": status, "code": code, "kind": "GetObject",
                                  "nth": 1, "count": 3})
    read_each(m, objects, allow_eio=False)
    assert faultproxy.faults_injected("errors") == 3


def test_slowdown_on_random_gets_gives_identical_bytes_or_eio(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(seed=7, errors={"status": 503, "code": "SlowDown", "kind": "GetObject",
                                          "rate": 0.3})
    read_each(m, objects, allow_eio=True)
    pread_each(m, objects[BIG], m.join(BIG), 60, 2, allow_eio=True)
    mmap_check(m.join(BIG), objects[BIG], allow_eio=True)
    assert faultproxy.faults_injected("errors") > 0
    everything_identical_after_faults_stop(m, faultproxy, objects)


def test_persistent_5xx_is_eio(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data, "retries=2")
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown", "kind": "GetObject"})
    t0 = time.monotonic()
    for key in ("f/small1.jpg", "f/part+1", BIG):
        err = read_checked(m.join(key), objects[key])
        assert err is not None and err.errno == errno.EIO, "%s: read without EIO" % key
    assert time.monotonic() - t0 < 60
    assert os.stat(m.join(BIG)).st_size == len(objects[BIG])
    everything_identical_after_faults_stop(m, faultproxy, objects)


# -- resets ----------------------------------------------------------------------------
@pytest.mark.parametrize("after", [0, 65536, 512 * 1024])
def test_reset_mid_body_is_retried(mount, faultproxy, data, after):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(reset={"after_bytes": after, "kind": "GetObject", "nth": 1, "count": 2})
    read_each(m, {BIG: objects[BIG], "f/small2.jpg": objects["f/small2.jpg"]}, allow_eio=False)
    faultproxy.set_faults(reset={"after_bytes": after // 4, "kind": "GetObject", "nth": 1,
                                 "count": 2})
    read_each(m, {"f/part+1": objects["f/part+1"], "f/small3.jpg": objects["f/small3.jpg"]},
              allow_eio=False)
    assert faultproxy.faults_injected("reset") >= 2


def test_resets_on_random_gets_give_identical_bytes_or_eio(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(seed=11, reset={"after_bytes": 20000, "kind": "GetObject", "rate": 0.3})
    read_each(m, objects, allow_eio=True)
    pread_each(m, objects[BIG], m.join(BIG), 40, 3, allow_eio=True)
    assert faultproxy.faults_injected("reset") > 0
    everything_identical_after_faults_stop(m, faultproxy, objects)


def test_persistent_reset_is_eio(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data, "retries=2")
    faultproxy.set_faults(reset={"after_bytes": 4096, "kind": "GetObject"})
    for key in ("f/small4.jpg", "f/mib+1", BIG):
        err = read_checked(m.join(key), objects[key])
        assert err is not None and err.errno == errno.EIO, "%s: read without EIO" % key
    everything_identical_after_faults_stop(m, faultproxy, objects)


# -- truncated bodies (Content-Length announces more than arrives) ------------------------
@pytest.mark.parametrize("cut", [{"fraction": 0.5}, {"bytes": 0}, {"bytes": 1000}],
                         ids=["half", "none", "1000B"])
def test_truncated_body_is_retried(mount, faultproxy, data, cut):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(truncate=dict(cut, kind="GetObject", nth=1, count=2))
    read_each(m, {"f/small5.jpg": objects["f/small5.jpg"], BIG: objects[BIG]}, allow_eio=False)
    assert faultproxy.faults_injected("truncate") >= 1
    mmap_check(m.join("f/part+1"), objects["f/part+1"])


def test_truncation_on_random_gets_gives_identical_bytes_or_eio(mount, faultproxy, data):
    m, objects = mounted(mount, faultproxy, data)
    faultproxy.set_faults(seed=5, truncate={"fraction": 0.7, "kind": "GetObject", "rate": 0.3})
    read_each(m, objects, allow_eio=True)
    pread_each(m, objects[BIG], m.join(BIG), 40, 4, allow_eio=True)
    mmap_check(m.join("f/mib+1"), objects["f/mib+1"], allow_eio=True)
    assert faultproxy.faults_injected("truncate") > 0
    everything_identical_after_faults_stop(m, faultproxy, objects)


@pytest.mark.parametrize("key", ["f/small0.jpg", "f/mib+1", "f/part+1", BIG])
def test_persistent_truncation_is_eio_not_short_data(mount, faultproxy, data, key):
    m, objects = mounted(mount, faultproxy, data, "retries=2")
    faultproxy.set_faults(truncate={"bytes": 1000, "kind": "GetObject"})
    want = objects[key]
    err = read_checked(m.join(key), want)
    assert err is not None and err.errno == errno.EIO, "%s: read to EOF without EIO" % key
    # the same through cat: an error, and what came out is a true prefix
    p = subprocess.run(["cat", m.join(key)], capture_output=True, timeout=120)
    assert p.returncode != 0, "cat succeeded with %d of %d bytes" % (len(p.stdout), len(want))
    assert len(p.stdout) < len(want) and want.startswith(p.stdout)
    assert b"Input/output error" in p.stderr, p.stderr
    # and by pread: never a short answer mid-object
    fd = os.open(m.join(key), os.O_RDONLY)
    try:
        for off in (0, len(want) // 2, len(want) - 10):
            try:
                got = os.pread(fd, 8192, off)
            except OSError as e:
                assert e.errno == errno.EIO
            else:
                check_bytes(got, want[off:off + 8192], "pread at %d" % off)
    finally:
        os.close(fd)
    assert os.stat(m.join(key)).st_size == len(want)
    assert faultproxy.faults_injected("truncate") > 0
    everything_identical_after_faults_stop(m, faultproxy, {key: want})


def test_truncation_never_reaches_a_tiny_object(mount, faultproxy, data):
    # a body of 1 byte cannot be cut at 1000: reads still succeed
    m, objects = mounted(mount, faultproxy, data, "retries=2")
    faultproxy.set_faults(truncate={"bytes": 1000, "kind": "GetObject"})
    read_each(m, {"f/one": objects["f/one"], "f/empty": b""}, allow_eio=False)


# -- AIStore emulation --------------------------------------------------------------------
def follow(resp, method, body=b"", headers=None):
    """Re-send a request to a 307's Location (as objmount must), re-signed."""
    loc = urllib.parse.urlsplit(resp.header("location"))
    path = loc.path + ("?" + loc.query if loc.query else "")
    return rawhttp.request("%s://%s" % (loc.scheme, loc.netloc), method, path, body=body,
                           headers=headers)


def gw_put(faultproxy, bucket, key, body):
    path = "/%s/%s" % (bucket, urllib.parse.quote(key))
    r = rawhttp.request(faultproxy.gateway_endpoint, "PUT", path, body=body)
    assert r.status == 307
    r = follow(r, "PUT", body=body)
    assert r.status == 200, r.body
    return r.header("etag")


def gw_multipart(faultproxy, bucket, key, parts):
    gw, q = faultproxy.gateway_endpoint, "/%s/%s" % (bucket, urllib.parse.quote(key))
    up = re.search(r"<UploadId>(.*)</UploadId>", follow(
        rawhttp.request(gw, "POST", q + "?uploads"), "POST").body.decode()).group(1)
    etags = []
    for n, p in enumerate(parts, 1):
        r = rawhttp.request(gw, "PUT", "%s?partNumber=%d&uploadId=%s" % (q, n, up), body=p)
        etags.append(follow(r, "PUT", body=p).header("etag"))
    xml = ("<CompleteMultipartUpload>" + "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e)
        for n, e in enumerate(etags, 1)) + "</CompleteMultipartUpload>").encode()
    r = follow(rawhttp.request(gw, "POST", "%s?uploadId=%s" % (q, up), body=xml), "POST", body=xml)
    assert r.status == 200, r.body


def aistore_mount(mount, faultproxy, bucket, opts=""):
    o = "path_style," + PART_OPT + ("," + opts if opts else "")
    return mount(bucket, o, endpoint=faultproxy.gateway_endpoint)


def test_aistore_gateway_mounts_lists_and_reads_identical(mount, faultproxy, s3client, bucket):
    objects = {k: payload(k, n) for k, n in FILES.items()}
    objects["odd/with space/d\u00e9j\u00e0+vu \u65e5\u672c.bin"] = payload("odd", 70000)
    many = {"many/k%04d" % i: payload("k%d" % i, i % 5) for i in range(1100)}
    seed(s3client, bucket, {**objects, **many})
    m = aistore_mount(mount, faultproxy, bucket)
    names = os.listdir(m.join("many"))
    assert len(names) == 1100 and set(names) == {k.split("/")[1] for k in many}
    with os.scandir(m.join("many")) as it:
        for e in it:
            assert e.stat().st_size == len(many["many/" + e.name])
    assert faultproxy.stats()["gateway_list_pages"] >= 1
    read_each(m, objects, allow_eio=False)
    pread_each(m, objects[BIG], m.join(BIG), 40, 5, allow_eio=False)
    mmap_check(m.join("f/part+1"), objects["f/part+1"])
    assert faultproxy.redirects_issued() > 0
    assert faultproxy.stats()["target_refused"] == 0


def test_aistore_non_md5_etags_read_identical(mount, faultproxy, bucket):
    faultproxy.set_faults(aistore={"etag_non_md5": True})
    objects = {"n/small": payload("n/small", 150000), "n/large": payload("n/large", 11 * MiB + 1)}
    for k, v in objects.items():
        etag = gw_put(faultproxy, bucket, k, v).strip('"')
        assert etag != hashlib.md5(v).hexdigest() and len(etag) == 40
    m = aistore_mount(mount, faultproxy, bucket)
    assert sorted(os.listdir(m.join("n"))) == ["large", "small"]
    read_each(m, objects, allow_eio=False)
    pread_each(m, objects["n/large"], m.join("n/large"), 30, 6, allow_eio=False)


def test_aistore_multipart_etags_read_identical(mount, faultproxy, bucket):
    faultproxy.set_faults(aistore={"multipart_etag": "aws"})
    parts = [payload("mp1", 5 * MiB), payload("mp2", 5 * MiB), payload("mp3", 12345)]
    gw_multipart(faultproxy, bucket, "mp/obj", parts)
    want = b"".join(parts)
    m = aistore_mount(mount, faultproxy, bucket)
    assert os.stat(m.join("mp/obj")).st_size == len(want)
    read_each(m, {"mp/obj": want}, allow_eio=False)
    pread_each(m, want, m.join("mp/obj"), 30, 7, allow_eio=False)


def test_aistore_target_faults_are_retried(mount, faultproxy, s3client, bucket):
    objects = {"t/big": payload("t/big", 12 * MiB + 1), "t/small": payload("t/small", 90000)}
    seed(s3client, bucket, objects)
    m = aistore_mount(mount, faultproxy, bucket)
    faultproxy.set_faults(truncate={"fraction": 0.5, "listener": "target", "kind": "GetObject",
                                    "nth": 1, "count": 2})
    read_each(m, objects, allow_eio=False)
    faultproxy.set_faults(truncate=None, reset={"after_bytes": 10000, "listener": "target",
                                                "kind": "GetObject", "nth": 1, "count": 2})
    m2 = aistore_mount(mount, faultproxy, bucket)
    read_each(m2, objects, allow_eio=False)
    faultproxy.set_faults(reset=None, errors={"status": 503, "code": "SlowDown",
                                              "listener": "gateway", "kind": "GetObject",
                                              "nth": 1, "count": 2})
    m3 = aistore_mount(mount, faultproxy, bucket)
    read_each(m3, objects, allow_eio=False)
    f = faultproxy.faults_injected()
    assert f["truncate"] >= 1 and f["reset"] >= 1 and f["errors"] == 2, f


def test_aistore_persistent_truncation_is_eio(mount, faultproxy, s3client, bucket):
    objects = {"t/big": payload("t/big", 12 * MiB + 1), "t/small": payload("t/small", 90000)}
    seed(s3client, bucket, objects)
    m = aistore_mount(mount, faultproxy, bucket, "retries=2")
    faultproxy.set_faults(truncate={"bytes": 5000, "listener": "target", "kind": "GetObject"})
    for key, want in objects.items():
        err = read_checked(m.join(key), want)
        assert err is not None and err.errno == errno.EIO, "%s: read without EIO" % key
    m.check_alive()


@pytest.mark.parametrize("code", ["XAmzContentSHA256Mismatch", "BadDigest"])
def test_a_refused_bucket_check_fails_the_mount(mount, faultproxy, data, code):
    """The bucket check's LIST refused with an error whose code maps to the
    same errno as an empty 2xx answer (EBADMSG): the mount fails, saying
    why, and mounts nothing. An empty 2xx answer alone is what the check
    tolerates (AIStore may send one)."""
    bucket, _ = data
    faultproxy.set_faults(errors={"status": 400, "code": code, "kind": "ListObjectsV2"})
    with pytest.raises(MountFailed) as ei:
        mount(bucket, PART_OPT, endpoint=faultproxy.endpoint, timeout=30)
    f = ei.value
    assert f.returncode not in (None, 0), f.stderr
    assert not f.mounted, "the mount point was left mounted"
    assert code in f.stderr and "malformed" not in f.stderr, f.stderr
