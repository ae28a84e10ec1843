"""objmountctl against live mounts: status, stats (text, Prometheus, --watch),
unmount that waits for commits, and the admin socket's permissions.

Other objmount mounts may exist on the machine (other test runs); checks
look only at the rows of the mounts made here."""

import contextlib
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import threading
import time

from harness import admin
from harness.mount import (binary, check_object, daemon_env, is_mounted, payload, read_all, seed,
                           wait_for)
from harness.omtools import tool
from harness.servers import mount_source

NOBODY = 65534


def status_row(mountpoint, user=None):
    """objmountctl status -> the row of mountpoint as a dict (None if absent)."""
    p = admin.ctl(["status"], user=user)
    # (status exits 1 when some mount on the machine does not answer: another
    # run's may not; only our rows matter here)
    assert p.returncode in (0, 1), "status failed (%d): %s" % (p.returncode, p.stderr)
    lines = p.stdout.splitlines()
    assert lines and lines[0].split()[:4] == ["MOUNTPOINT", "BUCKET", "ENDPOINT", "UPTIME"], \
        p.stdout
    for ln in lines[1:]:
        f = ln.split(None, 7)
        if f and f[0] == mountpoint:
            if len(f) < 8 or "not answering" in ln:
                return {"raw": ln}
            return dict(zip(["mountpoint", "bucket", "endpoint", "uptime", "open", "commits",
                             "recovery", "last_error"], f), raw=ln)
    return None


def live(rw_mount, bucket, *args, **kw):
    """A mount whose daemon answers on its admin socket."""
    m = rw_mount(bucket, *args, **kw)
    assert admin.wait_socket(m.path), "no admin socket for %s" % m.path
    return m


def uptime_seconds(s):
    n, unit = int(s[:-1]), s[-1]
    return n * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


# -- status ----------------------------------------------------------------------------------
def test_status_lists_each_mount_with_its_state(rw_mount, bucket, s3client, s3server):
    seed(s3client, bucket, {"p/r.bin": payload("st-r", 5000), "q": b"q"})
    m1 = live(rw_mount, bucket)
    m2 = live(rw_mount, bucket, prefix="p/")
    r1 = status_row(m1.path)
    assert r1 is not None, "status does not list %s" % m1.path
    assert r1["bucket"] == bucket and r1["endpoint"] == s3server.endpoint, r1
    assert r1["open"] == "0" and r1["commits"] == "0" and r1["recovery"] == "0", r1
    assert r1["last_error"] == "-", r1
    assert 0 <= uptime_seconds(r1["uptime"]) < 60, r1
    r2 = status_row(m2.path)
    assert r2 is not None and r2["bucket"] in ("%s:p/" % bucket, "%s:p" % bucket), r2
    # open files: a reader and a writer
    rf = open(m2.join("r.bin"), "rb")
    wf = open(m1.join("w.bin"), "wb")
    try:
        rf.read(10)
        wf.write(b"abc")
        r1, r2 = status_row(m1.path), status_row(m2.path)
        assert r1["open"] == "1" and r2["open"] == "1", (r1, r2)
    finally:
        rf.close()
        wf.close()
    assert wait_for(lambda: status_row(m1.path)["open"] == "0", 5), status_row(m1.path)
    m2.unmount()
    assert status_row(m2.path) is None, "an unmounted mount is still listed"


# -- stats -------------------------------------------------------------------------------------
def test_stats_text_has_every_table(rw_mount, bucket, s3client):
    want = payload("stats", 300000)
    s3client.put_object(Bucket=bucket, Key="f.bin", Body=want)
    m = live(rw_mount, bucket)
    assert read_all(m.join("f.bin")) == want
    os.listdir(m.path)
    with open(m.join("new"), "wb") as f:
        f.write(b"new")
    p = admin.ctl(["stats", m.path])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert bucket in out and m.path in out, out[:300]
    header = [ln for ln in out.splitlines() if ln.startswith("operation")]
    assert header, out
    for col in ("requests", "failed", "retries", "redirs", "p50", "p90", "p99"):
        assert col in header[0], header
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln and ln.split()[0] in (
        "GetObject", "HeadObject", "ListObjectsV2", "PutObject")}
    assert int(rows["GetObject"][1]) >= 1 and int(rows["PutObject"][1]) >= 1, rows
    text = out.lower()
    for word in ("retries", "redirects", "from cache", "memory", "rss", "commits", "verified"):
        assert word in text, "stats output lacks %r:\n%s" % (word, out)
    assert re.search(r"\d+(\.\d+)?% from cache", out), out


PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"'
                       r'(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*,?)?\})? '
                       r'([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?Inf|NaN)( -?\d+)?$')


def parse_prometheus(text):
    """Strict-enough parser of the text exposition format: returns
    {family: {"type": t, "help": h, "samples": [(name, labels, value)]}};
    AssertionError naming the first bad line."""
    fams, current = {}, None
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        if ln.startswith("# HELP "):
            name, _, h = ln[7:].partition(" ")
            assert name not in fams or not fams[name].get("help"), "line %d: second HELP" % n
            fams.setdefault(name, {"samples": []})["help"] = h
            continue
        if ln.startswith("# TYPE "):
            name, _, t = ln[7:].partition(" ")
            assert t in ("counter", "gauge", "summary", "histogram", "untyped"), \
                "line %d: bad type %r" % (n, ln)
            f = fams.setdefault(name, {"samples": []})
            assert "type" not in f and not f["samples"], "line %d: TYPE after samples" % n
            f["type"] = t
            current = name
            continue
        if ln.startswith("#"):
            continue
        mt = PROM_LINE.match(ln)
        assert mt, "line %d is not a sample: %r" % (n, ln)
        name = mt.group(1)
        fam = name
        for suffix in ("_sum", "_count", "_bucket"):
            if name.endswith(suffix) and name[:-len(suffix)] == current:
                fam = current
        assert fam == current, "line %d: sample %s outside its family (%s)" % (n, name, current)
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"',
                                 mt.group(2) or ""))
        fams[fam]["samples"].append((name, labels, float(mt.group(7))))
    for name, f in fams.items():
        assert f.get("help") is not None and f.get("type"), "family %s lacks HELP or TYPE" % name
    return fams


def test_stats_prometheus_is_valid_text_format(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="f", Body=b"x" * 1000)
    m = live(rw_mount, bucket)
    read_all(m.join("f"))
    p = admin.ctl(["stats", m.path, "--prometheus"])
    assert p.returncode == 0, p.stderr
    fams = parse_prometheus(p.stdout)
    req = fams.get("objmount_requests_total")
    assert req and req["type"] == "counter", sorted(fams)
    ops = {lab.get("op"): v for _, lab, v in req["samples"]}
    assert ops.get("GetObject", 0) >= 1 and ops.get("ListObjectsV2", 0) >= 1, ops
    for name, f in fams.items():
        assert name.startswith("objmount_"), name
        if f["type"] == "counter":
            assert name.endswith("_total"), "counter %s lacks _total" % name
            assert all(v >= 0 for _, _, v in f["samples"]), name
    names = " ".join(fams)
    for part in ("retries", "redirects", "duration", "open_files", "memory", "cache"):
        assert part in names, "no metric about %s: %s" % (part, sorted(fams))


