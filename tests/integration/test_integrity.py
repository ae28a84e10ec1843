"""Integrity promises under adversarial conditions (issue 12).

Each case was found by an adversarial pass and fails on the code before
the fix:
  - a read never mixes two versions of an object: every GET response's ETag
    and object size are compared with what the open saw (s3rver, like some
    other stores, ignores If-Match on GET), and a changed object is EIO with
    a log line naming the key and both ETags;
  - a handle that saw a failed write (ENOSPC from a full cache filesystem or
    from the free-space floor) never commits: close() and fsync() return the
    error and the stored object is untouched;
  - SIGTERM, SIGINT and SIGHUP during a commit let it finish and leave no
    staging file behind, so the next mount finds no false "interrupted
    upload"; a file still open with uncommitted data when the daemon stops is
    kept in recovery at once, marked interrupted;
  - `recover push` does not overwrite an object that changed since the data
    was staged, unless --force;
  - a commit whose every attempt fails verification leaves no corrupt object
    under the key;
  - a mount against an endpoint that accepts connections and never answers
    fails within mount_timeout, saying what it waits for after 2 s; doctor
    bounds each step;
  - a mount point that is already a mount, or that is not empty, is refused
    (-o nonempty allows the latter);
  - a file unlinked through the mount while open for reading reads on from
    memory, and fails with EIO and a log line where the bytes are gone."""

import errno
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from harness import admin
from harness.mount import (MiB, check_bytes, check_object, daemon_env, get_object, payload,
                           run, wait_for)
from harness.omtools import tool
from harness.recovery import entries, read_sidecar, recovery_entries
from harness.trees import exists

FAST = "retry_base=0.02,retry_max=0.2"


def put(s3client, bucket, key, data):
    return s3client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"].strip('"')


def no_uploads_left(s3client, bucket):
    # Swift updates its container listings asynchronously: an aborted upload
    # can stay listed for a moment under load
    def uploads():
        return s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    wait_for(lambda: not uploads(), 30)
    ups = uploads()
    assert not ups, "multipart uploads left behind: %s" % [(u["Key"], u["UploadId"]) for u in ups]


# -- 1. a read never mixes two versions ---------------------------------------------------
# small buffers, so that every MiB read after the overwrite needs a new GET
SMALL_READS = "part_size=1M,prefetch_initial=1M,prefetch_max=1M,memory_limit=16M"


