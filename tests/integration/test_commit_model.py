"""When a file is committed (issue 22): what ordinary programs do to a file
open for writing, and what ends up in the bucket.

The kernel sends a FLUSH for every close() of every descriptor: the
original one after dup2 (dd, `cmd > file`), a copy a child inherited, at
the child's exit. Each case failed on the code where every FLUSH committed:
  - dd over a stored checkpoint that then fails with ENOSPC left an EMPTY
    object (the dup2 close committed the O_TRUNC); now the old one stays;
  - a child's exit in the middle of a write stored a torn object, and a
    write that failed afterwards (EFBIG) was not reported by close(); now
    nothing torn is stored and every later close/fsync returns the error;
  - five steps of a shell script redirected into the mount committed five
    times (60 MiB uploaded for a 20 MiB file); now once;
  - a pwrite at 6 TiB uploaded zero-filled parts; now EFBIG at once;
  - appending a line to a large object uploaded all of it again; now the
    unchanged parts are copied on the server (UploadPartCopy).
Objects are checked with boto3 straight against the server."""

import errno
import hashlib
import os
import subprocess

import pytest

from harness import admin
from harness.mount import MiB, check_object, payload, wait_for
from harness.recovery import entries

FAST = "retry_base=0.02,retry_max=0.2,upload_retry_delay=0.05"
TIB = 1 << 40


def put(s3client, bucket, key, data):
    return s3client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"].strip('"')


def writes(m):
    return admin.stats_json(m.path)["writes"]


def released(cache_dir, timeout=20):
    assert wait_for(lambda: not entries(cache_dir, "staging"), timeout), \
        "staging not emptied: %s" % entries(cache_dir, "staging")


@pytest.fixture
def tiny_cache(tmpfs):
    return tmpfs("48m")


# -- dd and `cmd > file`: the close after dup2 commits nothing -------------------------------
def test_dd_over_a_stored_checkpoint_failing_with_enospc_keeps_it(
        mount, bucket, s3client, tiny_cache, tmp_path):
    good = payload("ckpt-v1", 3 * MiB + 17)
    put(s3client, bucket, "ckpt.bin", good)
    m = mount(bucket, "cache_dir=%s,part_size=5M,%s" % (tiny_cache, FAST))
    src = tmp_path / "new.bin"
    src.write_bytes(payload("ckpt-v2", 80 * MiB))
    p = subprocess.run(["dd", "if=%s" % src, "of=%s" % m.join("ckpt.bin"), "bs=1M"],
                       capture_output=True, text=True)
    assert p.returncode != 0, p.stderr
    assert "No space left" in p.stderr, p.stderr
    check_object(s3client, bucket, "ckpt.bin", good, "the checkpoint dd failed to replace")
    released(tiny_cache)
    assert not entries(tiny_cache, "recovery"), entries(tiny_cache, "recovery")


def test_dd_and_a_shell_redirect_replace_a_stored_object_with_one_commit(
        mount, bucket, s3client, cache_dir, tmp_path):
    put(s3client, bucket, "a.bin", payload("old-a", 2 * MiB))
    put(s3client, bucket, "b.txt", payload("old-b", 3 * MiB))
    m = mount(bucket, "cache_dir=%s,part_size=5M,%s" % (cache_dir, FAST))
    src = tmp_path / "src.bin"
    want = payload("new-a", 7 * MiB + 5)
    src.write_bytes(want)
    before = writes(m)
    subprocess.run(["dd", "if=%s" % src, "of=%s" % m.join("a.bin"), "bs=256k", "status=none"],
                   check=True)
    check_object(s3client, bucket, "a.bin", want, "dd's output")
    subprocess.run("cat %s > %s" % (src, m.join("b.txt")), shell=True, check=True)
    check_object(s3client, bucket, "b.txt", want, "a shell redirect's output")
    after = writes(m)
    assert after["commits"] - before["commits"] == 2, (before, after)
    assert after["flushes_deferred"] - before["flushes_deferred"] >= 2, (before, after)


def test_an_emptying_redirect_shows_at_once_and_is_stored_at_the_last_close(
        mount, bucket, s3client, cache_dir):
    put(s3client, bucket, "e.txt", b"some old contents\n")
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    subprocess.run(": > %s" % m.join("e.txt"), shell=True, check=True)
    assert os.stat(m.join("e.txt")).st_size == 0
    with open(m.join("e.txt"), "rb") as f:
        assert f.read() == b""
    # the kernel sends RELEASE just after close() returns: the commit follows
    assert wait_for(lambda: s3client.head_object(Bucket=bucket, Key="e.txt")["ContentLength"] == 0,
                    10)
    released(cache_dir)