def test_stats_watch_refreshes_until_interrupted(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="f", Body=b"w" * 5000)
    m = live(rw_mount, bucket)
    proc = subprocess.Popen([tool("objmountctl"), "stats", m.path, "--watch", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=daemon_env())
    out = bytearray()

    def pump():
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            out.extend(chunk)
    reader = threading.Thread(target=pump, daemon=True)

    def frames():
        return [f for f in bytes(out).decode(errors="replace").split("\033[H\033[2J")
                if f.strip()]
    try:
        reader.start()
        # a first refresh, then a GET, then a refresh that shows it: each
        # waited for (the refreshes come once a second)
        assert wait_for(lambda: len(frames()) >= 1, 15), bytes(out)[:500]
        first = len(frames())
        assert not any("GetObject" in f for f in frames()), frames()
        read_all(m.join("f"))
        assert wait_for(lambda: any("GetObject" in f for f in frames()[first:]), 15), \
            "no refresh shows the GET made after the first one:\n%r" % bytes(out)[-1000:]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
    err = proc.stderr.read()
    assert proc.returncode == 0, (proc.returncode, err)
    got = frames()
    assert len(got) >= 2 and "GetObject" not in got[0] and "GetObject" in got[-1], got


# -- unmount -----------------------------------------------------------------------------------
def slow_writer(path, data):
    box = {}

    def run():
        try:
            with open(path, "wb") as f:
                f.write(data)
            box["ok"] = True
        except OSError as e:
            box["error"] = e
    t = threading.Thread(target=run)
    t.start()
    return t, box


def test_unmount_waits_for_commits_then_unmounts(rw_mount, bucket, s3client, faultproxy):
    m = live(rw_mount, bucket, endpoint=faultproxy.endpoint)
    faultproxy.set_faults(latency={"first_byte_ms": 2000, "kind": "PutObject"})
    want = payload("drain", 20000)
    t, box = slow_writer(m.join("slow.bin"), want)
    try:
        assert wait_for(lambda: (status_row(m.path) or {}).get("commits") == "1", 5), \
            "the commit never showed in status: %s" % status_row(m.path)
        t0 = time.monotonic()
        p = admin.ctl(["unmount", m.path])
        took = time.monotonic() - t0
    finally:
        t.join(30)
    assert box.get("ok"), "close() during objmountctl unmount: %s" % box
    assert p.returncode == 0, "objmountctl unmount failed (%d): %s" % (p.returncode, p.stderr)
    assert took >= 0.5, "unmount returned after %.2f s, before the commit could finish" % took
    assert not is_mounted(m.path)
    faultproxy.reset()
    check_object(s3client, bucket, "slow.bin", want)
    m.proc.wait(timeout=15)
    assert m.proc.returncode == 0, "daemon exit status %s:\n%s" % (m.proc.returncode, m.log[-2000:])
    m.unmount(check=False)  # already unmounted and exited 0: only the harness's cleanup


def test_unmount_times_out_while_a_commit_is_in_flight(rw_mount, bucket, s3client, faultproxy):
    m = live(rw_mount, bucket, endpoint=faultproxy.endpoint)
    faultproxy.set_faults(latency={"first_byte_ms": 4000, "kind": "PutObject"})
    t, box = slow_writer(m.join("slow.bin"), b"slow")
    try:
        assert wait_for(lambda: (status_row(m.path) or {}).get("commits") == "1", 5)
        p = admin.ctl(["unmount", m.path, "--timeout", "1"])
    finally:
        t.join(30)
    line = admin.one_error_line(p, "unmount --timeout 1 with a commit in flight")
    assert "commit" in line, line
    assert is_mounted(m.path), "unmounted although the commit had not finished"
    assert box.get("ok"), box
    check_object(s3client, bucket, "slow.bin", b"slow")


def test_unmount_of_a_busy_mount_fails_and_keeps_it(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="f", Body=b"busy")
    m = live(rw_mount, bucket)
    with open(m.join("f"), "rb") as f:
        p = admin.ctl(["unmount", m.path])
        assert p.returncode != 0, p.stdout
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("objmountctl: ") and "busy" in last, p.stderr
        assert is_mounted(m.path)
        assert f.read() == b"busy"
    m.check_alive()


# -- the admin socket ------------------------------------------------------------------------
def test_admin_socket_is_for_root_and_the_mounting_user_only(rw_mount, bucket, tmp_path):
    m = live(rw_mount, bucket)
    path = admin.socket_path(m.path)
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode), path
    assert stat.S_IMODE(st.st_mode) == 0o600, "socket mode %o" % stat.S_IMODE(st.st_mode)
    assert st.st_uid == os.getuid()
    d = os.stat(os.path.dirname(path))
    assert d.st_uid == 0 and not d.st_mode & 0o022, "socket directory mode %o" % d.st_mode
    # another user can neither use objmountctl on the mount nor connect
    p = admin.ctl(["stats", m.path], user=NOBODY)
    line = admin.one_error_line(p, "stats as nobody")
    assert "ermission denied" in line, line
    row = status_row(m.path, user=NOBODY)
    assert row is None or "ermission denied" in row["raw"], row
    probe = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
             "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n sys.exit(3)\n")
    r = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                        "--clear-groups", "/usr/bin/python3", "-c", probe, path],
                       capture_output=True, text=True)
    assert r.returncode == 3, "nobody could connect to %s (%d %s)" % (path, r.returncode,
                                                                     r.stderr)
    m.unmount()
    assert not os.path.exists(path), "the socket outlived its daemon"


