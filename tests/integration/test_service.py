"""What objmount@.service relies on: the readiness protocol (Type=notify,
spoken over $NOTIFY_SOCKET without libsystemd), a restarted daemon reusing a
mount point its dead predecessor left behind, and a unit that
systemd-analyze verify accepts."""

import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import textwrap
import time

import pytest

from harness.mount import Mount, MountFailed, is_mounted, payload, read_all, run, seed, wait_for
from harness.omtools import BUILD_DIR, tool

UNIT_IN = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "systemd",
                       "objmount@.service.in")


class NotifySocket:
    """A datagram socket standing in for the service manager's."""

    def __init__(self, tmp_path, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "objmount-test-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            path = str(tmp_path / "notify.sock")
            self.sock.bind(path)
            self.env = path
        self.messages = []

    def wait_for(self, what, timeout=10.0):
        """All messages so far once one holds the line `what`."""
        deadline = time.monotonic() + timeout
        while not any(what in m.split("\n") for m in self.messages):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %r in %r" % (what, self.messages))
            self.sock.settimeout(left)
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        return self.messages

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_ready_once_mounted_and_stopping_at_unmount(s3server, bucket, tmp_path, abstract):
    ns = NotifySocket(tmp_path, abstract)
    m = Mount(bucket, s3server.endpoint, env={"NOTIFY_SOCKET": ns.env})
    try:
        m.start()
        msgs = ns.wait_for("READY=1")
        ready = [x for x in msgs if "READY=1" in x.split("\n")][0]
        assert "STATUS=mounted %s on %s" % (bucket, m.path) in ready.split("\n"), msgs
        assert is_mounted(m.path)
        m.unmount()
        ns.wait_for("STOPPING=1")
    finally:
        m.unmount(check=False)
        ns.close()


def test_a_failed_start_says_why_and_is_never_ready(s3server, tmp_path):
    ns = NotifySocket(tmp_path)
    m = Mount("no-such-bucket-here", s3server.endpoint, env={"NOTIFY_SOCKET": ns.env})
    with pytest.raises(MountFailed):
        m.start()
    msgs = ns.wait_for("STATUS=bucket 'no-such-bucket-here' does not exist at %s: NoSuchBucket"
                       % s3server.endpoint)
    assert not any("READY=1" in x.split("\n") for x in msgs), msgs
    ns.close()


def test_a_restarted_daemon_detaches_the_dead_mount_and_mounts_again(s3server, s3client,
                                                                       bucket, tmp_path):
    want = payload("restart", 70000)
    seed(s3client, bucket, {"a.bin": want})
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    first = Mount(bucket, s3server.endpoint, mountpoint=mnt)
    second = Mount(bucket, s3server.endpoint, mountpoint=mnt)
    try:
        first.start()
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        with pytest.raises(OSError) as e:
            os.stat(mnt)
        assert e.value.errno == errno.ENOTCONN
        second.start()  # returns at once: the dead mount is in the table
        def answers():
            try:
                return os.path.exists(os.path.join(mnt, "a.bin"))
            except OSError:
                return False
        assert wait_for(answers, 20), second.log
        assert read_all(os.path.join(mnt, "a.bin")) == want
        assert "detached the mount of an objmount daemon that is gone" in second.log, second.log
        # one objmount mount there, not two stacked
        rows = [r for r in open("/proc/self/mountinfo") if " %s " % mnt in r]
        assert len(rows) == 1, rows
        second.unmount()
    finally:
        second.unmount(check=False)
        first.unmount(check=False)


def test_a_live_mount_is_still_refused(s3server, bucket, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    first = Mount(bucket, s3server.endpoint, mountpoint=mnt)
    try:
        first.start()
        r = run([bucket, mnt, "-f", "-o", "endpoint=" + s3server.endpoint], timeout=30)
        assert r.returncode != 0 and "already a mount point" in r.stderr, r.stderr
        assert "detached" not in r.stderr
        os.listdir(mnt)  # the first mount still answers
        first.unmount()
    finally:
        first.unmount(check=False)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path):
    """The unit as meson installs it, pointed at the built programs (the
    installed ones are checked by test_package.py, man pages included)."""
    text = open(UNIT_IN).read()
    text = text.replace("@BINDIR@/objmountctl", tool("objmountctl"))
    text = text.replace("@BINDIR@/objmount", os.path.join(BUILD_DIR, "objmount"))
    assert "@" not in text.replace("objmount@", "").replace("%i", ""), text
    unit = tmp_path / "objmount@.service"
    unit.write_text(text)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    for want in ("Type=notify", "After=network-online.target", "Wants=network-online.target",
                 "EnvironmentFile=/etc/objmount/%i.conf", "ExecStop=", "Restart=on-failure",
                 # mkdir -p fails on a dead mount point: that must not stop the restart
                 "ExecStartPre=-/bin/mkdir -p ${MOUNTPOINT}"):
        assert want in text
    stop = int(text.split("TimeoutStopSec=")[1].split()[0])
    drain = int(text.split("--timeout ")[1].split()[0])
    assert stop > drain + 60, "TimeoutStopSec leaves no room for drain + stop_timeout (60 s)"


def unit_commands(conf):
    """The unit's ExecStartPre/ExecStart/ExecStop with ${VAR} from the
    environment file conf expanded the way systemd does for ${VAR} (one
    word) and the programs pointed at the build: [(key, ignore_failure,
    argv)]. (PID 1 is not systemd here, so the test plays its part.)"""
    env = {}
    for ln in conf.splitlines():
        if ln.strip() and not ln.lstrip().startswith("#"):
            k, _, v = ln.partition("=")
            env[k.strip()] = v.strip()
    text = open(UNIT_IN).read()
    text = text.replace("@BINDIR@/objmountctl", tool("objmountctl"))
    text = text.replace("@BINDIR@/objmount", os.path.join(BUILD_DIR, "objmount"))
    out = []
    for ln in text.splitlines():
        key, _, cmd = ln.partition("=")
        if key in ("ExecStartPre", "ExecStart", "ExecStop"):
            ignore = cmd.startswith("-")
            argv = [re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), w)
                    for w in cmd.lstrip("-").split()]
            out.append((key, ignore, argv))
    return env, out


