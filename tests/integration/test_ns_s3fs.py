"""objmount and s3fs-fuse read each other's files, directories and links.

The same bucket is mounted with objmount and with s3fs-fuse (Debian's
s3fs, path-style requests against the test server), one after the other:
what one writes (bytes, chmod, chown, mtimes, mkdir modes, empty
directories, symlinks, metadata set while a file is open) the other shows
the same way. Stats by name come before any listing, and every check runs on
a fresh mount of the reading side."""

import os
import shutil
import stat
import subprocess

import pytest

from harness.admin import S3fs
from harness.mount import check_bytes, payload, read_all

MTIME = 1500000000
pytestmark = pytest.mark.skipif(shutil.which("s3fs") is None, reason="s3fs-fuse not installed")


def st4(path):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def check_entries(root, want, what):
    """want: {relpath: (type, mode, uid, gid, mtime or None)}; stat by name."""
    bad = []
    for rel, (t, mode, uid, gid, mtime) in want.items():
        st = os.lstat(os.path.join(root, rel))
        got = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
               int(st.st_mtime) if mtime is not None else None)
        if got != (t, mode, uid, gid, mtime):
            bad.append("%s: type %o mode %o uid %d gid %d mtime %s, want type %o mode %o uid %d "
                       "gid %d mtime %s" % ((rel,) + got + (t, mode, uid, gid, mtime)))
    assert not bad, "%s:\n  %s" % (what, "\n  ".join(bad))


def test_objmount_writes_s3fs_reads(rw_mount, bucket, s3server):
    data, plain, opened = payload("om-f", 300000), payload("om-p", 1000), payload("om-o", 5000)
    m = rw_mount(bucket)
    os.mkdir(m.join("d"), 0o750)
    with open(m.join("d", "f"), "wb") as f:
        f.write(data)
    os.chmod(m.join("d", "f"), 0o640)
    os.chown(m.join("d", "f"), 1234, 5678)
    os.utime(m.join("d", "f"), (MTIME, MTIME))
    with open(m.join("p"), "wb") as f:
        f.write(plain)
    os.mkdir(m.join("e"), 0o700)
    os.symlink("d/f", m.join("l"))
    fd = os.open(m.join("o"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, opened)
        os.fchmod(fd, 0o600)
        os.fchown(fd, 42, 43)
        os.utime(fd, (MTIME + 7, MTIME + 7))
    finally:
        os.close(fd)
    m.unmount()

    uid, gid = os.getuid(), os.getgid()
    with S3fs(bucket, s3server.endpoint) as s:
        check_entries(s.path, {
            "d": (stat.S_IFDIR, 0o750, uid, gid, None),
            "d/f": (stat.S_IFREG, 0o640, 1234, 5678, MTIME),
            "p": (stat.S_IFREG, 0o644, uid, gid, None),
            "e": (stat.S_IFDIR, 0o700, uid, gid, None),
            "l": (stat.S_IFLNK, 0o777, uid, gid, None),
            "o": (stat.S_IFREG, 0o600, 42, 43, MTIME + 7),
        }, "objmount's files seen through s3fs")
        assert os.readlink(s.join("l")) == "d/f"
        check_bytes(read_all(s.join("l")), data, "d/f through the link, via s3fs")
        check_bytes(read_all(s.join("p")), plain, "p via s3fs")
        check_bytes(read_all(s.join("o")), opened, "o via s3fs")
        assert os.listdir(s.join("e")) == []
        assert sorted(os.listdir(s.path)) == ["d", "e", "l", "o", "p"]


def test_s3fs_writes_objmount_reads(rw_mount, bucket, s3server):
    data, top = payload("s3fs-f", 200000), payload("s3fs-top", 777)
    with S3fs(bucket, s3server.endpoint) as s:
        os.mkdir(s.join("sd"), 0o705)
        with open(s.join("sd", "f"), "wb") as f:
            f.write(data)
        subprocess.run(["chmod", "604", s.join("sd", "f")], check=True)
        subprocess.run(["chown", "4321:8765", s.join("sd", "f")], check=True)
        subprocess.run(["touch", "-d", "@%d" % MTIME, s.join("sd", "f")], check=True)
        subprocess.run(["ln", "-s", "sd/f", s.join("sl")], check=True)
        os.mkdir(s.join("sd", "empty"), 0o711)
        with open(s.join("top"), "wb") as f:
            f.write(top)
        subprocess.run(["touch", "-d", "@%d" % (MTIME + 1), s.join("top")], check=True)

    uid, gid = os.getuid(), os.getgid()
    m = rw_mount(bucket)
    check_entries(m.path, {
        "sd": (stat.S_IFDIR, 0o705, uid, gid, None),
        "sd/f": (stat.S_IFREG, 0o604, 4321, 8765, MTIME),
        "sd/empty": (stat.S_IFDIR, 0o711, uid, gid, None),
        "sl": (stat.S_IFLNK, 0o777, uid, gid, None),
        "top": (stat.S_IFREG, 0o644, uid, gid, MTIME + 1),
    }, "s3fs's files seen through objmount (fresh mount, stat by name)")
    assert os.readlink(m.join("sl")) == "sd/f"
    check_bytes(read_all(m.join("sl")), data, "sd/f through the link, via objmount")
    check_bytes(read_all(m.join("top")), top, "top via objmount")
    assert os.listdir(m.join("sd", "empty")) == []
    assert sorted(os.listdir(m.path)) == ["sd", "sl", "top"]
    assert sorted(os.listdir(m.join("sd"))) == ["empty", "f"]


def test_metadata_changed_by_one_is_seen_by_the_other(rw_mount, bucket, s3server):
    """chmod/chown/touch through objmount on a file s3fs wrote, and back."""
    with S3fs(bucket, s3server.endpoint) as s:
        with open(s.join("x"), "wb") as f:
            f.write(b"x" * 100)
    m = rw_mount(bucket)
    os.chmod(m.join("x"), 0o611)
    os.chown(m.join("x"), 7, 8)
    os.utime(m.join("x"), (MTIME, MTIME))
    m.unmount()
    with S3fs(bucket, s3server.endpoint) as s:
        check_entries(s.path, {"x": (stat.S_IFREG, 0o611, 7, 8, MTIME)}, "via s3fs")
        subprocess.run(["chmod", "640", s.join("x")], check=True)
        subprocess.run(["touch", "-d", "@%d" % (MTIME + 60), s.join("x")], check=True)
    m = rw_mount(bucket)
    check_entries(m.path, {"x": (stat.S_IFREG, 0o640, 7, 8, MTIME + 60)}, "via objmount again")
    assert read_all(m.join("x")) == b"x" * 100
