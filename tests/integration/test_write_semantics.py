"""What a writer sees through the mount, beyond the stored bytes.

fsync commits: it returns success and the object is complete before close.
Read-your-writes: while a file is open for writing, reads through the same
and a second descriptor, and stat, show what was written. Metadata: chmod,
chown and utime are stored as x-amz-meta-mode/-uid/-gid/-mtime (s3fs-fuse
names; mode in decimal with S_IFREG) on a closed file and while open, and a
new mount shows them. A server that keeps no user metadata (AIStore's S3
API drops x-amz-meta-*) gets no request for them: the mount shows them
while it holds the file, a new mount shows the defaults, and the bytes stay
as they were. ro mounts refuse writes with EROFS; no_overwrite
refuses opening an existing object for writing with EEXIST. Concurrent
writers of different files and two descriptors of one file end
byte-identical. Objects are checked with boto3, never through the mount."""

import errno
import os
import stat
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import admin
from harness.mount import MiB, PART, check_bytes, check_object, payload, read_all, wait_for
from harness.trees import exists

WRITE_OPTS = "part_size=5M,upload_retry_delay=0.05"


def rw(mount, bucket, cache_dir, opts=""):
    o = "%s,cache_dir=%s" % (WRITE_OPTS, cache_dir)
    return mount(bucket, o + ("," + opts if opts else ""))


def nothing_left(cache_dir):
    staging, recovery = (os.path.join(cache_dir, d) for d in ("staging", "recovery"))
    assert wait_for(lambda: not os.listdir(staging), 10), os.listdir(staging)
    assert not os.listdir(recovery), os.listdir(recovery)


def pwrite_all(fd, data, off):
    while data:
        n = os.pwrite(fd, data, off)
        data, off = data[n:], off + n


def expect_errno(err, fn, *args):
    with pytest.raises(OSError) as ei:
        fn(*args)
    assert ei.value.errno == err, "%s%r: %s, want %s" % (
        getattr(fn, "__name__", fn), args, errno.errorcode.get(ei.value.errno),
        errno.errorcode[err])


