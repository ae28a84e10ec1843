"""A file and a directory of one name, on every server.

Servers that keep objects as files (versitygw, MinIO, AIStore when one
target holds both names) cannot hold an object `a` and an object `a/b` at
once: they answer 409 (ObjectParentIsFile, ExistingObjectIsDirectory,
AIStore's ErrMv). Swift keeps both; a listing then shows the directory
(a directory wins over a file of the same name).

The mount here trusts its listing for an hour, so it does not know of the
object another client stores meanwhile: the conflict reaches the server.
What a program sees: ENOTDIR for a file created under a name that is a
file, EEXIST for a file or directory created where a directory is; the
object already there is untouched, nothing is left half-written (no
object under the refused name, no upload left open), the refused bytes are
kept in recovery, and the mount shows the server's truth afterwards. On a
server that holds both, both objects are intact.
"""

import errno
import os

import pytest

from harness import admin
from harness.mount import check_object, payload, wait_for
from harness.recovery import recovery_entries

TRUST = "entry_timeout=3600,attr_timeout=3600,negative_timeout=3600,upload_retry_delay=0.05"


def names(s3server, bucket):
    """A name and a name under it that the server cannot hold at once, if
    it refuses any: on AIStore, two that one target holds (its HRW
    placement; on two targets ErrMv needs both on one)."""
    if not s3server.kind.startswith("ais"):
        return "a", "a/b"
    for i in range(64):
        a = "a%d" % i
        if s3server.target_port(bucket, a) == s3server.target_port(bucket, a + "/b"):
            return a, a + "/b"
    pytest.fail("no name of 64 shares a target with its child")


def keys(s3client, bucket):
    return sorted(o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", []))


def no_upload_left(s3client, bucket):
    if s3client.meta.endpoint_url.endswith("/s3"):
        return  # AIStore lists no multipart uploads (ListMultipartUploads: 501)
    ups = s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert not ups, ups


def trusting_mount(mount, bucket, cache_dir):
    m = mount(bucket, "%s,cache_dir=%s" % (TRUST, cache_dir))
    assert os.listdir(m.path) == []  # listed: empty, trusted for an hour
    return m


def write_file(path, data):
    """Create, write and close path; the OSError of whichever step fails."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def test_a_file_created_under_a_file_name(mount, bucket, s3client, s3server, cache_dir):
    a, ab = names(s3server, bucket)
    m = trusting_mount(mount, bucket, cache_dir)
    s3client.put_object(Bucket=bucket, Key=a, Body=b"the file a")
    data = payload("under", 100_000)
    try:
        os.mkdir(m.join(a))  # a marker "a/" beside the file a, or a local directory
        write_file(m.join(ab), data)
    except OSError as e:
        assert s3server.file_dir_conflict, "%s holds both, yet %s" % (s3server.kind, e)
        # mkdir refused by the marker's PUT (EEXIST), or the file's commit (ENOTDIR)
        assert e.errno in (errno.EEXIST, errno.ENOTDIR), e
        if e.errno == errno.ENOTDIR:
            # the refused bytes are kept, named by their key
            rec = recovery_entries(cache_dir)
            assert [side["key"] for _, side in rec] == [ab], rec
        assert keys(s3client, bucket) == [a]
    else:
        assert not s3server.file_dir_conflict, \
            "%s refuses a/b beside a, yet the mount stored it" % s3server.kind
        assert sorted(keys(s3client, bucket)) in ([a, ab], [a, a + "/", ab])
        check_object(s3client, bucket, ab, data)
    check_object(s3client, bucket, a, b"the file a")
    no_upload_left(s3client, bucket)


def test_a_file_created_where_a_directory_is(mount, bucket, s3client, s3server, cache_dir):
    a, ab = names(s3server, bucket)
    m = trusting_mount(mount, bucket, cache_dir)
    s3client.put_object(Bucket=bucket, Key=ab, Body=b"the file a/b")
    data = payload("over", 100_000)
    try:
        write_file(m.join(a), data)
    except OSError as e:
        assert s3server.file_dir_conflict, "%s holds both, yet %s" % (s3server.kind, e)
        assert e.errno == errno.EEXIST, e
        rec = recovery_entries(cache_dir)
        assert [side["key"] for _, side in rec] == [a], rec
        assert keys(s3client, bucket) == [ab]
        # the mount shows the server's truth now: a is the directory
        assert wait_for(lambda: os.path.isdir(m.join(a)), 5)
        assert os.listdir(m.join(a)) == ["b"]
    else:
        assert not s3server.file_dir_conflict, \
            "%s refuses a beside a/b, yet the mount stored it" % s3server.kind
        check_object(s3client, bucket, a, data)
    check_object(s3client, bucket, ab, b"the file a/b")
    no_upload_left(s3client, bucket)


def test_a_large_file_created_where_a_directory_is(mount, bucket, s3client, s3server, cache_dir):
    """The same through a multipart upload: the refusal comes at its
    completion (versitygw) or its first part (AIStore), and no upload is
    left open."""
    a, ab = names(s3server, bucket)
    m = trusting_mount(mount, bucket, cache_dir)
    s3client.put_object(Bucket=bucket, Key=ab, Body=b"the file a/b")
    data = payload("over-mp", 12 * 1024 * 1024)
    try:
        write_file(m.join(a), data)
    except OSError as e:
        assert s3server.file_dir_conflict, "%s holds both, yet %s" % (s3server.kind, e)
        assert e.errno == errno.EEXIST, e
        assert keys(s3client, bucket) == [ab]
        assert admin.stats_json(m.path)["writes"]["commit_failures"] >= 1
    else:
        assert not s3server.file_dir_conflict
        check_object(s3client, bucket, a, data)
    check_object(s3client, bucket, ab, b"the file a/b")
    no_upload_left(s3client, bucket)


def test_a_directory_made_where_a_file_is(mount, bucket, s3client, cache_dir):
    """mkdir -p a/b where another client stored the file a/b: the mount
    looks b up in a directory it has not listed, finds the file, and mkdir
    says EEXIST (on every server: no request can clash here)."""
    m = trusting_mount(mount, bucket, cache_dir)
    s3client.put_object(Bucket=bucket, Key="a/b", Body=b"the file a/b")
    with pytest.raises(FileExistsError):
        os.makedirs(m.join("a", "b"))
    assert os.path.isfile(m.join("a", "b"))
    assert keys(s3client, bucket) in (["a/b"], ["a/", "a/b"])
    check_object(s3client, bucket, "a/b", b"the file a/b")
