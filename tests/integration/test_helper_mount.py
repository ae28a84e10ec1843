"""mount(8) and fstab mount buckets through mount.objmount.

For mount(8) to find the helper, /sbin/mount.objmount is made a symlink to
the built one for each test (harness.admin.installed_mount_helper). mount(8)
runs with no environment but PATH, as at boot, so credentials come from a
0600 credentials= file. Checked: `mount -t objmount BUCKET:/PREFIX DIR -o
...` with mount(8)'s own options (_netdev, nofail, ...) removed and the
kernel flags (ro, noexec) applied; `umount DIR` unmounts and the daemon
exits; fstab lines through `mount -a -T FSTAB` (noauto lines skipped) and
`mount -T FSTAB DIR`; bad input (unknown option, a group/world-readable
credentials file, an unreachable endpoint, a missing bucket) ends with one
line on stderr, a non-zero status and nothing mounted."""

import errno
import os
import socket
import subprocess
import time

import pytest

from harness import admin
from harness.mount import check_bytes, is_mounted, mount_entry, payload, read_all, seed, wait_for

FAST = "retry_base=0.02,retry_max=0.2"


@pytest.fixture
def helper():
    with admin.installed_mount_helper() as link:
        yield link


@pytest.fixture
def creds(tmp_path):
    return admin.write_credentials(str(tmp_path / "creds"))


@pytest.fixture
def mountpoints(tmp_path):
    """mountpoints(n) -> n fresh directories; anything still mounted on them
    at the end is unmounted and its daemon stopped."""
    made = []

    def make(n=1):
        out = []
        for _ in range(n):
            d = tmp_path / ("mnt%d" % len(made))
            d.mkdir()
            made.append(str(d))
            out.append(str(d))
        return out
    yield make
    for d in made:
        admin.force_unmount(d)


def opts(s3server, creds, cache_dir, extra=""):
    o = "endpoint=%s,credentials=%s,cache_dir=%s,%s" % (s3server.endpoint, creds, cache_dir, FAST)
    return o + ("," + extra if extra else "")