USER_OBJ, USER, GROUP_OBJ, MASK, OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
ACL_UNDEFINED_ID = 0xFFFFFFFF


@contextlib.contextmanager
def fuse_device_for(uid):
    """/dev/fuse opened by uid inside the block. Where it is crw------- (as
    on these machines) a POSIX ACL grants uid read and write, and the mode
    and ACL are put back afterwards. The mount itself is then the setuid
    fusermount3's, as for any user: libfuse opens the device, its mount(2)
    is refused (EPERM), and it hands the mount to fusermount3."""
    dev = "/dev/fuse"
    st = os.stat(dev)
    if st.st_mode & 0o006 == 0o006:
        yield
        return
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, who) for tag, perm, who in (
        (USER_OBJ, stat.S_IMODE(st.st_mode) >> 6 & 7, ACL_UNDEFINED_ID), (USER, 6, uid),
        (GROUP_OBJ, stat.S_IMODE(st.st_mode) >> 3 & 7, ACL_UNDEFINED_ID),
        (MASK, 6, ACL_UNDEFINED_ID), (OTHER, stat.S_IMODE(st.st_mode) & 7, ACL_UNDEFINED_ID)))
    os.setxattr(dev, "system.posix_acl_access", acl)
    try:
        yield
    finally:
        os.removexattr(dev, "system.posix_acl_access")
        os.chmod(dev, stat.S_IMODE(st.st_mode))


def test_a_users_mount_answers_that_user_and_root(s3server, bucket):
    """A user (nobody) mounts: through fusermount3, the mount is that user's
    (user_id= in the mount table), and objmountctl answers that user and
    root on its socket."""
    top = tempfile.mkdtemp(prefix="objmount-user-")
    os.chmod(top, 0o755)  # nobody reaches what is below
    d, cache = os.path.join(top, "mnt"), os.path.join(top, "cache")
    for p in (d, cache):
        os.mkdir(p)
        os.chown(p, NOBODY, NOBODY)
    proc = None
    try:
        with fuse_device_for(NOBODY):
            proc = subprocess.Popen(
                ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                 binary(), mount_source(bucket), d, "-f", "-o",
                 "endpoint=%s,cache_dir=%s,retry_base=0.02,retry_max=0.2"
                 % (s3server.endpoint, cache)],
                env=daemon_env(), stderr=subprocess.PIPE, cwd="/")
            assert wait_for(lambda: is_mounted(d) or proc.poll() is not None, 15) and \
                is_mounted(d), proc.stderr.read1() if proc.poll() is not None else "not mounted"
        with open("/proc/self/mountinfo") as f:
            row = [ln for ln in f if ln.split()[4] == d]
        assert row and "user_id=%d" % NOBODY in row[0], row
        assert admin.wait_socket(d, uid=NOBODY), "no admin socket for %s" % d
        p = admin.ctl(["stats", d], user=NOBODY)
        assert p.returncode == 0 and d in p.stdout, p.stderr
        p = admin.ctl(["stats", d])
        assert p.returncode == 0 and d in p.stdout, p.stderr
        st = os.stat(admin.socket_path(d, uid=NOBODY))
        assert st.st_uid == NOBODY and stat.S_IMODE(st.st_mode) == 0o600, st
    finally:
        subprocess.run(["fusermount3", "-u", d], capture_output=True)
        if proc is not None:
            proc.wait(timeout=15)
        shutil.rmtree(top, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr.read()
