"""Everyday tools write trees into the mount and they round-trip.

rsync -a, cp -a, tar x, mv (into, inside and out of the mount) and git
(init, add, commit, fsck, clone) run unmodified. Each copied tree is compared
with its source: `diff -r --no-dereference` at once, then, after a remount,
the stat of every path (type, mode, owner, mtime and MD5 of files, target of
links, mode of directories) and the listing. A test tree has nested and
empty directories, an empty file, a multipart-sized file, odd modes, a file
owned by another uid/gid, past mtimes and relative symlinks."""

import os
import shutil
import subprocess
import time

import pytest

from harness import admin, trees
from harness.mount import MiB, payload

T0 = 1400000000
FILE_FIELDS = ("type", "mode", "uid", "gid", "mtime", "size", "md5", "target")


def make_tree(root):
    os.makedirs(os.path.join(root, "sub", "deeper"))
    os.makedirs(os.path.join(root, "emptydir"))
    files = {
        "a.txt": (b"hello\n" * 20, 0o644),
        "exe.sh": (b"#!/bin/sh\necho hi\n", 0o755),
        "secret": (payload("secret", 3000), 0o600),
        "empty.bin": (b"", 0o644),
        "big.bin": (payload("big", 6 * MiB + 7), 0o640),
        "sub/b.txt": (b"bee\n", 0o664),
        "sub/deeper/c.dat": (payload("c", 70000), 0o444),
        "name with space.txt": (b"spaces\n", 0o644),
    }
    for i, (rel, (data, mode)) in enumerate(sorted(files.items())):
        p = os.path.join(root, rel)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        os.utime(p, (T0 + i * 1000, T0 + i * 1000))
    os.chown(os.path.join(root, "secret"), 1234, 5678)
    os.symlink("a.txt", os.path.join(root, "link"))
    os.symlink("../a.txt", os.path.join(root, "sub", "uplink"))
    os.chmod(os.path.join(root, "sub"), 0o750)
    os.chmod(os.path.join(root, "emptydir"), 0o700)
    for d in ("sub/deeper", "sub", "emptydir"):
        os.utime(os.path.join(root, d), (T0 - 5, T0 - 5))


@pytest.fixture
def src(tmp_path):
    root = str(tmp_path / "src")
    os.mkdir(root)
    make_tree(root)
    return root


def compare(got_root, src_root, what, list_too=True, listing_first=False):
    want = trees.snapshot(src_root)
    # stat every path by name first: no listing of got_root primes anything;
    # or listing_first, as `ls -l` and find do (readdirplus's attributes)
    got = trees.snapshot(got_root, paths=None if listing_first else list(want))
    for p, e in want.items():  # directories: type and mode (tools set their times last)
        if e["type"] == "dir":
            for f in ("mtime", "uid", "gid"):
                e.pop(f, None)
                got[p].pop(f, None)
        if e["type"] == "link":  # a link's own mode and time are not the point here
            for f in ("mode", "mtime", "uid", "gid"):
                e.pop(f, None)
                got[p].pop(f, None)
    trees.assert_same(got, want, what, FILE_FIELDS)
    if list_too:
        assert sorted(trees.walk_paths(got_root)) == sorted(want), "%s: listing" % what


def diff_r(a, b):
    r = subprocess.run(["diff", "-r", "--no-dereference", a, b], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "diff -r %s %s:\n%s%s" % (a, b, r.stdout[-3000:], r.stderr)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:],
                                                     r.stderr[-3000:])
    return r


def remount(rw_mount, m, bucket):
    m.unmount()
    return rw_mount(bucket)


# -- copying in ------------------------------------------------------------------------------
def test_rsync_a_round_trips(rw_mount, bucket, src):
    m = rw_mount(bucket)
    run(["rsync", "-a", src + "/", m.join("r") + "/"])
    diff_r(src, m.join("r"))
    compare(m.join("r"), src, "rsync -a, same mount")
    # a second rsync finds nothing to do (sizes and mtimes match, the
    # directories' times and modes too)
    r = run(["rsync", "-a", "--itemize-changes", src + "/", m.join("r") + "/"])
    assert not r.stdout.strip(), r.stdout
    m = remount(rw_mount, m, bucket)
    compare(m.join("r"), src, "rsync -a, after remount")
    diff_r(src, m.join("r"))


def test_close_then_chmod_utime_rename_at_once_keeps_all(rw_mount, bucket):
    """rsync's sequence with no pause: the kernel sends RELEASE after close()
    has returned, so chmod, utime and rename reach the daemon while the last
    commit of the temporary file runs. Each must land on the final object."""
    m = rw_mount(bucket)
    os.mkdir(m.join("d"))
    want = {}
    for i in range(40):
        tmp, final = m.join("d/.f%d.tmp" % i), m.join("d/f%d" % i)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        data = b"" if i % 2 == 0 else payload("f%d" % i, 1000 + i)
        os.write(fd, data)
        os.close(fd)
        os.chmod(tmp, 0o644)
        os.utime(tmp, (T0 + i, T0 + i))
        os.rename(tmp, final)
        want["f%d" % i] = (len(data), T0 + i)

    def check(where):
        # by name first: attributes from a listing show metadata only after
        # attr_timeout (doc/decisions.md, "Metadata and listings")
        for name, (size, mtime) in want.items():
            st = os.stat(m.join("d", name))
            assert (st.st_size, oct(st.st_mode & 0o7777), int(st.st_mtime)) == \
                (size, "0o644", mtime), "%s: %s" % (where, name)
        assert sorted(os.listdir(m.join("d"))) == sorted(want), where

    check("same mount")
    m = remount(rw_mount, m, bucket)
    check("after remount")