def mount_options(path):
    """The mount's per-mount flags (mountinfo field 6) and super options."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            a = left.split()
            if a[4] == path:
                return set(a[5].split(",")), right.split()
    return None, None


def umount_and_wait(path):
    pids = admin.pids_serving(path)
    assert pids, "no objmount daemon serves %s" % path
    r = admin.run_umount([path])
    assert r.returncode == 0, r.stderr
    assert not is_mounted(path)
    gone = wait_for(lambda: not [p for p in pids if os.path.exists("/proc/%d" % p)], 15)
    assert gone, "the daemon (pids %s) is still running after umount" % pids


@pytest.fixture
def train(s3client, bucket):
    objects = {"train/a.bin": payload("h-a", 100000), "train/sub/b.bin": payload("h-b", 3000),
               "other/c.bin": b"not under the prefix"}
    seed(s3client, bucket, objects)
    s3client.put_object(Bucket=bucket, Key="train/run.sh", Body=b"#!/bin/sh\necho ran\n",
                        Metadata={"mode": str(0o100755)})
    return objects


def test_mount_t_objmount_with_prefix_and_mount_flags(helper, s3server, bucket, train, creds,
                                                      cache_dir, mountpoints):
    (d,) = mountpoints()
    o = opts(s3server, creds, cache_dir, "ro,_netdev,nofail,noexec")
    t0 = time.monotonic()
    r = admin.run_mount(["-t", "objmount", "%s:/train" % bucket, d, "-o", o])
    assert r.returncode == 0, "mount -t objmount failed (%d):\n%s" % (r.returncode, r.stderr)
    assert r.stderr.strip() == "", r.stderr
    assert is_mounted(d), "mount returned 0 but %s is not mounted" % d
    # ready when mount returned
    check_bytes(read_all(os.path.join(d, "a.bin")), train["train/a.bin"], "a.bin")
    assert time.monotonic() - t0 < 20
    # noexec: an executable file (mode 0755 stored on it) does not run
    run = os.path.join(d, "run.sh")
    assert os.stat(run).st_mode & 0o111 == 0o111, oct(os.stat(run).st_mode)
    with pytest.raises(PermissionError):
        subprocess.run([run], capture_output=True)
    assert sorted(os.listdir(d)) == ["a.bin", "run.sh", "sub"]
    check_bytes(read_all(os.path.join(d, "sub", "b.bin")), train["train/sub/b.bin"], "sub/b.bin")
    flags, sup = mount_options(d)
    assert sup[0] == "fuse.objmount", sup
    assert {"ro", "noexec", "nosuid", "nodev"} <= flags, flags
    listing = subprocess.run(["mount"], capture_output=True, text=True).stdout
    line = [ln for ln in listing.splitlines() if " on %s type " % d in ln]
    assert len(line) == 1, listing
    assert "type fuse.objmount" in line[0] and "noexec" in line[0] and "(ro," in line[0], line
    # ro and noexec are enforced
    with pytest.raises(OSError) as ei:
        open(os.path.join(d, "new"), "wb")
    assert ei.value.errno == errno.EROFS
    # mount(8)'s own options did not reach the daemon's command line
    for pid in admin.pids_serving(d):
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().decode().split("\0")
        joined = " ".join(argv)
        for own in ("_netdev", "nofail"):
            assert own not in joined.split("-o ", 1)[-1].split(","), argv
    umount_and_wait(d)


def test_fstab_lines_with_mount_a_and_mount_T(helper, s3server, bucket, train, creds, cache_dir,
                                             mountpoints, tmp_path):
    auto_dir, noauto_dir = mountpoints(2)
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "# test fstab\n"
        "%s:/train %s objmount _netdev,ro,%s 0 0\n"
        "%s %s objmount noauto,_netdev,%s 0 0\n" % (
            bucket, auto_dir, opts(s3server, creds, cache_dir),
            bucket, noauto_dir, opts(s3server, creds, cache_dir)))
    r = admin.run_mount(["-a", "-T", str(fstab)])
    assert r.returncode == 0, "mount -a -T failed (%d):\n%s" % (r.returncode, r.stderr)
    assert is_mounted(auto_dir), "the auto line was not mounted"
    assert not is_mounted(noauto_dir), "mount -a mounted a noauto line"
    assert sorted(os.listdir(auto_dir)) == ["a.bin", "run.sh", "sub"]
    flags, _ = mount_options(auto_dir)
    assert "ro" in flags, flags
    # mount -a again: the mounted line is skipped, nothing new is mounted
    r = admin.run_mount(["-a", "-T", str(fstab)])
    assert r.returncode == 0, r.stderr
    assert len([e for e in admin.pids_serving(auto_dir)]) == 1
    # mount -T FSTAB DIR: the noauto line, by its mount point
    r = admin.run_mount(["-T", str(fstab), noauto_dir])
    assert r.returncode == 0, "mount -T %s %s failed:\n%s" % (fstab, noauto_dir, r.stderr)
    assert sorted(os.listdir(noauto_dir)) == ["other", "train"]
    check_bytes(read_all(os.path.join(noauto_dir, "train", "a.bin")), train["train/a.bin"], "a")
    with open(os.path.join(noauto_dir, "written"), "wb") as f:  # rw line
        f.write(b"via fstab")
    umount_and_wait(noauto_dir)
    umount_and_wait(auto_dir)


def test_helper_removes_mount8_options_and_finds_the_daemon(tmp_path):
    """-f shows the command it would run (and mounts nothing)."""
    h = admin.helper_binary()
    d = str(tmp_path)
    r = subprocess.run([h, "b:/p", d, "-f", "-o",
                        "defaults,auto,user,users,owner,group,nouser,nofail,_netdev,"
                        "x-systemd.automount,comment=zz,ro,noexec,nosuid,endpoint=http://e:1"],
                       capture_output=True, text=True, env={"PATH": admin.CLEAN_PATH})
    assert r.returncode == 0, r.stderr
    cmd = r.stderr.strip().split("mount.objmount: ", 1)[-1].split()
    daemon = os.path.realpath(os.path.join(os.path.dirname(h), "..", "objmount"))
    assert os.path.realpath(cmd[0]) == daemon, cmd
    assert cmd[1:4] == ["b:/p", d, "-o"], cmd
    assert cmd[4].split(",") == ["ro", "noexec", "nosuid", "endpoint=http://e:1"], cmd
    assert not is_mounted(d)
    r = subprocess.run([h, "b", d, "-f"], capture_output=True, text=True,
                       env={"PATH": admin.CLEAN_PATH, "OBJMOUNT_BIN": "/opt/x/objmount"})
    assert r.returncode == 0 and "/opt/x/objmount b %s" % d in r.stderr, r.stderr


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


BAD = ["unknown-option", "world-readable-credentials", "unreachable-endpoint", "missing-bucket"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_gives_one_line_and_mounts_nothing(helper, s3server, bucket, creds, cache_dir,
                                                     mountpoints, case, tmp_path):
    (d,) = mountpoints()
    src, o, expect = bucket, opts(s3server, creds, cache_dir), None
    if case == "unknown-option":
        o += ",bogus_option=1"
        expect = ["bogus_option"]
    elif case == "world-readable-credentials":
        os.chmod(creds, 0o644)
        expect = ["chmod", creds]
    elif case == "unreachable-endpoint":
        port = closed_port()
        o = o.replace(s3server.endpoint, "http://127.0.0.1:%d" % port)
        expect = ["127.0.0.1:%d" % port]
    elif case == "missing-bucket":
        src = "no-such-bucket-%d" % os.getpid()
        expect = [src]
    t0 = time.monotonic()
    r = admin.run_mount(["-t", "objmount", src, d, "-o", o])
    took = time.monotonic() - t0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0, "mount exited 0 for %s:\n%s" % (case, r.stderr)
    assert len(lines) == 1, "want one line on stderr for %s, got:\n%s" % (case, r.stderr)
    for word in expect:
        assert word in lines[0], "%s: %r does not name %r" % (case, lines[0], word)
    assert not is_mounted(d), "%s left %s mounted" % (case, d)
    assert mount_entry(d) is None
    assert wait_for(lambda: not admin.pids_serving(d), 5), "a daemon is left running"
    assert took < 30, "%s took %.1f s to fail" % (case, took)


def test_umount_of_a_busy_mount_fails_and_keeps_it(helper, s3server, bucket, train, creds,
                                                   cache_dir, mountpoints):
    (d,) = mountpoints()
    r = admin.run_mount(["-t", "objmount", bucket, d, "-o", opts(s3server, creds, cache_dir)])
    assert r.returncode == 0, r.stderr
    f = open(os.path.join(d, "train", "a.bin"), "rb")
    try:
        r = admin.run_umount([d])
        assert r.returncode != 0 and "busy" in r.stderr, r.stderr
        assert is_mounted(d)
        assert f.read(10) == train["train/a.bin"][:10]
    finally:
        f.close()
    umount_and_wait(d)
