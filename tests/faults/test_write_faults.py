"""Writes through objmount with the fault proxy between it and the test server (versitygw or Swift).

Every case ends with an object byte-identical to what was written (checked
with boto3 straight against the server) or with EIO from close()/fsync() and the
exact bytes kept in CACHE_DIR/recovery: never a silently wrong object.
Silently shortened PUTs and parts (the proxy forwards a prefix of the body
and the server answers 200) are detected and uploaded again; 5xx on parts and on
CompleteMultipartUpload are retried; a permanently failing endpoint gives EIO
in bounded time with the bytes in recovery; a daemon killed with SIGKILL in
the middle of an upload leaves its staged bytes, and the next mount with the
same cache_dir moves them to recovery. Through AIStore emulation (307
redirects on PUT, UploadPart, Complete; non-MD5 and multipart ETags) writes
end byte-identical, and a shortened body is still caught."""

import errno
import hashlib
import os
import subprocess
import sys
import time

import pytest

from harness import admin
from harness.mount import MiB, PART, check_bytes, check_object, payload, wait_for
from harness.recovery import entries, recovery_entries

# fast whole-upload retries; one engine retry so budgets are spent quickly
WRITE_OPTS = "part_size=5M,upload_retry_delay=0.05"
SMALL = MiB + 3          # one PUT
BIG = 3 * PART + 12345   # four parts


def rw(mount, bucket, cache_dir, endpoint, opts=""):
    o = "%s,cache_dir=%s" % (WRITE_OPTS, cache_dir)
    return mount(bucket, o + ("," + opts if opts else ""), endpoint=endpoint)