# -- children holding a descriptor ---------------------------------------------------------
def test_a_child_exit_stores_nothing_torn_and_a_later_failed_write_sticks(
        mount, bucket, s3client, cache_dir):
    old = payload("c-old", 1400 * 1000)
    put(s3client, bucket, "c.bin", old)
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    fd = os.open(m.join("c.bin"), os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, payload("c-new", 700 * 1000))
        subprocess.run(["true"], pass_fds=[fd], check=True)  # the child's exit is a FLUSH
        subprocess.run(["sh", "-c", "exit 0"], pass_fds=[fd], check=True)
        check_object(s3client, bucket, "c.bin", old, "after the children's exits")
        with pytest.raises(OSError) as ei:
            os.pwrite(fd, b"x", 6 * TIB)
        assert ei.value.errno == errno.EFBIG
        with pytest.raises(OSError) as ei:
            os.fsync(fd)
        assert ei.value.errno == errno.EFBIG, ei.value
    finally:
        with pytest.raises(OSError) as ei:
            os.close(fd)
    assert ei.value.errno == errno.EFBIG, "close() raised %r, want EFBIG" % ei.value
    check_object(s3client, bucket, "c.bin", old, "after the failed write")
    released(cache_dir)


def test_an_error_sticks_whatever_was_committed_before(mount, bucket, s3client, cache_dir):
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    first = payload("s1", 300 * 1000)
    fd = os.open(m.join("s.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = None
    try:
        os.write(fd, first)
        os.fsync(fd)
        check_object(s3client, bucket, "s.bin", first, "after fsync")
        with pytest.raises(OSError) as ei:
            os.ftruncate(fd, 6 * TIB)
        assert ei.value.errno == errno.EFBIG
        os.write(fd, b"more")
        fd2 = os.dup(fd)
        for call in (os.fsync, os.fdatasync):
            with pytest.raises(OSError) as ei:
                call(fd)
            assert ei.value.errno == errno.EFBIG, (call, ei.value)
        with pytest.raises(OSError) as ei:
            os.close(fd2)  # a duplicate's close reports it too
        fd2 = None
        assert ei.value.errno == errno.EFBIG
    finally:
        if fd2 is not None:
            try:
                os.close(fd2)
            except OSError:
                pass
        with pytest.raises(OSError) as ei:
            os.close(fd)
    assert ei.value.errno == errno.EFBIG
    check_object(s3client, bucket, "s.bin", first, "what the fsync stored")


def test_a_failed_write_shows_the_stored_size_at_once(mount, bucket, s3client, cache_dir):
    """ftruncate to a smaller size, then a write that fails: nothing of the
    writer will be stored, so stat (a LOOKUP, a GETATTR, the next open)
    shows the stored object while a descriptor still holds the writer.
    omfsx -P saw the truncated size after close and reopen when the
    RELEASE came late (the open's LOOKUP found the failed writer)."""
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    first = payload("f1", 700 * 1000)
    fd = os.open(m.join("f.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    held = None
    try:
        os.write(fd, first)
        os.fsync(fd)
        os.ftruncate(fd, 1000)
        assert os.stat(m.join("f.bin")).st_size == 1000
        held = os.dup(fd)  # keeps the writer open past the close below
        with pytest.raises(OSError) as ei:
            os.pwrite(fd, b"x", 6 * TIB)
        assert ei.value.errno == errno.EFBIG
        with pytest.raises(OSError):
            os.close(fd)
        fd = None
        assert os.stat(m.join("f.bin")).st_size == len(first)
        fd = os.open(m.join("f.bin"), os.O_RDWR)
        assert os.fstat(fd).st_size == len(first)
        assert os.pread(fd, len(first) + 1, 0) == first
    finally:
        for d in (fd, held):
            if d is not None:
                try:
                    os.close(d)
                except OSError:
                    pass
    check_object(s3client, bucket, "f.bin", first, "what the fsync stored")


def test_five_steps_of_a_redirected_script_upload_the_file_once(
        mount, bucket, s3client, cache_dir, tmp_path):
    m = mount(bucket, "cache_dir=%s,part_size=5M,%s" % (cache_dir, FAST))
    steps = [payload("step%d" % i, 4 * MiB) for i in range(5)]
    for i, s in enumerate(steps):
        (tmp_path / ("s%d" % i)).write_bytes(s)
    before = writes(m)
    script = "for i in 0 1 2 3 4; do cat %s/s$i; done" % tmp_path
    with open(m.join("log.bin"), "wb") as out:
        subprocess.run(["bash", "-c", script], stdout=out, check=True)
    want = b"".join(steps)
    check_object(s3client, bucket, "log.bin", want, "the script's output")
    after = writes(m)
    uploaded = after["uploaded_bytes"] - before["uploaded_bytes"]
    assert uploaded <= 1.5 * len(want), "uploaded %d bytes for %d" % (uploaded, len(want))
    assert after["flushes_deferred"] - before["flushes_deferred"] >= 5, (before, after)


# -- S3's object size limit ----------------------------------------------------------------
def test_writes_past_5_tib_fail_at_once(mount, bucket, s3client, cache_dir):
    put(s3client, bucket, "t.bin", b"small")
    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, FAST))
    before = writes(m)
    with pytest.raises(OSError) as ei:
        os.truncate(m.join("t.bin"), 5 * TIB + 1)
    assert ei.value.errno == errno.EFBIG
    fd = os.open(m.join("u.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with pytest.raises(OSError) as ei:
            os.pwrite(fd, b"x" * 4096, 6 * TIB)
        assert ei.value.errno == errno.EFBIG
    finally:
        with pytest.raises(OSError):
            os.close(fd)
    check_object(s3client, bucket, "t.bin", b"small")
    released(cache_dir)
    after = writes(m)
    assert after["uploaded_bytes"] - before["uploaded_bytes"] < MiB, (before, after)


# -- re-commits send what changed ---------------------------------------------------------
def md5(data):
    return hashlib.md5(data).hexdigest()


def test_appending_to_a_large_object_uploads_the_change_only(mount, bucket, s3client, s3server,
                                                            cache_dir):
    if not s3server.part_copy:
        pytest.skip("%s copies no parts (AIStore answers UploadPartCopy with 501): "
                    "test_appending_where_no_part_is_copied_uploads_it_whole" % s3server.kind)
    base = payload("log", 64 * MiB)
    put(s3client, bucket, "big.log", base)
    m = mount(bucket, "cache_dir=%s,part_size=8M,%s" % (cache_dir, FAST))
    before = writes(m)
    with open(m.join("big.log"), "ab") as f:
        f.write(b"one more line\n")
    want = base + b"one more line\n"
    check_object(s3client, bucket, "big.log", want, "after the first append")
    mid = writes(m)
    assert mid["uploaded_bytes"] - before["uploaded_bytes"] < 10 * MiB, (before, mid)
    assert mid["copied_bytes"] - before["copied_bytes"] >= 48 * MiB, (before, mid)
    # a second commit of the same open file after a completed upload
    with open(m.join("big.log"), "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(b"a second line\n")
        f.flush()
        os.fsync(f.fileno())
        f.seek(9 * MiB)
        f.write(b"XX")
    want = want + b"a second line\n"
    want = want[:9 * MiB] + b"XX" + want[9 * MiB + 2:]
    check_object(s3client, bucket, "big.log", want, "after a second commit")
    after = writes(m)
    assert after["uploaded_bytes"] - mid["uploaded_bytes"] < 20 * MiB, (mid, after)
    assert not after["part_copy_unsupported"], after


def test_appending_where_no_part_is_copied_uploads_it_whole(mount, bucket, s3client, s3server,
                                                           cache_dir):
    if s3server.part_copy:
        pytest.skip("%s copies parts: test_appending_to_a_large_object_uploads_the_change_only"
                    % s3server.kind)
    base = payload("log", 24 * MiB)
    put(s3client, bucket, "big.log", base)
    m = mount(bucket, "cache_dir=%s,part_size=8M,%s" % (cache_dir, FAST))
    before = writes(m)
    with open(m.join("big.log"), "ab") as f:
        f.write(b"one more line\n")
    check_object(s3client, bucket, "big.log", base + b"one more line\n", "after the append")
    after = writes(m)
    # every byte went again, and the stats say why
    assert after["uploaded_bytes"] - before["uploaded_bytes"] == len(base) + 14, (before, after)
    assert after["copied_bytes"] == before["copied_bytes"], after
    assert after["part_copy_unsupported"], after