def read_across_overwrite(path, old, overwrite, chunk=128 * 1024, at=2 * MiB, random=False):
    """Read path until EIO; overwrite() runs once `at` bytes were read.
    Returns (bytes read, errno or None). Every byte returned must be old's."""
    fd = os.open(path, os.O_RDONLY)
    got, err = bytearray(), None
    order = list(range(0, len(old), chunk))
    if random:  # a fixed shuffle: pread at scattered offsets
        order = order[:at // chunk] + sorted(order[at // chunk:], key=lambda o: (o * 7919) % 1013)
    try:
        for i, off in enumerate(order):
            if i * chunk == at:
                overwrite()
            try:
                b = os.pread(fd, chunk, off)
            except OSError as e:
                err = e.errno
                break
            check_bytes(b, old[off:off + len(b)], "bytes at %d after the overwrite" % off)
            got += b
    finally:
        os.close(fd)
    return bytes(got), err


@pytest.mark.parametrize("how", ["same-size", "other-size", "random-reads"])
def test_a_read_never_mixes_two_versions(mount, bucket, s3client, faultproxy, how):
    key = "versions.bin"
    old = payload("old", 24 * MiB)
    new = payload("new", 24 * MiB if how != "other-size" else 30 * MiB)
    old_etag = put(s3client, bucket, key, old)
    faultproxy.set_faults(ignore_if_match=True)  # as some stores do on GET
    m = mount(bucket, SMALL_READS, endpoint=faultproxy.endpoint)
    box = {}

    def overwrite():
        box["etag"] = put(s3client, bucket, key, new)

    got, err = read_across_overwrite(m.join(key), old, overwrite, random=how == "random-reads")
    assert err == errno.EIO, "read %d bytes of the old version and then %s, want EIO" % (
        len(got), "no error" if err is None else errno.errorcode[err])
    assert len(got) < len(old)
    assert wait_for(lambda: old_etag in m.log and box["etag"] in m.log, 5), \
        "no log line naming both ETags:\n" + m.log[-3000:]
    line = [ln for ln in m.log.splitlines() if old_etag in ln and box["etag"] in ln][0]
    assert key in line and "changed" in line, line
    # a new open reads the new version whole
    with open(m.join(key), "rb") as f:
        check_bytes(f.read(), new, "the new version after reopening")


def test_a_small_file_read_after_an_overwrite_is_one_version(mount, bucket, s3client):
    """A whole small object fetched by the lookup and then opened: the open
    must not take another version's bytes for its own."""
    key = "small.bin"
    put(s3client, bucket, key, payload("v1", 300000))
    m = mount(bucket, "attr_timeout=0,entry_timeout=0")
    for i in range(2, 6):
        want = payload("v%d" % i, 300000 + i)
        put(s3client, bucket, key, want)
        with open(m.join(key), "rb") as f:
            check_bytes(f.read(), want, "version %d" % i)


# -- 2. a failed write never commits ------------------------------------------------------
@pytest.fixture
def tiny_cache(tmpfs):
    """A cache_dir on a 64 MiB tmpfs of its own."""
    return tmpfs("64m")


def write_until_error(path, total, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """os.write 1 MiB at a time until total or an error; returns (fd, bytes
    written, errno)."""
    fd = os.open(path, flags, 0o644)
    block = payload("fill", MiB)
    done = 0
    while done < total:
        try:
            done += os.write(fd, block)
        except OSError as e:
            return fd, done, e.errno
    return fd, done, None


@pytest.mark.parametrize("floor", ["default", "0"], ids=["free-space-floor", "disk-full"])
@pytest.mark.parametrize("end", ["close", "fsync"])
def test_enospc_mid_write_never_commits(mount, bucket, s3client, tiny_cache, floor, end):
    good = payload("good", 3 * MiB)
    put(s3client, bucket, "ckpt.bin", good)
    opts = "cache_dir=%s,%s,part_size=5M" % (tiny_cache, FAST)
    if floor != "default":
        opts += ",min_free_space=" + floor
    m = mount(bucket, opts)
    fd, done, err = write_until_error(m.join("ckpt.bin"), 200 * MiB)
    try:
        assert err == errno.ENOSPC, "wrote %d MiB, then %s" % (done >> 20, err)
        assert 0 < done < 64 * MiB
        if end == "fsync":
            with pytest.raises(OSError) as ei:
                os.fsync(fd)
            assert ei.value.errno == errno.ENOSPC, ei.value
    finally:
        with pytest.raises(OSError) as ei:
            os.close(fd)
    assert ei.value.errno == errno.ENOSPC, "close() raised %r, want ENOSPC" % ei.value
    check_object(s3client, bucket, "ckpt.bin", good, "the object before the failed write")
    assert wait_for(lambda: not entries(tiny_cache, "staging"), 10), entries(tiny_cache, "staging")
    assert not entries(tiny_cache, "recovery"), entries(tiny_cache, "recovery")
    no_uploads_left(s3client, bucket)
    assert "ckpt.bin" in m.log and "not uploaded" in m.log, m.log[-2000:]
    # the mount still works, and the space is back
    with open(m.join("after.bin"), "wb") as f:
        f.write(b"after")
    check_object(s3client, bucket, "after.bin", b"after")


def test_python_write_raising_enospc_never_commits(mount, bucket, s3client, tiny_cache):
    good = payload("good", MiB)
    put(s3client, bucket, "model.pt", good)
    m = mount(bucket, "cache_dir=%s,%s" % (tiny_cache, FAST))
    f = open(m.join("model.pt"), "wb")
    with pytest.raises(OSError) as ei:
        for _ in range(200):
            f.write(payload("w", MiB))
    assert ei.value.errno == errno.ENOSPC
    with pytest.raises(OSError):
        f.close()
    check_object(s3client, bucket, "model.pt", good)


# -- 3. a clean stop during a commit --------------------------------------------------------
WRITER = r"""
import os, sys
dst, size = sys.argv[1], int(sys.argv[2])
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block = bytes(range(256)) * 4096
n = 0
while n < size:
    n += os.write(fd, block[:min(len(block), size - n)])
print("written", flush=True)
sys.stdin.readline()  # wait for the go-ahead before close (fsync too when asked)
try:
    if len(sys.argv) > 3:
        os.fsync(fd)
    os.close(fd)
    print("closed", flush=True)
except OSError as e:
    print("error", e.errno, flush=True)
"""


def commits_in_flight(path):
    """The daemon's own count (objmountctl status --json), 0 if unknown."""
    p = admin.ctl(["status", "--json"])
    try:
        mounts = json.loads(p.stdout)
    except ValueError:
        return 0
    for m in mounts if isinstance(mounts, list) else [mounts]:
        if m.get("mountpoint") == path:
            return m.get("commits_in_flight", 0)
    return 0


def expected_writer_bytes(size):
    block = bytes(range(256)) * 4096
    return (block * (size // len(block) + 1))[:size]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_during_a_commit_lets_it_finish_and_leaves_nothing(
        mount, bucket, s3client, faultproxy, cache_dir, sig):
    size = 40 * MiB
    m = mount(bucket, "cache_dir=%s,%s,part_size=5M" % (cache_dir, FAST),
              endpoint=faultproxy.endpoint)
    faultproxy.set_faults(latency={"first_byte_ms": 600, "kind": "UploadPart"})
    child = subprocess.Popen([sys.executable, "-c", WRITER, m.join("big.bin"), str(size)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
        child.stdin.write("go\n")
        child.stdin.flush()
        # the close is committing (the daemon says so), parts going out slowly;
        # a close that reaches the daemon after the signal is not a commit
        # in flight (libfuse drops requests read after the session ended)
        assert wait_for(lambda: commits_in_flight(m.path) >= 1, 60)
        m.proc.send_signal(sig)
        out = child.stdout.readline().strip()
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out == "closed", "close() during a stop answered %r\n%s" % (out, m.log[-3000:])
    assert m.proc.wait(60) == 0, m.log[-3000:]
    check_object(s3client, bucket, "big.bin", expected_writer_bytes(size))
    assert entries(cache_dir, "staging") == [], "staging left by a clean stop"
    assert entries(cache_dir, "recovery") == [], "recovery after a clean stop"
    m.unmount(check=False)
    faultproxy.reset()
    m2 = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    time.sleep(0.5)
    assert entries(cache_dir, "recovery") == []
    assert "previous objmount" not in m2.log, m2.log


def test_a_stop_with_a_file_still_open_keeps_it_as_interrupted(
        mount, bucket, s3client, cache_dir):
    size = 6 * MiB
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    child = subprocess.Popen([sys.executable, "-c", WRITER, m.join("open.bin"), str(size)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(60) == 0, m.log[-3000:]
    finally:
        child.kill()
        child.wait()
    assert entries(cache_dir, "staging") == []
    found = recovery_entries(cache_dir)
    assert len(found) == 1, found
    data, side = found[0]
    assert side["state"] == "interrupted" and side["key"] == "open.bin", side
    with open(data, "rb") as f:
        check_bytes(f.read(), expected_writer_bytes(size), "the interrupted file's bytes")
    assert "open.bin" in m.log and "interrupted" in m.log, m.log[-2000:]
    assert not exists(s3client, bucket, "open.bin")
    m.unmount(check=False)


# -- recover push does not overwrite a newer object ------------------------------------------
PERMANENT = {"status": 500, "code": "InternalError", "kind": ["PutObject", "UploadPart"]}


def fail_one_commit(mount, bucket, faultproxy, cache_dir, key, data):
    m = mount(bucket, "cache_dir=%s,%s,retries=1,upload_retries=1" % (cache_dir, FAST),
              endpoint=faultproxy.endpoint)
    faultproxy.set_faults(errors=PERMANENT)
    fd = os.open(m.join(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    with pytest.raises(OSError):
        os.close(fd)
    faultproxy.reset()
    m.unmount()
    (data_path, side), = recovery_entries(cache_dir)
    return os.path.basename(data_path)[:-len(".data")], side


@pytest.mark.parametrize("existed", [True, False], ids=["overwrite", "new-key"])
def test_recover_push_refuses_an_object_changed_since_staging(
        mount, bucket, s3client, s3server, faultproxy, cache_dir, existed):
    if existed:
        put(s3client, bucket, "r.bin", b"before")
    rid, side = fail_one_commit(mount, bucket, faultproxy, cache_dir, "r.bin", b"staged")
    assert side["base_etag"] == (hashlib.md5(b"before").hexdigest() if existed else ""), side
    newer = b"written by someone else after the failure"
    put(s3client, bucket, "r.bin", newer)
    o = "cache_dir=%s,endpoint=%s,%s" % (cache_dir, s3server.endpoint, FAST)
    p = admin.ctl(["recover", "push", rid, "-o", o])
    line = admin.one_error_line(p, "recover push over a changed object")
    assert "changed" in line and "--force" in line, line
    check_object(s3client, bucket, "r.bin", newer)
    assert len(recovery_entries(cache_dir)) == 1, "data dropped after a refused push"
    p = admin.ctl(["recover", "push", "--force", rid, "-o", o])
    assert p.returncode == 0, p.stdout + p.stderr
    check_object(s3client, bucket, "r.bin", b"staged")
    assert recovery_entries(cache_dir) == []


def test_recover_push_of_an_unchanged_object_goes_ahead(
        mount, bucket, s3client, s3server, faultproxy, cache_dir):
    put(s3client, bucket, "u.bin", b"before")
    rid, _ = fail_one_commit(mount, bucket, faultproxy, cache_dir, "u.bin", b"staged")
    o = "cache_dir=%s,endpoint=%s,%s" % (cache_dir, s3server.endpoint, FAST)
    p = admin.ctl(["recover", "push", rid, "-o", o])
    assert p.returncode == 0, p.stdout + p.stderr
    check_object(s3client, bucket, "u.bin", b"staged")


# -- 4. a corrupting endpoint leaves no corrupt object ----------------------------------------
@pytest.mark.parametrize("existed", [False, True], ids=["new-key", "overwrite"])
@pytest.mark.parametrize("size", [MiB + 7, 12 * MiB + 5], ids=["single-put", "multipart"])
def test_a_commit_failing_verification_leaves_no_corrupt_object(
        mount, bucket, s3client, faultproxy, cache_dir, existed, size):
    key = "c.bin"
    if existed:
        put(s3client, bucket, key, b"the previous version")
    m = mount(bucket, "cache_dir=%s,%s,part_size=5M,upload_retries=1,upload_retry_delay=0.05"
              % (cache_dir, FAST), endpoint=faultproxy.endpoint)
    # every body cut short on the way, Content-MD5 stripped: the server
    # stores what arrives (for parts: the Complete's object is short)
    kind = "PutObject" if size < 5 * MiB else "UploadPart"
    faultproxy.set_faults(short_put={"fraction": 0.5, "kind": kind, "nth": 1, "count": 1000},
                          aistore=None)
    want = payload("c", size)
    fd = os.open(m.join(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, want)
    with pytest.raises(OSError) as ei:
        os.close(fd)
    assert ei.value.errno == errno.EIO
    faultproxy.reset()
    (data, side), = recovery_entries(cache_dir)
    with open(data, "rb") as f:
        check_bytes(f.read(), want, "recovered bytes")
    if exists(s3client, bucket, key):
        # the previous version stays when no attempt replaced it (a short
        # part is caught before CompleteMultipartUpload)
        got = get_object(s3client, bucket, key)
        assert got in (want, b"the previous version"), \
            "a %d-byte object that failed verification stays under %s" % (len(got), key)
    no_uploads_left(s3client, bucket)


# -- 5. a start against an endpoint that never answers ---------------------------------------
class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.conns = []
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.stopped = True
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def black_hole():
    bh = BlackHole()
    yield bh
    bh.close()


def timed_mount_failure(args, timeout=120):
    t0 = time.monotonic()
    p = run(args, timeout=timeout)
    return p, time.monotonic() - t0


@pytest.mark.parametrize("bound,opt", [(15, None), (3, "mount_timeout=3")],
                         ids=["default-15s", "mount_timeout=3"])
def test_a_mount_against_a_silent_endpoint_fails_in_bounded_time(black_hole, tmp_path, bound,
                                                                 opt):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    o = "endpoint=" + black_hole.endpoint + ("," + opt if opt else "")
    p, took = timed_mount_failure(["bucket", str(mnt), "-f", "-o", o])
    assert p.returncode != 0
    assert bound - 1 <= took <= bound + 6, "failed after %.1f s, bound %d s" % (took, bound)
    err = p.stderr
    assert re.search(r"waiting for %s" % re.escape(black_hole.endpoint), err), err
    last = err.strip().splitlines()[-1]
    assert black_hole.endpoint in last and "%d s" % bound in last, err
    assert not os.path.ismount(str(mnt))


def test_doctor_against_a_silent_endpoint_is_bounded_and_prints_as_it_goes(black_hole):
    t0 = time.monotonic()
    p = admin.ctl(["doctor", "b", "-o", "endpoint=%s,%s" % (black_hole.endpoint, FAST),
                   "--timeout", "3"], timeout=60)
    took = time.monotonic() - t0
    assert p.returncode == 1, p.stdout + p.stderr
    assert took < 15, "doctor took %.1f s" % took
    out = p.stdout
    assert "[ ok ] endpoint 127.0.0.1:%d reachable" % black_hole.port in out, out
    assert re.search(r"\[FAIL\] .*no answer.*3 s", out), out


def test_doctor_prints_each_step_before_the_next_one_runs(black_hole):
    """Output is flushed step by step, so a user watching a pipe sees the
    step it hangs on."""
    proc = subprocess.Popen(
        [tool("objmountctl"), "doctor", "b", "-o",
         "endpoint=%s,%s" % (black_hole.endpoint, FAST), "--timeout", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=daemon_env())
    try:
        first = proc.stdout.readline()
        assert "configuration" in first, first
        t_first = time.monotonic()
        proc.wait(30)
        assert time.monotonic() - t_first > 3, "the first line came only at the end"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


# -- 6. mount points ----------------------------------------------------------------------
def test_a_second_mount_on_the_same_mountpoint_is_refused(mount, bucket):
    m = mount(bucket)
    p = run([bucket, m.path, "-f"], timeout=60)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "already" in lines[0] and m.path in lines[0], p.stderr
    n = sum(1 for ln in open("/proc/self/mountinfo") if (" %s " % m.path) in ln)
    assert n == 1, "%d mounts on %s" % (n, m.path)
    m.check_alive()


def test_a_non_empty_mountpoint_needs_nonempty(mount, bucket, s3client, tmp_path):
    put(s3client, bucket, "k", b"v")
    mnt = tmp_path / "full"
    mnt.mkdir()
    (mnt / "local-file").write_bytes(b"x")
    p = run([bucket, str(mnt), "-f"], timeout=60)
    assert p.returncode != 0
    assert "not empty" in p.stderr and "nonempty" in p.stderr, p.stderr
    assert not os.path.ismount(str(mnt))
    m = mount(bucket, "nonempty", mountpoint=str(mnt))
    assert os.listdir(m.path) == ["k"]


# -- 7. reading on after an unlink through the mount --------------------------------------------
def test_an_unlinked_small_file_reads_on(mount, bucket, s3client):
    want = payload("small", 400000)
    put(s3client, bucket, "s.bin", want)
    m = mount(bucket, FAST)
    fd = os.open(m.join("s.bin"), os.O_RDONLY)
    try:
        head = os.read(fd, 4096)
        os.unlink(m.join("s.bin"))
        assert not exists(s3client, bucket, "s.bin")
        rest = b""
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            rest += b
    finally:
        os.close(fd)
    check_bytes(head + rest, want, "an unlinked small file")


def test_an_unlinked_large_file_reads_what_is_in_memory_then_eio(mount, bucket, s3client):
    want = payload("large", 64 * MiB)
    put(s3client, bucket, "l.bin", want)
    m = mount(bucket, SMALL_READS + "," + FAST)
    fd = os.open(m.join("l.bin"), os.O_RDONLY)
    try:
        first = os.pread(fd, 65536, 0)
        check_bytes(first, want[:65536], "before the unlink")
        os.unlink(m.join("l.bin"))
        with pytest.raises(OSError) as ei:
            for off in range(0, len(want), MiB):
                b = os.pread(fd, MiB, off)
                check_bytes(b, want[off:off + len(b)], "after the unlink at %d" % off)
        assert ei.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert wait_for(lambda: "l.bin" in m.log and "unlinked" in m.log, 5), m.log[-2000:]