def write_file(path, data, chunk=MiB):
    """open/write/close with os calls; close's result is the commit's."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), chunk):
            os.write(fd, data[off:off + chunk])
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)


def released(cache_dir, timeout=30):
    """Wait until the staging directory is empty: every writer released."""
    assert wait_for(lambda: not entries(cache_dir, "staging"), timeout), \
        "staging not emptied: %s" % entries(cache_dir, "staging")


def nothing_left(cache_dir):
    released(cache_dir)
    assert not entries(cache_dir, "recovery"), entries(cache_dir, "recovery")


def recovery_entry(cache_dir, key=None):
    """The one (data path, sidecar dict) in recovery/ (for key, when given)."""
    names = entries(cache_dir, "recovery")
    found = recovery_entries(cache_dir, key)
    assert len(found) == 1, "recovery entries for %s: %s (recovery holds %s)" % (
        key or "any key", found, names)
    assert len(names) % 2 == 0, "recovery holds %s" % names
    return found[0]


def sidecar_complete(cache_dir):
    try:
        recovery_entry(cache_dir)
        return True
    except AssertionError:
        return False


def no_uploads_left(s3client, bucket):
    ups = s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert not ups, "multipart uploads left behind: %s" % [(u["Key"], u["UploadId"]) for u in ups]


# -- silently shortened bodies ------------------------------------------------------------
def test_short_single_put_is_detected_and_uploaded_again(mount, bucket, s3client, faultproxy,
                                                         cache_dir):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    faultproxy.set_faults(short_put={"fraction": 0.5, "kind": "PutObject", "nth": 1})
    want = payload("short-put", SMALL)
    write_file(m.join("s.bin"), want)
    check_object(s3client, bucket, "s.bin", want)
    assert faultproxy.faults_injected("short_put") == 1
    assert faultproxy.requests_seen(kind="PutObject") >= 2
    nothing_left(cache_dir)


@pytest.mark.parametrize("nth", [1, 3], ids=["first-part", "third-part"])
def test_short_upload_part_is_detected_and_uploaded_again(mount, bucket, s3client, faultproxy,
                                                          cache_dir, nth):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    # a fraction, not a byte count: parts arrive in any order, and the nth
    # to arrive may be the short last one
    faultproxy.set_faults(short_put={"fraction": 0.5, "kind": "UploadPart", "nth": nth})
    want = payload("short-part", BIG)
    write_file(m.join("p.bin"), want)
    check_object(s3client, bucket, "p.bin", want)
    assert faultproxy.faults_injected("short_put") == 1
    assert faultproxy.requests_seen(kind="UploadPart") >= 5  # 4 parts + the one again
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


# -- 5xx -----------------------------------------------------------------------------------
@pytest.mark.parametrize("status,code", [(503, "SlowDown"), (500, "InternalError")])
def test_5xx_burst_on_parts_is_retried(mount, bucket, s3client, faultproxy, cache_dir, status,
                                       code):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    faultproxy.set_faults(errors={"status": status, "code": code, "kind": "UploadPart",
                                  "nth": 2, "count": 4})
    want = payload("5xx-parts", BIG)
    write_file(m.join("b.bin"), want)
    check_object(s3client, bucket, "b.bin", want)
    assert faultproxy.faults_injected("errors") == 4
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


def test_part_failing_past_request_retries_is_retried_alone(mount, bucket, s3client, faultproxy,
                                                           cache_dir):
    # retries=1: each part request gives up after 2 attempts, so the 3 errors
    # exhaust one request and the part goes out again on its own
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint, "retries=1")
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown", "kind": "UploadPart",
                                  "nth": 1, "count": 3})
    want = payload("part-alone", BIG)
    write_file(m.join("a.bin"), want)
    check_object(s3client, bucket, "a.bin", want)
    assert faultproxy.faults_injected("errors") == 3
    assert faultproxy.requests_seen(kind="CreateMultipartUpload") == 1, \
        "a failed part restarted the whole upload"
    assert faultproxy.requests_seen(kind="CompleteMultipartUpload") == 1
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


@pytest.mark.parametrize("status,code", [(503, "SlowDown"), (500, "InternalError")])
def test_5xx_on_complete_once_ends_with_one_correct_object(mount, bucket, s3client, faultproxy,
                                                          cache_dir, status, code):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    faultproxy.set_faults(errors={"status": status, "code": code,
                                  "kind": "CompleteMultipartUpload", "nth": 1})
    want = payload("5xx-complete", BIG)
    write_file(m.join("c.bin"), want)
    check_object(s3client, bucket, "c.bin", want)
    assert faultproxy.faults_injected("errors") == 1
    keys = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["c.bin"], keys
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


# -- a permanently failing endpoint ------------------------------------------------------------
PERMANENT = {"status": 500, "code": "InternalError", "kind": ["PutObject", "UploadPart"]}
FAIL_FAST = "retries=1,upload_retries=1"


@pytest.mark.parametrize("size", [SMALL, BIG], ids=["single-put", "multipart"])
def test_permanent_failure_is_eio_and_bytes_kept_in_recovery(mount, bucket, s3client,
                                                             faultproxy, cache_dir, size):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint, FAIL_FAST)
    faultproxy.set_faults(errors=PERMANENT)
    for i in range(3):  # a few files: the release after a failed close is racy
        key = "lost%d.bin" % i
        want = payload(key, size)
        t0 = time.monotonic()
        with pytest.raises(OSError) as ei:
            write_file(m.join(key), want)
        took = time.monotonic() - t0
        assert ei.value.errno == errno.EIO, "close() raised %r, want EIO" % ei.value
        assert took < 30, "close() took %.1f s to fail" % took
        released(cache_dir)
        m.check_alive()
        data, side = recovery_entry(cache_dir, key)
        with open(data, "rb") as f:
            check_bytes(f.read(), want, "recovered %s" % data)
        assert side["state"] == "failed", side
        assert side["bucket"] == bucket and side["key"] == key, side
        assert side["size"] == size, side
        assert side["md5"] == hashlib.md5(want).hexdigest(), side
        assert side.get("last_error") and side.get("time"), side
        assert "endpoint" in side and "upload_id" in side, side
    assert len(entries(cache_dir, "recovery")) == 6
    faultproxy.reset()
    stored = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert not stored, "objects stored by failed uploads: %s" % stored
    m.check_alive()
    no_uploads_left(s3client, bucket)  # released writers abort their uploads


def test_fsync_eio_then_successful_close_clears_recovery(mount, bucket, s3client, faultproxy,
                                                        cache_dir):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint, FAIL_FAST)
    faultproxy.set_faults(errors=PERMANENT)
    want = payload("fsync-eio", BIG)
    fd = os.open(m.join("f.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(want), MiB):
            os.write(fd, want[off:off + MiB])
        with pytest.raises(OSError) as ei:
            os.fsync(fd)
        assert ei.value.errno == errno.EIO
        data, side = recovery_entry(cache_dir, "f.bin")
        assert side["key"] == "f.bin" and side["size"] == len(want), side
        with open(data, "rb") as f:
            check_bytes(f.read(), want, "recovered after fsync")
        faultproxy.reset()
    finally:
        os.close(fd)  # the endpoint works again: this commit succeeds
    check_object(s3client, bucket, "f.bin", want)
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


# -- a daemon killed mid-upload ----------------------------------------------------------------
WRITER = r"""
import os, sys
src, dst = sys.argv[1], sys.argv[2]
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
n = 0
with open(src, "rb") as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        os.write(fd, b)
        n += len(b)
        print(n, flush=True)
