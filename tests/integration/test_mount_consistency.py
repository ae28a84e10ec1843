"""Objects deleted or replaced behind the mount (with boto3).

While a file is open, reads give the old bytes or fail (EIO, ENOENT, ESTALE)
but never mix versions, never come back short and never crash the daemon.
A file opened after the change gives the whole old object, the whole new one,
or an error. Once the TTLs pass, the change is visible."""

import errno
import os
import time

import pytest

from harness.mount import MiB, check_bytes, payload, read_all

ERRNOS = (errno.EIO, errno.ENOENT, errno.ESTALE)
SIZE = 12 * MiB + 5  # larger than part_size=5M and the small-object threshold


def read_rest(fd, want, start, chunk=MiB):
    """Read fd from start to EOF; every chunk must equal want at its offset.
    Returns ("ok", n) after a clean EOF exactly at len(want), or
    ("error", errno). A clean EOF elsewhere is short data (AssertionError)."""
    pos = start
    while True:
        try:
            b = os.pread(fd, chunk, pos)
        except OSError as e:
            assert e.errno in ERRNOS, "unexpected error %r at offset %d" % (e, pos)
            return "error", e.errno
        if not b:
            assert pos == len(want), "clean EOF at %d of %d bytes: short data" % (pos, len(want))
            return "ok", pos
        check_bytes(b, want[pos:pos + len(b)], "read at offset %d after the change" % pos)
        pos += len(b)


def seed_one(s3client, bucket, key, size, tag):
    data = payload("%s/%s" % (key, tag), size)
    s3client.put_object(Bucket=bucket, Key=key, Body=data)
    return data


PROBE = payload("probe", 4321)


@pytest.fixture
def bucket(bucket, s3client):
    """The test's bucket with dir/probe, an object no test changes."""
    s3client.put_object(Bucket=bucket, Key="dir/probe", Body=PROBE)
    return bucket


def daemon_still_answers(m, s3client, bucket):
    m.check_alive()
    check_bytes(read_all(m.join("dir/probe")), PROBE, "an unchanged object after the change")
    os.listdir(m.path)


@pytest.mark.parametrize("new_size", [SIZE, MiB + 1, SIZE + 3 * MiB],
                         ids=["same-size", "shorter", "longer"])
def test_replaced_while_open_never_mixes_versions(mount, bucket, s3client, new_size):
    old = seed_one(s3client, bucket, "obj", SIZE, "old")
    m = mount(bucket, "part_size=5M")
    fd = os.open(m.join("obj"), os.O_RDONLY)
    try:
        check_bytes(os.pread(fd, 65536, 0), old[:65536], "first read")
        new = seed_one(s3client, bucket, "obj", new_size, "new")
        assert new[:4096] != old[:4096]
        outcome = read_rest(fd, old, 65536)
        # a second pass over the same open file: still the old bytes or an error
        read_rest(fd, old, 0)
    finally:
        os.close(fd)
    daemon_still_answers(m, s3client, bucket)
    # a new open sees a whole version, never a blend
    got = _whole_or_error(m.join("obj"))
    assert got is None or got in (old, new), _describe(got, old, new)
    assert outcome[0] in ("ok", "error")


@pytest.mark.parametrize("size", [110000, SIZE], ids=["small", "large"])
def test_deleted_while_open_gives_old_bytes_or_error(mount, bucket, s3client, size):
    old = seed_one(s3client, bucket, "obj", size, "old")
    m = mount(bucket, "part_size=5M")
    fd = os.open(m.join("obj"), os.O_RDONLY)
    try:
        check_bytes(os.pread(fd, 4096, 0), old[:4096], "first read")
        s3client.delete_object(Bucket=bucket, Key="obj")
        read_rest(fd, old, 4096)
        read_rest(fd, old, 0)
    finally:
        os.close(fd)
    daemon_still_answers(m, s3client, bucket)


def _whole_or_error(path):
    try:
        return read_all(path)
    except OSError as e:
        assert e.errno in ERRNOS, "unexpected error %r" % e
        return None


def _describe(got, old, new):
    if got is None:
        return "error"
    return "got %d bytes matching neither the old (%d) nor the new (%d) object; " \
           "prefix of old: %s, prefix of new: %s" % (
               len(got), len(old), len(new), old.startswith(got[:65536]),
               new.startswith(got[:65536]))