def test_unit_lifecycle_start_crash_restart_stop(s3server, s3client, bucket, tmp_path):
    """What systemd does with objmount@NAME: ExecStartPre, ExecStart with
    $NOTIFY_SOCKET until READY=1, a crash (SIGKILL) and the restart on the
    dead mount point, then ExecStop: commits done, unmounted, the daemon
    gone with status 0 by itself."""
    mnt = tmp_path / "not-yet" / "mnt"
    conf = textwrap.dedent("""\
        # /etc/objmount/test.conf
        SOURCE={bucket}
        MOUNTPOINT={mnt}
        OPTIONS=endpoint={ep},cache_dir={cache},retry_base=0.02,retry_max=0.2
        AWS_ACCESS_KEY_ID={ak}
        AWS_SECRET_ACCESS_KEY={sk}
        """).format(bucket=bucket, mnt=mnt, ep=s3server.endpoint, cache=tmp_path / "cache",
                    ak=s3server.access_key, sk=s3server.secret_key)
    env, cmds = unit_commands(conf)
    by_key = {k: (ig, argv) for k, ig, argv in cmds}
    assert set(by_key) == {"ExecStartPre", "ExecStart", "ExecStop"}, cmds
    ns = NotifySocket(tmp_path)
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NOTIFY_SOCKET": ns.env}
    base.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    procs = []

    def start():
        ignore, argv = by_key["ExecStartPre"]
        r = subprocess.run(argv, env=base, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 or ignore, r.stderr
        ns.messages.clear()
        _, argv = by_key["ExecStart"]
        p = subprocess.Popen(argv, env=base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(p)
        ns.wait_for("READY=1", timeout=30)
        assert is_mounted(str(mnt)), "READY=1 before the mount"
        return p

    try:
        first = start()
        with open(mnt / "a.txt", "wb") as f:
            f.write(b"first\n")
        os.kill(first.pid, signal.SIGKILL)  # Restart=on-failure starts it again
        first.wait(10)
        second = start()
        assert open(mnt / "a.txt", "rb").read() == b"first\n"
        with open(mnt / "b.txt", "wb") as f:
            f.write(b"second\n" * 1000)
        _, argv = by_key["ExecStop"]
        r = subprocess.run(argv, env=base, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert second.wait(60) == 0, second.stdout.read()
        assert not is_mounted(str(mnt))
        ns.wait_for("STOPPING=1")
        assert "detached the mount of an objmount daemon that is gone" in second.stdout.read()
        got = s3client.get_object(Bucket=bucket, Key="b.txt")["Body"].read()
        assert got == b"second\n" * 1000
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        if is_mounted(str(mnt)):
            subprocess.run(["umount", "-l", str(mnt)])
        ns.close()