os.close(fd)
print("closed", flush=True)
"""


def test_kill_9_mid_upload_then_remount_moves_staged_data_to_recovery(
        mount, bucket, s3client, faultproxy, cache_dir, tmp_path):
    src = tmp_path / "src"
    want = payload("killed", 48 * MiB)
    src.write_bytes(want)
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    faultproxy.set_faults(latency={"first_byte_ms": 3000, "kind": "UploadPart"})
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(src), m.join("big.bin")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        written = 0
        while written < 24 * MiB:
            line = child.stdout.readline()
            assert line, "the writer stopped: %s" % child.stderr.read()
            written = int(line)
        assert wait_for(lambda: faultproxy.requests_seen(kind="UploadPart") >= 1, 10), \
            "no part upload started"
        m.proc.kill()  # SIGKILL: no unmount, no cleanup
        m.proc.wait(10)
        subprocess.run(["fusermount3", "-uz", m.path], capture_output=True, timeout=30)
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail("the writer hung after the daemon was killed")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    m.unmount(check=False)
    staged = entries(cache_dir, "staging")
    assert any(n.endswith(".data") for n in staged), "nothing staged: %s" % staged
    assert not entries(cache_dir, "recovery")

    faultproxy.reset()
    m2 = rw(mount, bucket, cache_dir, faultproxy.endpoint)
    # the daemon recovers once mounted (the mount table may show it a moment
    # earlier): wait for the data and a complete sidecar
    assert wait_for(lambda: len(entries(cache_dir, "recovery")) == 2
                    and not entries(cache_dir, "staging"), 10), \
        "staging %s, recovery %s" % (entries(cache_dir, "staging"), entries(cache_dir, "recovery"))
    wait_for(lambda: sidecar_complete(cache_dir), 5)
    data, side = recovery_entry(cache_dir)
    assert side["state"] == "interrupted", side
    assert side["bucket"] == bucket and side["key"] == "big.bin", side
    got = open(data, "rb").read()
    assert 0 < len(got) <= len(want), "recovered %d bytes of %d" % (len(got), len(want))
    check_bytes(got, want[:len(got)], "recovered bytes against what was written")
    # every write(2) that returned before the kill is in the staged bytes
    assert len(got) >= written, "recovered %d bytes, %d were written before the kill" % (
        len(got), written)
    upload_id = side.get("upload_id")
    assert upload_id, "no upload_id recorded: %s" % side
    ups = s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert upload_id in [u["UploadId"] for u in ups], (upload_id, ups)
    s3client.abort_multipart_upload(Bucket=bucket, Key="big.bin", UploadId=upload_id)
    # the remount works normally
    write_file(m2.join("after.bin"), b"fine")
    check_object(s3client, bucket, "after.bin", b"fine")


# -- AIStore emulation -------------------------------------------------------------------------
AISTORE = {"default": None, "etag_non_md5": {"etag_non_md5": True},
           "multipart_etag_aws": {"multipart_etag": "aws"},
           "both": {"etag_non_md5": True, "multipart_etag": "aws"}}


@pytest.mark.parametrize("ais", list(AISTORE.values()), ids=list(AISTORE))
def test_aistore_writes_are_byte_identical(mount, bucket, s3client, faultproxy, cache_dir,
                                           tmp_path, ais):
    if ais:
        faultproxy.set_faults(aistore=ais)
    m = rw(mount, bucket, cache_dir, faultproxy.gateway_endpoint, "log_level=debug")
    small, big = payload("ais-small", SMALL), payload("ais-big", BIG)
    write_file(m.join("ais-small.bin"), small)
    (tmp_path / "big").write_bytes(big)
    subprocess.run(["cp", str(tmp_path / "big"), m.join("ais-big.bin")], check=True)
    check_object(s3client, bucket, "ais-small.bin", small)
    check_object(s3client, bucket, "ais-big.bin", big)
    assert faultproxy.redirects_issued() > 0
    by_listener = faultproxy.stats()["requests"]["by_listener"]
    assert by_listener.get("target", 0) > 0, by_listener
    log = m.log
    writes = admin.stats_json(m.path)["writes"]
    if ais and ais.get("etag_non_md5"):
        # an ETag that proves nothing: the object is read back and compared
        assert "ais-small.bin: verified by" not in log, log[-3000:]
        assert writes["verified_read"] >= 1, writes
    else:
        assert "ais-small.bin: verified by its MD5" in log, log[-3000:]
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


def test_aistore_short_put_caught_by_size_when_etags_are_not_md5(mount, bucket, s3client,
                                                                 faultproxy, cache_dir):
    faultproxy.set_faults(aistore={"etag_non_md5": True, "drop_content_md5": True},
                          short_put={"fraction": 0.5, "kind": "PutObject",
                                     "listener": "target", "nth": 1})
    m = rw(mount, bucket, cache_dir, faultproxy.gateway_endpoint)
    want = payload("ais-short", SMALL)
    write_file(m.join("s.bin"), want)
    check_object(s3client, bucket, "s.bin", want)
    assert faultproxy.faults_injected("short_put") == 1
    nothing_left(cache_dir)


def test_aistore_short_part_caught_with_multipart_etags(mount, bucket, s3client, faultproxy,
                                                        cache_dir):
    faultproxy.set_faults(aistore={"multipart_etag": "aws", "drop_content_md5": True},
                          short_put={"fraction": 0.5, "kind": "UploadPart",
                                     "listener": "target", "nth": 2})
    m = rw(mount, bucket, cache_dir, faultproxy.gateway_endpoint)
    want = payload("ais-short-part", BIG)
    write_file(m.join("p.bin"), want)
    check_object(s3client, bucket, "p.bin", want)
    assert faultproxy.faults_injected("short_put") == 1
    nothing_left(cache_dir)
    no_uploads_left(s3client, bucket)


# -- verify=read ---------------------------------------------------------------------------------
def test_verify_read_reads_each_commit_back(mount, bucket, s3client, faultproxy, cache_dir):
    m = rw(mount, bucket, cache_dir, faultproxy.endpoint, "verify=read")
    small, big = payload("vr-small", SMALL), payload("vr-big", BIG)
    write_file(m.join("small.bin"), small)
    gets = faultproxy.requests_seen(kind="GetObject")
    assert gets >= 1, "verify=read did not read the single PUT back"
    write_file(m.join("big.bin"), big)
    assert faultproxy.requests_seen(kind="GetObject") > gets, \
        "verify=read did not read the multipart object back"
    check_object(s3client, bucket, "small.bin", small)
    check_object(s3client, bucket, "big.bin", big)
    nothing_left(cache_dir)
