"""File metadata, symbolic links, hard links and extended attributes.

chmod, chown and utimens are stored as x-amz-meta-mode/-uid/-gid/-mtime
(s3fs-fuse names; mode in decimal with the file type bits): on a closed file
by a self-copy that moves no data, on a directory on its "dir/" marker. The
stat of one name HEADs the object so its mode and owner show, also after the
directory was listed with metadata=head (metadata=lookup, the default, takes
files' attributes from listings until attr_timeout). Symbolic links are stored
as s3fs-fuse stores them: an object holding the target, with
x-amz-meta-mode S_IFLNK|0777. Hard links are refused with ENOTSUP. Read-only
extended attributes name the object: user.objmount.etag, .key and
.content_type; setting one is ENOTSUP."""

import errno
import os
import stat
import subprocess
import time

import pytest

from harness.mount import check_object, payload, seed
from harness.trees import exists, keys

MTIME = 1500000000
S_IFLNK_0777 = str(stat.S_IFLNK | 0o777)


def expect_errno(err, fn, *args, **kw):
    with pytest.raises(OSError) as ei:
        fn(*args, **kw)
    assert ei.value.errno == err, "%s%r: %s, want %s" % (
        getattr(fn, "__name__", fn), args, errno.errorcode.get(ei.value.errno, ei.value.errno),
        errno.errorcode[err])


def head(s3client, bucket, key):
    return s3client.head_object(Bucket=bucket, Key=key)


def meta_of(s3client, bucket, key):
    return head(s3client, bucket, key)["Metadata"]


def put_with_meta(s3client, bucket, key, body, mode, uid=None, gid=None, mtime=None, **kw):
    md = {"mode": str(mode)}
    if uid is not None:
        md.update(uid=str(uid), gid=str(gid))
    if mtime is not None:
        md["mtime"] = str(mtime)
    s3client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=md, **kw)


# -- chmod / chown / utimens --------------------------------------------------------------
def test_metadata_change_of_a_closed_file_is_a_self_copy(rw_mount, bucket, s3client,
                                                          faultproxy):
    want = payload("selfcopy", 3 << 20)
    s3client.put_object(Bucket=bucket, Key="f.bin", Body=want)
    m = rw_mount(bucket, endpoint=faultproxy.endpoint)
    os.stat(m.join("f.bin"))
    faultproxy.reset_stats()
    os.chmod(m.join("f.bin"), 0o604)
    os.chown(m.join("f.bin"), 1234, 5678)
    os.utime(m.join("f.bin"), (MTIME, MTIME))
    kinds = faultproxy.stats()["requests"]["by_kind"]
    assert kinds.get("CopyObject", 0) >= 1, kinds
    assert not kinds.get("PutObject") and not kinds.get("UploadPart") and \
        not kinds.get("GetObject"), "data moved for a metadata change: %s" % kinds
    md = meta_of(s3client, bucket, "f.bin")
    assert md == {"mode": str(stat.S_IFREG | 0o604), "uid": "1234", "gid": "5678",
                  "mtime": str(MTIME)}, md
    check_object(s3client, bucket, "f.bin", want)


def test_directory_metadata_is_stored_on_its_marker(rw_mount, bucket, s3client):
    seed(s3client, bucket, {"implicit/x": b"x"})
    m = rw_mount(bucket)
    os.mkdir(m.join("d"), 0o755)
    for name in ("d", "implicit"):
        p = m.join(name)
        os.chmod(p, 0o710)
        os.chown(p, 1111, 2222)
        os.utime(p, (MTIME, MTIME))
        st = os.stat(p)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, int(st.st_mtime)) == \
            (0o710, 1111, 2222, MTIME), (name, oct(st.st_mode), st)
        h = head(s3client, bucket, name + "/")
        assert h["ContentLength"] == 0
        assert h["Metadata"] == {"mode": str(stat.S_IFDIR | 0o710), "uid": "1111",
                                 "gid": "2222", "mtime": str(MTIME)}, (name, h["Metadata"])
    assert keys(s3client, bucket) == ["d/", "implicit/", "implicit/x"]
    m.unmount()
    m2 = rw_mount(bucket)
    for name in ("d", "implicit"):
        st = os.stat(m2.join(name))
        assert stat.S_ISDIR(st.st_mode)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, int(st.st_mtime)) == \
            (0o710, 1111, 2222, MTIME), "after remount: %s %s %s" % (name, oct(st.st_mode), st)


