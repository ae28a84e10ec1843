"""Starting and stopping objmount: clean unmounts, daemon mode, and bad input
that must end with one clear line on stderr, a non-zero exit and nothing
mounted."""

import os
import re
import signal
import socket
import time

import pytest

from harness import mount as mountlib
from harness.mount import MountFailed, check_bytes, is_mounted, payload, read_all


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def expect_failure(mount, bucket, opts="", **kw):
    """Mount must fail: returns its single stderr line."""
    kw.setdefault("timeout", 30)
    t0 = time.monotonic()
    with pytest.raises(MountFailed) as ei:
        mount(bucket, opts, **kw)
    f = ei.value
    assert f.returncode is not None, "still running after %ss without mounting:\n%s" % (
        kw["timeout"], f.stderr)
    assert f.returncode != 0, "exit status 0 for a failed mount:\n" + f.stderr
    assert not f.mounted, "the mount point was left mounted"
    lines = [ln for ln in f.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, "want exactly one line on stderr, got:\n" + f.stderr
    return lines[0], time.monotonic() - t0


@pytest.fixture
def obj(s3client, bucket):
    data = payload("cli/obj", 300000)
    s3client.put_object(Bucket=bucket, Key="obj", Body=data)
    return data


# -- clean lifecycle -------------------------------------------------------------
def test_fusermount_unmount_ends_daemon_with_status_0(mount, bucket, obj):
    m = mount(bucket)
    check_bytes(read_all(m.join("obj")), obj, "obj")
    assert m.unmount(check=True) == 0
    assert not is_mounted(m.path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_unmounts_and_exits_0(mount, bucket, obj, sig):
    m = mount(bucket)
    check_bytes(read_all(m.join("obj")), obj, "obj")
    m.proc.send_signal(sig)
    try:
        rc = m.proc.wait(timeout=15)
    except Exception:
        pytest.fail("objmount did not exit within 15 s of %s" % sig.name)
    mounted = is_mounted(m.path)
    log = m.log
    m.unmount(check=False)
    assert not mounted, "%s left %s mounted" % (sig.name, m.path)
    assert rc == 0, "exit status %s after %s:\n%s" % (rc, sig.name, log)


def test_a_signal_with_files_open_ends_the_daemon(mount, bucket, obj, s3client):
    """SIGTERM while a program holds files open for reading and writing: the
    kernel never sends their RELEASE (the session is over), and the daemon
    still exits 0 within the bound. The read pool waited for the open
    handle's object forever (a RELEASE still queued when an unmount aborts
    the connection is lost the same way: the daemon was killed after
    fusermount3 -u in CI)."""
    m = mount(bucket)
    r = os.open(m.join("obj"), os.O_RDONLY)
    w = None
    try:
        assert os.read(r, 4096) == obj[:4096]
        w = os.open(m.join("written"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(w, b"all of it")
        os.fsync(w)
        m.proc.send_signal(signal.SIGTERM)
        try:
            rc = m.proc.wait(timeout=15)
        except Exception:
            pytest.fail("objmount did not exit within 15 s of SIGTERM with files open")
    finally:
        for fd in (r, w):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
    log = m.log
    m.unmount(check=False)
    assert rc == 0, "exit status %s:\n%s" % (rc, log)
    got = s3client.get_object(Bucket=bucket, Key="written")["Body"].read()
    assert got == b"all of it"


def test_daemon_mode_returns_once_mounted(mount, bucket, obj):
    m = mount(bucket, foreground=False)
    assert m.returncode == 0
    assert is_mounted(m.path)
    # ready when the command returned: the first access works
    check_bytes(read_all(m.join("obj")), obj, "obj")
    assert mountlib.daemon_pids(m.path), "no daemon process serves the mount"
    m.unmount(check=True)
    assert not m.killed, "the daemon did not exit after fusermount3 -u"
    assert not mountlib.daemon_pids(m.path)


def test_log_level_debug_mounts_and_logs(mount, bucket, obj):
    m = mount(bucket, "log_level=debug")
    check_bytes(read_all(m.join("obj")), obj, "obj")
    m.unmount(check=True)
    assert m._daemon_out.strip(), "log_level=debug wrote nothing to stderr"


# -- bad input ---------------------------------------------------------------------
@pytest.mark.parametrize("opt", ["no_such_option=1", "frobnicate", "atr_timeout=3"])
def test_unknown_option_is_rejected_by_name(mount, bucket, opt):
    line, _ = expect_failure(mount, bucket, opt)
    assert opt.split("=")[0] in line, line


@pytest.mark.parametrize("opt", ["part_size=banana", "attr_timeout=soon", "log_level=loud",
                                 "retries=-1", "memory_limit=1M", "uid=root", "umask=999"])
def test_bad_option_value_is_rejected_by_name(mount, bucket, opt):
    line, _ = expect_failure(mount, bucket, opt)
    assert opt.split("=")[0] in line, line


@pytest.mark.parametrize("foreground", [True, False], ids=["fg", "daemon"])
def test_missing_bucket_fails_before_mounting(mount, s3server, foreground):
    name = "no-such-bucket-%d" % os.getpid()
    line, secs = expect_failure(mount, name, foreground=foreground)
    assert name in line or re.search(r"(?i)no ?such ?bucket|does not exist|not found", line), line
    assert secs < 15


@pytest.mark.parametrize("foreground", [True, False], ids=["fg", "daemon"])
def test_wrong_secret_fails_before_mounting(mount, bucket, foreground):
    secret = "WrongSecret-Q7Z9"
    line, _ = expect_failure(mount, bucket, foreground=foreground,
                             env={"AWS_SECRET_ACCESS_KEY": secret})
    assert re.search(r"(?i)signature|credential|access ?denied|forbidden|403|secret", line), line
    assert secret not in line


def test_wrong_secret_never_reaches_a_log_line(mount, bucket):
    secret = "WrongSecret-Q7Z9"
    with pytest.raises(MountFailed) as ei:
        mount(bucket, "log_level=debug", env={"AWS_SECRET_ACCESS_KEY": secret}, timeout=30)
    assert ei.value.returncode not in (None, 0)
    assert ei.value.stderr.strip()
    assert secret not in ei.value.stderr


@pytest.mark.parametrize("foreground", [True, False], ids=["fg", "daemon"])
def test_unreachable_endpoint_fails_before_mounting(mount, bucket, foreground):
    port = closed_port()
    line, secs = expect_failure(mount, bucket, "retries=1", foreground=foreground,
                                endpoint="http://127.0.0.1:%d" % port)
    assert re.search(r"(?i)connect|refused|unreachable|reach", line) or str(port) in line, line
    assert secs < 20


def test_missing_mountpoint_fails_clearly(mount, bucket, tmp_path):
    where = str(tmp_path / "does-not-exist")
    line, _ = expect_failure(mount, bucket, mountpoint=where)
    assert "does-not-exist" in line or re.search(r"(?i)no such|mount ?point", line), line
    assert not os.path.exists(where)


def test_mountpoint_that_is_a_file_fails_clearly(mount, bucket, tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"x")
    line, _ = expect_failure(mount, bucket, mountpoint=str(f))
    assert "file" in line or re.search(r"(?i)not a directory|mount ?point", line), line
    assert f.read_bytes() == b"x"


def test_missing_arguments_fail_with_usage():
    p = mountlib.run([], timeout=30)
    assert p.returncode != 0
    assert p.stderr.strip(), "no message for a missing bucket and mount point"