def test_a_files_own_time_outlives_its_name_and_attributes_expiring(rw_mount, bucket, s3client):
    """Once a name's entry and attributes had both expired (a loop slower than
    attr_timeout under load: the test above failed now and then on Swift),
    the next lookup was answered from a fresh listing, whose time is the
    upload's: a file's own mtime (utimens, rsync, tar) was lost from view
    until it was read again. It stays while the listing shows the version
    it belongs to; a version another client stored shows its own time."""
    m = rw_mount(bucket, "attr_timeout=1,entry_timeout=1")
    os.mkdir(m.join("d"))
    for i, name in enumerate(("f", "g")):
        with open(m.join("d", name), "wb") as f:
            f.write(payload(name, 1000 + i))
        os.utime(m.join("d", name), (T0 + i, T0 + i))
    time.sleep(1.5)  # both the entries and the attributes expire
    assert int(os.stat(m.join("d", "f")).st_mtime) == T0
    time.sleep(1.5)
    os.listdir(m.join("d"))  # readdir installs the listing first this time
    assert int(os.stat(m.join("d", "g")).st_mtime) == T0 + 1
    assert int(os.stat(m.join("d", "f")).st_mtime) == T0
    # another client replaces g: the listing shows a new version
    s3client.put_object(Bucket=bucket, Key="d/g", Body=b"new")
    time.sleep(1.5)
    os.listdir(m.join("d"))
    st = os.stat(m.join("d", "g"))
    assert st.st_size == 3 and abs(st.st_mtime - time.time()) < 120, (st.st_size, st.st_mtime)


def test_cp_a_round_trips(rw_mount, bucket, src):
    m = rw_mount(bucket)
    run(["cp", "-a", src, m.join("c")])
    diff_r(src, m.join("c"))
    compare(m.join("c"), src, "cp -a, same mount")
    m = remount(rw_mount, m, bucket)
    compare(m.join("c"), src, "cp -a, after remount")


def test_tar_x_round_trips(rw_mount, bucket, src, tmp_path):
    arch = str(tmp_path / "t.tar")
    run(["tar", "-C", src, "-cf", arch, "."])
    m = rw_mount(bucket)
    os.mkdir(m.join("t"))
    run(["tar", "-C", m.join("t"), "-xpf", arch])
    diff_r(src, m.join("t"))
    compare(m.join("t"), src, "tar x, same mount")
    m = remount(rw_mount, m, bucket)
    compare(m.join("t"), src, "tar x, after remount")
    # and tar c from the mount lists the same members
    r1 = run(["tar", "-C", src, "-tf", arch])
    r2 = run(["tar", "-C", m.join("t"), "-cvf", "/dev/null", "."])
    assert sorted(r2.stdout.splitlines()) == sorted(r1.stdout.splitlines())


def test_a_tree_the_kernel_forgot_shows_its_own_times_modes_and_links(rw_mount, bucket, src,
                                                                     tmp_path):
    """Listings carry no metadata. A tree written here keeps its own times,
    modes, symlinks and inode numbers once the kernel forgot its inodes
    (drop_caches, as memory pressure does): `ls -l` showed upload times and
    the mount's mode (rsync then saw every file changed), and a `tar -x`
    that another process's drop_caches met left an empty file where a
    symlink with ".." belonged (its placeholder had a new number)."""
    arch = str(tmp_path / "t.tar")
    run(["tar", "-C", src, "-cf", arch, "."])
    m = rw_mount(bucket)
    os.mkdir(m.join("t"))
    run(["tar", "-C", m.join("t"), "-xpf", arch])
    compare(m.join("t"), src, "tar x", list_too=False)
    inos = {p: os.lstat(m.join("t", p)).st_ino for p in trees.walk_paths(m.join("t"))}
    before = admin.stats_json(m.path)["metadata"]["inodes"]
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")  # dentries and inodes
    after = admin.stats_json(m.path)["metadata"]["inodes"]
    # the case happened: the kernel forgot the tree's files (14 paths)
    assert after <= before - 10, (before, after)
    compare(m.join("t"), src, "tar x, the kernel forgot it", listing_first=True)
    # and every path keeps its inode number: GNU tar replaces the empty
    # placeholder of a symlink with ".." by the link at its end only if the
    # placeholder's number is the same (a new one left an empty file)
    again = {p: os.lstat(m.join("t", p)).st_ino for p in inos}
    assert again == inos, {p: (inos[p], again[p]) for p in inos if again[p] != inos[p]}
    # rsync finds nothing to do: no file, link or directory (time, mode)
    r = run(["rsync", "-a", "--itemize-changes", src + "/", m.join("t") + "/"])
    assert not r.stdout.strip(), r.stdout