def fresh_stat(path):
    st = os.lstat(path)
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
            int(st.st_mtime))


LISTED = {
    "dir/file": (stat.S_IFREG, 0o600, 1234, 5678),
    "dir/link": (stat.S_IFLNK, 0o777, 1234, 5678),
    "dir/sub": (stat.S_IFDIR, 0o700, 1234, 5678),
}


def seed_listed(s3client, bucket):
    put_with_meta(s3client, bucket, "dir/file", b"data", stat.S_IFREG | 0o600, 1234, 5678, MTIME)
    put_with_meta(s3client, bucket, "dir/link", b"file", stat.S_IFLNK | 0o777, 1234, 5678, MTIME)
    put_with_meta(s3client, bucket, "dir/sub/", b"", stat.S_IFDIR | 0o700, 1234, 5678, MTIME,
                  ContentType="application/x-directory")


@pytest.mark.parametrize("listing,metadata", [("none", ""), ("none", "metadata=head"),
                                              ("listdir", "metadata=head"),
                                              ("ls-l", "metadata=head")])
def test_stat_of_one_name_shows_its_stored_metadata(rw_mount, bucket, s3client, listing,
                                                    metadata):
    """The stat of a name not listed before shows the type, mode, owner and
    mtime stored on the object (a HEAD); with metadata=head also after its
    directory was listed."""
    seed_listed(s3client, bucket)
    m = rw_mount(bucket, metadata)
    if listing == "listdir":
        assert sorted(os.listdir(m.join("dir"))) == ["file", "link", "sub"]
    elif listing == "ls-l":
        subprocess.run(["ls", "-l", m.join("dir")], check=True, capture_output=True)
    assert_listed_metadata(m, "stat after listing=%s %s" % (listing, metadata))


def assert_listed_metadata(m, what, names=LISTED):
    got = {name: fresh_stat(m.join(name)) for name in names}
    want = {name: v + (MTIME,) for name, v in LISTED.items() if name in names}
    bad = ["%s: type %o mode %o uid %d gid %d mtime %d, want type %o mode %o uid %d gid %d "
           "mtime %d" % ((name,) + got[name] + want[name])
           for name in names if got[name] != want[name]]
    assert not bad, "%s:\n  %s" % (what, "\n  ".join(bad))
    assert os.readlink(m.join("dir/link")) == "file"


def test_ls_l_costs_no_head_per_file_and_metadata_shows_after_attr_timeout(
        rw_mount, bucket, s3client, faultproxy):
    """metadata=lookup (the default): ls -l takes attributes from the
    listing (no HEAD per name); stored metadata shows once attr_timeout
    expires."""
    seed_listed(s3client, bucket)
    for i in range(20):
        s3client.put_object(Bucket=bucket, Key="dir/plain%02d" % i, Body=b"x" * i)
    m = rw_mount(bucket, "attr_timeout=2,entry_timeout=2", endpoint=faultproxy.endpoint)
    os.stat(m.join("dir"))
    faultproxy.reset_stats()
    out = subprocess.run(["ls", "-l", m.join("dir")], check=True, capture_output=True,
                         text=True).stdout
    heads = faultproxy.stats()["requests"]["by_kind"].get("HeadObject", 0)
    assert len(out.splitlines()) == 24, out
    assert heads == 0, "ls -l of 22 files and a directory sent %d HEADs" % heads
    f = os.lstat(m.join("dir/file"))
    assert stat.S_ISREG(f.st_mode) and f.st_size == 4
    time.sleep(2.5)
    assert_listed_metadata(m, "after attr_timeout")