# -- fsync -----------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1000, 2 * PART + 3], ids=["single-put", "multipart"])
def test_fsync_commits_before_close(mount, bucket, s3client, cache_dir, size):
    m = rw(mount, bucket, cache_dir)
    first, more = payload("fs1", size), payload("fs2", PART // 2)
    fd = os.open(m.join("f.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, first, 0)
        assert os.fsync(fd) is None
        check_object(s3client, bucket, "f.bin", first, "after the first fsync, before close")
        assert os.fsync(fd) is None  # nothing changed: still success
        pwrite_all(fd, more, size)
        os.fdatasync(fd)
        check_object(s3client, bucket, "f.bin", first + more, "after fdatasync, before close")
        pwrite_all(fd, b"tail", size + len(more))
    finally:
        os.close(fd)
    check_object(s3client, bucket, "f.bin", first + more + b"tail", "after close")
    nothing_left(cache_dir)


def test_fsync_of_unwritten_descriptor_succeeds(mount, bucket, s3client, cache_dir):
    want = payload("ro-fd", 5000)
    s3client.put_object(Bucket=bucket, Key="r.bin", Body=want)
    m = rw(mount, bucket, cache_dir)
    for flags in (os.O_RDONLY, os.O_RDWR):
        fd = os.open(m.join("r.bin"), flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    check_object(s3client, bucket, "r.bin", want)
    nothing_left(cache_dir)


# -- read-your-writes -----------------------------------------------------------------------
def test_new_file_reads_and_stat_come_from_what_was_written(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    p = m.join("ryw.bin")
    model = bytearray(payload("ryw", 2 * PART + 100))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = None
    try:
        assert os.fstat(fd).st_size == 0 and os.stat(p).st_size == 0
        pwrite_all(fd, bytes(model), 0)
        assert os.fstat(fd).st_size == len(model)
        assert os.stat(p).st_size == len(model)
        for off, ln in ((0, 10), (PART - 5, 10), (len(model) - 7, 100), (len(model), 10)):
            check_bytes(os.pread(fd, ln, off), bytes(model[off:off + ln]),
                        "pread(%d, %d) through the writing fd" % (ln, off))
        # rewrite inside the first part (by now uploaded in the background)
        patch = payload("ryw-patch", 3000)
        pwrite_all(fd, patch, 1000)
        model[1000:4000] = patch
        fd2 = os.open(p, os.O_RDONLY)
        got = b""
        while True:
            b = os.read(fd2, 131071)
            if not b:
                break
            got += b
        check_bytes(got, bytes(model), "a second descriptor before close")
        assert not exists(s3client, bucket, "ryw.bin"), "committed before any close or fsync"
    finally:
        if fd2 is not None:
            os.close(fd2)
        os.close(fd)
    check_object(s3client, bucket, "ryw.bin", bytes(model))
    assert os.stat(p).st_size == len(model)
    assert "ryw.bin" in os.listdir(m.path)
    nothing_left(cache_dir)


def test_existing_object_rewritten_in_place_reads_merged_bytes(mount, bucket, s3client,
                                                               cache_dir):
    base = payload("merge", 2 * PART + 1)
    s3client.put_object(Bucket=bucket, Key="e.bin", Body=base)
    m = rw(mount, bucket, cache_dir)
    p = m.join("e.bin")
    patch = payload("merge-patch", 70000)
    model = bytearray(base)
    model[PART - 100:PART - 100 + len(patch)] = patch
    model += b"appended"
    fd = os.open(p, os.O_RDWR)
    try:
        pwrite_all(fd, patch, PART - 100)
        pwrite_all(fd, b"appended", len(base))
        assert os.stat(p).st_size == len(model)
        check_bytes(read_all(p, chunk=MiB + 3), bytes(model), "second descriptor")
        check_bytes(os.pread(fd, 200, PART - 150), bytes(model[PART - 150:PART + 50]),
                    "same descriptor")
        check_object(s3client, bucket, "e.bin", base, "the object before close")
    finally:
        os.close(fd)
    check_object(s3client, bucket, "e.bin", bytes(model))
    nothing_left(cache_dir)


def test_stat_shows_new_size_after_commit(mount, bucket, s3client, cache_dir, tmp_path):
    s3client.put_object(Bucket=bucket, Key="grow.bin", Body=b"x" * 1000)
    m = rw(mount, bucket, cache_dir)
    p = m.join("grow.bin")
    assert os.stat(p).st_size == 1000  # cached attributes
    src = tmp_path / "src"
    src.write_bytes(payload("grow", PART + 9))
    subprocess.run(["cp", str(src), p], check=True)
    assert os.stat(p).st_size == PART + 9
    with open(p, "r+b") as f:
        f.truncate(77)
    assert os.stat(p).st_size == 77
    check_object(s3client, bucket, "grow.bin", payload("grow", PART + 9)[:77])
    nothing_left(cache_dir)


# -- metadata ------------------------------------------------------------------------------
MTIME = 1600000000


def head_meta(s3client, bucket, key):
    """x-amz-meta-* by lower-case name: header names have no case, and
    AIStore sends them in Go's canonical form (X-Amz-Meta-Mode)."""
    meta = s3client.head_object(Bucket=bucket, Key=key)["Metadata"]
    return {k.lower(): v for k, v in meta.items()}


def writes(m):
    return admin.stats_json(m.path)["writes"]


def after_remount(mount, bucket, cache_dir, s3server, key, mode, mtime):
    """stat of key in a new mount: the metadata stored, or the defaults
    where the server keeps none."""
    st = os.stat(rw(mount, bucket, cache_dir).join(key))
    got = (stat.S_IMODE(st.st_mode), int(st.st_mtime))
    if s3server.user_metadata:
        assert got == (mode, mtime), "stat after remount: mode %o, mtime %d" % got
    else:
        assert got[0] != mode and got[1] != mtime, \
            "%s keeps no metadata, yet a new mount shows mode %o, mtime %d" % (
                s3server.kind, got[0], got[1])
    return st


def check_meta(s3client, s3server, bucket, key, **want):
    meta = head_meta(s3client, bucket, key)
    if s3server.user_metadata:
        for k, v in want.items():
            assert meta.get(k) == str(v), (k, meta)
    else:
        assert not set(want) & set(meta), meta


@pytest.mark.parametrize("size", [1000, 2 * PART + 1], ids=["small", "multipart"])
def test_chmod_chown_utime_of_closed_file_stored_as_metadata(mount, bucket, s3client, s3server,
                                                            cache_dir, size):
    want = payload("meta", size)
    s3client.put_object(Bucket=bucket, Key="m.bin", Body=want)
    m = rw(mount, bucket, cache_dir)
    p = m.join("m.bin")
    before = writes(m)
    os.chmod(p, 0o640)
    os.chown(p, 1234, 5678)
    os.utime(p, (MTIME - 5, MTIME))
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o640 and stat.S_ISREG(st.st_mode)
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert int(st.st_mtime) == MTIME
    check_meta(s3client, s3server, bucket, "m.bin", mode=stat.S_IFREG | 0o640, uid=1234,
               gid=5678, mtime=MTIME)
    after = writes(m)
    if not s3server.user_metadata:
        # nothing sent: a self-copy of the object would carry none of it
        assert after["meta_not_stored"] - before["meta_not_stored"] == 3, after
        assert after["uploaded_bytes"] == before["uploaded_bytes"], after
    check_object(s3client, bucket, "m.bin", want, "bytes after the metadata change")
    m.unmount()
    st = after_remount(mount, bucket, cache_dir, s3server, "m.bin", 0o640, MTIME)
    if s3server.user_metadata:
        assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert st.st_size == size
    nothing_left(cache_dir)


@pytest.mark.parametrize("size", [1000, 2 * PART + 1], ids=["small", "multipart"])
def test_chmod_utime_while_open_ride_on_the_upload(mount, bucket, s3client, s3server, cache_dir,
                                                   size):
    m = rw(mount, bucket, cache_dir)
    p = m.join("o.bin")
    want = payload("open-meta", size)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, want, 0)
        os.fchmod(fd, 0o604)  # the multipart upload is under way by now
        os.utime(fd, (MTIME, MTIME + 1))
    finally:
        os.close(fd)
    check_meta(s3client, s3server, bucket, "o.bin", mode=stat.S_IFREG | 0o604, mtime=MTIME + 1)
    check_object(s3client, bucket, "o.bin", want)
    st = os.stat(p)
    assert (stat.S_IMODE(st.st_mode), int(st.st_mtime)) == (0o604, MTIME + 1), \
        "stat after close: mode %o, mtime %d" % (st.st_mode, st.st_mtime)
    if not s3server.user_metadata:
        # the changes began no second upload
        assert writes(m)["uploaded_bytes"] == size, writes(m)
    m.unmount()
    after_remount(mount, bucket, cache_dir, s3server, "o.bin", 0o604, MTIME + 1)
    nothing_left(cache_dir)


def test_stat_while_open_shows_chmod_and_utime(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    p = m.join("s.bin")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"abc")
        os.fchmod(fd, 0o604)
        st = os.fstat(fd)
        assert stat.S_IMODE(st.st_mode) == 0o604, "fstat after fchmod: %o" % st.st_mode
        os.utime(p, (MTIME, MTIME))
        st = os.stat(p)
        assert (stat.S_IMODE(st.st_mode), int(st.st_mtime)) == (0o604, MTIME), \
            "stat after fchmod and utime: mode %o, mtime %d" % (st.st_mode, st.st_mtime)
    finally:
        os.close(fd)
    check_object(s3client, bucket, "s.bin", b"abc")
    nothing_left(cache_dir)


def test_chmod_by_name_while_another_descriptor_writes(mount, bucket, s3client, s3server,
                                                       cache_dir):
    want = payload("by-name", PART + 1)
    s3client.put_object(Bucket=bucket, Key="n.bin", Body=want)
    m = rw(mount, bucket, cache_dir)
    p = m.join("n.bin")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"more")
        os.chmod(p, 0o600)
    finally:
        os.close(fd)
    check_meta(s3client, s3server, bucket, "n.bin", mode=stat.S_IFREG | 0o600)
    check_object(s3client, bucket, "n.bin", want + b"more")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    m.unmount()
    st = os.stat(rw(mount, bucket, cache_dir).join("n.bin"))
    assert (stat.S_IMODE(st.st_mode) == 0o600) == s3server.user_metadata, oct(st.st_mode)
    assert st.st_size == len(want) + 4
    nothing_left(cache_dir)


# -- ro and no_overwrite --------------------------------------------------------------------
def test_ro_mount_refuses_writes_with_erofs(mount, bucket, s3client, cache_dir):
    s3client.put_object(Bucket=bucket, Key="x", Body=b"abc")
    m = rw(mount, bucket, cache_dir, "ro")
    p = m.join("x")
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND):
        expect_errno(errno.EROFS, os.open, p, flags)
    expect_errno(errno.EROFS, os.open, m.join("new"), os.O_WRONLY | os.O_CREAT, 0o644)
    expect_errno(errno.EROFS, os.truncate, p, 1)
    expect_errno(errno.EROFS, os.chmod, p, 0o600)
    expect_errno(errno.EROFS, os.utime, p, (MTIME, MTIME))
    r = subprocess.run(["truncate", "-s", "0", p], capture_output=True, text=True)
    assert r.returncode != 0 and "Read-only file system" in r.stderr, r.stderr
    check_object(s3client, bucket, "x", b"abc")
    assert not exists(s3client, bucket, "new")
    assert open(p, "rb").read() == b"abc"


def test_no_overwrite_refuses_existing_objects_with_eexist(mount, bucket, s3client, cache_dir):
    s3client.put_object(Bucket=bucket, Key="x", Body=b"keep me")
    m = rw(mount, bucket, cache_dir, "no_overwrite")
    p = m.join("x")
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND,
                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
        expect_errno(errno.EEXIST, os.open, p, flags, 0o644)
    with open(m.join("fresh"), "wb") as f:  # new names may be written
        f.write(b"new")
    check_object(s3client, bucket, "fresh", b"new")
    expect_errno(errno.EEXIST, os.open, m.join("fresh"), os.O_WRONLY | os.O_TRUNC)
    check_object(s3client, bucket, "x", b"keep me")
    assert open(p, "rb").read() == b"keep me"  # reading is fine
    nothing_left(cache_dir)


# -- concurrency ------------------------------------------------------------------------------
def test_concurrent_writers_of_different_files(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    sizes = [1, 1000, PART - 1, PART + 1, 2 * PART + 7, 3 * PART, 131072 * 7 + 3, 4 * PART + 11]
    chunks = [1, 4096, 65537, MiB + 7, 300001, MiB, 4093, 2 * MiB]
    barrier = threading.Barrier(len(sizes))

    def write(i):
        want = payload("conc%d" % i, sizes[i])
        fd = os.open(m.join("c%d.bin" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            barrier.wait(10)
            for off in range(0, len(want), chunks[i]):
                pwrite_all(fd, want[off:off + chunks[i]], off)
        finally:
            os.close(fd)
        return want

    with ThreadPoolExecutor(len(sizes)) as ex:
        results = list(ex.map(write, range(len(sizes))))
    for i, want in enumerate(results):
        check_object(s3client, bucket, "c%d.bin" % i, want)
    assert sorted(os.listdir(m.path)) == sorted("c%d.bin" % i for i in range(len(sizes)))
    nothing_left(cache_dir)


def test_two_descriptors_of_one_file_share_its_contents(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    p = m.join("two.bin")
    a, b = payload("two-a", 2 * PART), payload("two-b", PART + 5)
    fd1 = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = os.open(p, os.O_RDWR)
    try:
        # interleaved: fd1 the first two parts, fd2 from the third on
        for off in range(0, len(a), MiB):
            pwrite_all(fd1, a[off:off + MiB], off)
            if off < len(b):
                pwrite_all(fd2, b[off:off + MiB], len(a) + off)
        check_bytes(os.pread(fd2, 64, len(a) - 32), a[-32:] + b[:32], "fd2 sees fd1's writes")
        os.close(fd1)
        fd1 = None
        # closing fd1 committed everything the file holds, fd2's writes too
        check_object(s3client, bucket, "two.bin", a + b, "after closing the first descriptor")
        pwrite_all(fd2, b"Z" * 10, 5)
    finally:
        if fd1 is not None:
            os.close(fd1)
        os.close(fd2)
    check_object(s3client, bucket, "two.bin", a[:5] + b"Z" * 10 + a[15:] + b)
    nothing_left(cache_dir)


# -- local disk floor ---------------------------------------------------------------------------
def test_min_free_space_floor_gives_enospc(mount, bucket, s3client, cache_dir):
    s3client.put_object(Bucket=bucket, Key="keep.bin", Body=b"old")
    m = rw(mount, bucket, cache_dir, "min_free_space=1000t")  # more than any disk here
    with pytest.raises(OSError) as ei:
        with open(m.join("keep.bin"), "r+b") as f:  # no O_TRUNC: the object stays as it was
            f.seek(1)
            f.write(payload("enospc", MiB))
    assert ei.value.errno == errno.ENOSPC, ei.value
    check_object(s3client, bucket, "keep.bin", b"old")
    with pytest.raises(OSError) as ei:
        with open(m.join("new.bin"), "wb") as f:
            f.write(b"x")
    assert ei.value.errno == errno.ENOSPC, ei.value
    # like a full local disk: the created file may exist, empty, but holds no byte of the write
    assert not exists(s3client, bucket, "new.bin") or \
        s3client.head_object(Bucket=bucket, Key="new.bin")["ContentLength"] == 0