def test_mv_trees_into_inside_and_out_of_the_mount(rw_mount, bucket, src, tmp_path):
    local = str(tmp_path / "local")
    run(["cp", "-a", src, local])
    m = rw_mount(bucket)
    run(["mv", local, m.join("m1")])  # across filesystems: mv copies, then removes
    assert not os.path.exists(local)
    compare(m.join("m1"), src, "mv into the mount")
    # the kernel forgets part of the tree first (its symlinks' inodes: what
    # the mount remembered of them was m1's names), and after the rename the
    # pages the copy in left: every byte comes from the store. The copies
    # of m1's objects (big.bin was a multipart upload, and its server-side
    # copy has another ETag on versitygw and S3) read right, not EIO from a
    # read asking for the source's version, and the links stay links
    os.listdir(m.join("m1", "sub"))
    before = admin.stats_json(m.path)["metadata"]["inodes"]
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")
    assert admin.stats_json(m.path)["metadata"]["inodes"] < before  # the case happened
    run(["mv", m.join("m1"), m.join("m2")])  # inside: rename(2) of a directory
    assert not os.path.exists(m.join("m1"))
    gets = admin.stats_json(m.path)["reads"]["gets"]
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")
    diff_r(src, m.join("m2"))
    assert admin.stats_json(m.path)["reads"]["gets"] > gets  # the case happened
    compare(m.join("m2"), src, "mv inside the mount")
    m = remount(rw_mount, m, bucket)
    compare(m.join("m2"), src, "mv inside the mount, after remount")
    back = str(tmp_path / "back")
    run(["mv", m.join("m2"), back])  # out of the mount
    assert not os.path.exists(m.join("m2"))
    assert os.listdir(m.path) == []
    compare(back, src, "mv out of the mount")


def test_rsync_out_of_a_fresh_mount_round_trips(rw_mount, bucket, src, tmp_path):
    """A tree put into the bucket comes back out with rsync -a from a new
    mount: the copy is a walk (listings) plus lstat, as every tool does."""
    m = rw_mount(bucket)
    run(["rsync", "-a", src + "/", m.join("r") + "/"])
    m.unmount()
    # files' modes and owners come from listings with the default
    # metadata=lookup; metadata=head reads each one (as s3fs-fuse does)
    m = rw_mount(bucket, "metadata=head")
    out = str(tmp_path / "out")
    run(["rsync", "-a", m.join("r") + "/", out + "/"])
    diff_r(src, out)
    compare(out, src, "rsync -a out of a fresh mount")


# -- git -----------------------------------------------------------------------------------------
GIT = ["git", "-c", "user.name=objmount test", "-c", "user.email=test@objmount.invalid",
       "-c", "safe.directory=*", "-c", "init.defaultBranch=main", "-c", "gc.auto=0"]


def git(*args, cwd):
    return run(GIT + list(args), cwd=cwd, env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1",
                                                   HOME=os.path.dirname(cwd)))


def test_git_init_commit_fsck_and_clone(rw_mount, bucket, src, tmp_path):
    m = rw_mount(bucket)
    repo = m.join("repo")
    git("init", "-q", repo, cwd=m.path)
    for name in ("a.txt", "exe.sh", "big.bin", "sub"):
        s = os.path.join(src, name)
        if os.path.isdir(s):
            shutil.copytree(s, os.path.join(repo, name), symlinks=True)
        else:
            shutil.copy2(s, os.path.join(repo, name))
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "first", cwd=repo)
    with open(os.path.join(repo, "a.txt"), "ab") as f:
        f.write(b"more\n")
    git("mv", "exe.sh", "run.sh", cwd=repo)
    git("commit", "-q", "-a", "-m", "second", cwd=repo)
    assert git("status", "--porcelain", cwd=repo).stdout == ""
    m.unmount()
    # git status compares modes: after a remount, metadata=head reads each
    # file's stored mode even when git listed its directory first (with the
    # default metadata=lookup, listed files show default modes until
    # attr_timeout, so an executable could show as a mode change)
    m = rw_mount(bucket, "metadata=head")
    repo = m.join("repo")
    log = git("log", "--format=%s", cwd=repo).stdout.split()
    assert log == ["second", "first"], log
    git("fsck", "--full", "--strict", cwd=repo)
    assert git("status", "--porcelain", cwd=repo).stdout == ""
    clone = str(tmp_path / "clone")
    git("clone", "-q", repo, clone, cwd=str(tmp_path))
    diff_r(os.path.join(src, "sub"), os.path.join(clone, "sub"))
    with open(os.path.join(clone, "a.txt"), "rb") as f:
        assert f.read() == b"hello\n" * 20 + b"more\n"
    assert os.access(os.path.join(clone, "run.sh"), os.X_OK)