def test_a_file_replaced_by_a_symlink_gets_a_new_inode(rw_mount, bucket, s3client):
    """Another client turns a regular file into a symlink. The kernel's inode
    for the name was a regular file: once the attributes expire it is
    retired (ESTALE, also to an open descriptor, which has no path to look
    up again) and every later walk of the name finds a new symlink inode,
    never the old one with the new type (EIO) or the link's body read as
    file data."""
    s3client.put_object(Bucket=bucket, Key="tc/target", Body=b"TARGET")
    s3client.put_object(Bucket=bucket, Key="tc/x", Body=b"plain")
    m = rw_mount(bucket, "attr_timeout=1,entry_timeout=60")
    p = m.join("tc/x")
    assert stat.S_ISREG(os.lstat(p).st_mode)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"plain"
        put_with_meta(s3client, bucket, "tc/x", b"target", stat.S_IFLNK | 0o777)
        time.sleep(1.5)
        try:
            st = os.fstat(fd)
            assert stat.S_ISREG(st.st_mode), oct(st.st_mode)
        except OSError as e:
            assert e.errno == errno.ESTALE, e
        for _ in range(3):
            st = os.lstat(p)
            assert stat.S_ISLNK(st.st_mode), oct(st.st_mode)
            assert os.readlink(p) == "target"
            with open(p, "rb") as f:
                assert f.read() == b"TARGET"
    finally:
        os.close(fd)


def test_find_type_l_finds_listed_symlinks_with_metadata_head(rw_mount, bucket, s3client):
    """With metadata=head a listing does not know which files are symlinks:
    readdir says DT_UNKNOWN for files, so find -type asks."""
    seed_listed(s3client, bucket)
    m = rw_mount(bucket, "metadata=head")
    for kind, want in (("l", ["dir/link"]), ("f", ["dir/file"]), ("d", ["dir", "dir/sub"])):
        out = subprocess.run(["find", m.join("dir"), "-type", kind], check=True,
                             capture_output=True, text=True).stdout
        got = sorted(os.path.relpath(x, m.path) for x in out.splitlines())
        assert got == want, (kind, got)


def test_metadata_listing_answers_without_object_metadata(rw_mount, bucket, s3client):
    """The documented trade: metadata=listing costs no HEAD and so does not
    see modes and owners stored on objects."""
    put_with_meta(s3client, bucket, "d/f", b"data", stat.S_IFREG | 0o600, 1234, 5678, MTIME)
    m = rw_mount(bucket, "metadata=listing")
    os.listdir(m.join("d"))
    st = os.stat(m.join("d/f"))
    assert stat.S_ISREG(st.st_mode) and st.st_size == 4
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == os.getuid(), oct(st.st_mode)


# -- symbolic links -------------------------------------------------------------------------
def test_symlink_is_stored_as_s3fs_does(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="data/target.bin", Body=b"target bytes")
    m = rw_mount(bucket)
    targets = {"rel": "data/target.bin", "abs": "/etc/hostname", "dangling": "no/such/file",
               "data/up": "../data/target.bin"}
    for name, target in targets.items():
        os.symlink(target, m.join(name))
    for name, target in targets.items():
        h = head(s3client, bucket, name)
        body = s3client.get_object(Bucket=bucket, Key=name)["Body"].read()
        assert body == target.encode(), (name, body)
        assert h["Metadata"].get("mode") == S_IFLNK_0777, (name, h["Metadata"])
        st = os.lstat(m.join(name))
        assert stat.S_ISLNK(st.st_mode) and st.st_size == len(target), (name, oct(st.st_mode))
        assert os.readlink(m.join(name)) == target
    assert open(m.join("rel"), "rb").read() == b"target bytes"
    assert open(m.join("data", "up"), "rb").read() == b"target bytes"
    expect_errno(errno.ENOENT, os.stat, m.join("dangling"))
    expect_errno(errno.EEXIST, os.symlink, "x", m.join("rel"))
    m.unmount()
    m2 = rw_mount(bucket)
    for name, target in targets.items():  # lstat before any listing
        assert stat.S_ISLNK(os.lstat(m2.join(name)).st_mode), name
        assert os.readlink(m2.join(name)) == target
    os.unlink(m2.join("rel"))
    assert not exists(s3client, bucket, "rel")
    assert exists(s3client, bucket, "data/target.bin"), "unlink of a link removed its target"