@pytest.mark.parametrize("new_size", [200000, SIZE + MiB, 3000], ids=["small", "large", "tiny"])
def test_replaced_after_attributes_cached_gives_a_whole_version(mount, bucket, s3client,
                                                                new_size):
    old = seed_one(s3client, bucket, "obj", SIZE, "old")
    m = mount(bucket, "part_size=5M")
    assert os.stat(m.join("obj")).st_size == SIZE  # attributes (size, ETag) now cached
    os.listdir(m.path)
    new = seed_one(s3client, bucket, "obj", new_size, "new")
    got = _whole_or_error(m.join("obj"))
    assert got is None or got in (old, new), _describe(got, old, new)
    daemon_still_answers(m, s3client, bucket)


def test_deleted_after_attributes_cached_gives_old_bytes_or_error(mount, bucket, s3client):
    old = seed_one(s3client, bucket, "obj", SIZE, "old")
    small = seed_one(s3client, bucket, "small", 5000, "old")
    m = mount(bucket, "part_size=5M")
    os.listdir(m.path)
    os.stat(m.join("obj"))
    os.stat(m.join("small"))
    s3client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "obj"}, {"Key": "small"}]})
    for name, want in (("obj", old), ("small", small)):
        try:
            got = read_all(m.join(name))
        except OSError as e:
            assert e.errno in ERRNOS, "unexpected error %r" % e
        else:
            check_bytes(got, want, name + " read after delete")
    daemon_still_answers(m, s3client, bucket)


def test_changes_are_visible_once_ttls_pass(mount, bucket, s3client):
    old = seed_one(s3client, bucket, "obj", 5000, "old")
    m = mount(bucket, "attr_timeout=1,entry_timeout=1,negative_timeout=1")
    assert os.stat(m.join("obj")).st_size == 5000
    check_bytes(read_all(m.join("obj")), old, "before")
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("later"))
    assert sorted(os.listdir(m.path)) == ["dir", "obj"]
    new = seed_one(s3client, bucket, "obj", 7000, "new")
    later = seed_one(s3client, bucket, "later", 100, "new")
    time.sleep(1.6)
    assert os.stat(m.join("obj")).st_size == 7000, "replacement not seen after attr_timeout"
    check_bytes(read_all(m.join("obj")), new, "after replacement")
    assert os.stat(m.join("later")).st_size == 100, "new key not seen after negative_timeout"
    check_bytes(read_all(m.join("later")), later, "new key")
    assert sorted(os.listdir(m.path)) == ["dir", "later", "obj"], "listing not refreshed"
    s3client.delete_object(Bucket=bucket, Key="obj")
    time.sleep(1.6)
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("obj"))
    assert sorted(os.listdir(m.path)) == ["dir", "later"]
    m.check_alive()


def test_same_size_replacement_is_read_fresh_after_ttl(mount, bucket, s3client):
    old = seed_one(s3client, bucket, "obj", 3 * MiB, "old")
    m = mount(bucket, "attr_timeout=1,entry_timeout=1,negative_timeout=1")
    check_bytes(read_all(m.join("obj")), old, "before")  # now in the page cache
    check_bytes(read_all(m.join("obj")), old, "before, reopened")
    new = seed_one(s3client, bucket, "obj", 3 * MiB, "new")
    time.sleep(1.6)
    assert os.stat(m.join("obj")).st_size == 3 * MiB
    check_bytes(read_all(m.join("obj")), new, "same-size replacement after the TTL "
                "(a stale page cache gives the old bytes)")


def test_training_profile_keeps_metadata_for_the_mount(mount, bucket, s3client):
    old = seed_one(s3client, bucket, "obj", 5000, "old")
    m = mount(bucket, "profile=training")
    assert sorted(os.listdir(m.path)) == ["dir", "obj"]
    assert os.stat(m.join("obj")).st_size == 5000
    check_bytes(read_all(m.join("obj")), old, "before")
    seed_one(s3client, bucket, "other", 10, "new")
    # the data set is declared immutable: the listing and attributes are kept
    assert sorted(os.listdir(m.path)) == ["dir", "obj"]
    assert os.stat(m.join("obj")).st_size == 5000
    check_bytes(read_all(m.join("obj")), old, "again")