def test_symlink_written_like_s3fs_reads_back(rw_mount, bucket, s3client):
    put_with_meta(s3client, bucket, "l", b"some/where", stat.S_IFLNK | 0o777, 0, 0, MTIME)
    m = rw_mount(bucket)
    assert os.readlink(m.join("l")) == "some/where"
    st = os.lstat(m.join("l"))
    assert stat.S_ISLNK(st.st_mode) and int(st.st_mtime) == MTIME


def test_rename_of_a_symlink_moves_the_link(rw_mount, bucket, s3client):
    m = rw_mount(bucket)
    os.symlink("t", m.join("a"))
    os.rename(m.join("a"), m.join("b"))
    assert os.readlink(m.join("b")) == "t"
    assert meta_of(s3client, bucket, "b").get("mode") == S_IFLNK_0777
    assert keys(s3client, bucket) == ["b"]


def test_hard_link_is_enotsup(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="f", Body=b"x")
    m = rw_mount(bucket)
    expect_errno(errno.ENOTSUP, os.link, m.join("f"), m.join("g"))
    assert keys(s3client, bucket) == ["f"]
    r = subprocess.run(["ln", m.join("f"), m.join("h")], capture_output=True, text=True)
    assert r.returncode != 0 and "not supported" in r.stderr, r.stderr


# -- extended attributes ---------------------------------------------------------------------
XATTRS = ["user.objmount.content_type", "user.objmount.etag", "user.objmount.key"]


def test_xattrs_name_the_object(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="pre/img.jpg", Body=b"\xff\xd8jpeg",
                        ContentType="image/jpeg")
    m = rw_mount(bucket)
    p = m.join("pre", "img.jpg")
    h = head(s3client, bucket, "pre/img.jpg")
    assert sorted(os.listxattr(p)) == XATTRS
    assert os.getxattr(p, "user.objmount.etag").decode() == h["ETag"].strip('"')
    assert os.getxattr(p, "user.objmount.key") == b"pre/img.jpg"
    assert os.getxattr(p, "user.objmount.content_type") == b"image/jpeg"
    expect_errno(errno.ENODATA, os.getxattr, p, "user.objmount.nothing")
    expect_errno(errno.ENOTSUP, os.setxattr, p, "user.objmount.etag", b"x")
    expect_errno(errno.ENOTSUP, os.setxattr, p, "user.mine", b"x")
    assert meta_of(s3client, bucket, "pre/img.jpg") == {}
    # a write changes the ETag the attribute shows
    with open(p, "wb") as f:
        f.write(b"new")
    etag = head(s3client, bucket, "pre/img.jpg")["ETag"].strip('"')
    assert os.getxattr(p, "user.objmount.etag").decode() == etag


def test_xattrs_under_a_prefix_mount_and_of_symlinks(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="top/sub/f", Body=b"f")
    m = rw_mount(bucket, prefix="top/")
    assert os.getxattr(m.join("sub", "f"), "user.objmount.key") == b"top/sub/f"
    os.symlink("sub/f", m.join("l"))
    # through the link: the target's object (the kernel itself answers user.*
    # reads on the link with ENODATA: user xattrs are for files and directories)
    assert os.getxattr(m.join("l"), "user.objmount.key") == b"top/sub/f"
    assert sorted(os.listxattr(m.join("l"))) == XATTRS
