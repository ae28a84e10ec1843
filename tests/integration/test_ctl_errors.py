"""Bad input to every objmountctl subcommand: one clear line on stderr that
names what was wrong, and a non-zero exit status. No mount is needed except
where a live one makes the input bad in a new way."""

import os
import socket

import pytest

from harness import admin


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def ep(s3server):
    return "endpoint=%s,retry_base=0.02,retry_max=0.2" % s3server.endpoint


def cases(bucket, ep, cache_dir, tmp_path):
    """[(id, argv, words the message must contain)]"""
    loose = admin.write_credentials(str(tmp_path / "loose"), mode=0o644)
    unreachable = "endpoint=http://127.0.0.1:%d,retry_base=0.02,retry_max=0.2" % closed_port()
    fresh = str(tmp_path / "fresh-cache")  # no recovery/ yet
    os.makedirs(os.path.join(cache_dir, "recovery"), exist_ok=True)
    return [
        ("unknown-command", ["frobnicate"], ["frobnicate"]),
        ("status-unknown-option", ["status", "--bogus"], ["--bogus"]),
        ("stats-not-a-mount", ["stats", "/tmp"], ["/tmp", "not an objmount mount"]),
        ("stats-missing-path", ["stats", "/no/such/dir"], ["/no/such/dir"]),
        ("stats-unknown-option", ["stats", "/tmp", "--bogus"], ["--bogus"]),
        ("unmount-not-a-mount", ["unmount", "/tmp"], ["/tmp", "not an objmount mount"]),
        ("unmount-bad-timeout", ["unmount", "/tmp", "--timeout", "soon"], ["--timeout"]),
        ("uploads-bad-duration", ["uploads", "list", bucket, "--older-than", "5x", "-o", ep],
         ["5x"]),
        ("uploads-abort-bad-duration",
         ["uploads", "abort", bucket, "--older-than", "yesterday", "-o", ep], ["yesterday"]),
        ("uploads-unknown-option", ["uploads", "list", bucket, "-o", ep + ",bogus_opt=1"],
         ["bogus_opt"]),
        ("uploads-unknown-action", ["uploads", "purge", bucket, "-o", ep], ["purge"]),
        ("uploads-loose-credentials",
         ["uploads", "list", bucket, "-o", ep + ",credentials=" + loose], ["chmod", loose]),
        ("uploads-unreachable", ["uploads", "list", bucket, "-o", unreachable], ["127.0.0.1"]),
        ("uploads-missing-bucket", ["uploads", "list", "no-such-bucket-x", "-o", ep],
         ["no-such-bucket-x"]),
        ("recover-unknown-action", ["recover", "fix", "-o", "cache_dir=" + cache_dir], ["fix"]),
        ("recover-unknown-action-fresh-cache", ["recover", "fix", "-o", "cache_dir=" + fresh],
         ["fix"]),
        ("recover-push-without-ids", ["recover", "push", "-o", "cache_dir=" + cache_dir],
         ["--all"]),
        ("recover-unknown-option", ["recover", "list", "-o", "bogus_opt=1"], ["bogus_opt"]),
        ("doctor-unknown-option", ["doctor", bucket, "-o", ep + ",bogus_opt=1"], ["bogus_opt"]),
        ("doctor-missing-bucket-arg", ["doctor", "-o", ep], ["doctor"]),
        ("o-without-options", ["status", "-o"], ["-o"]),
    ]


@pytest.mark.parametrize("case", [
    "status-unknown-option", "stats-not-a-mount", "stats-missing-path",
    "stats-unknown-option", "unmount-not-a-mount", "unmount-bad-timeout", "uploads-bad-duration",
    "uploads-abort-bad-duration", "uploads-unknown-option",
    "uploads-loose-credentials", "uploads-unreachable", "uploads-missing-bucket",
    "recover-unknown-action", "recover-unknown-action-fresh-cache", "recover-push-without-ids",
    "recover-unknown-option", "doctor-unknown-option", "o-without-options"])
def test_bad_input_gives_one_clear_line(case, bucket, ep, cache_dir, tmp_path):
    table = {c[0]: c for c in cases(bucket, ep, cache_dir, tmp_path)}
    _, argv, words = table[case]
    p = admin.ctl(argv, timeout=60)
    line = admin.one_error_line(p, "objmountctl " + " ".join(argv))
    for w in words:
        assert w in line, "objmountctl %s: %r does not name %r" % (" ".join(argv), line, w)
    assert p.returncode in (1, 2), p.returncode


@pytest.mark.parametrize("case", ["unknown-command", "uploads-unknown-action",
                                  "doctor-missing-bucket-arg"])
def test_usage_errors_exit_2_and_name_what_is_wrong(case, bucket, ep, cache_dir, tmp_path):
    """A wrong command word may come with the usage text, but the first line
    says what was wrong."""
    table = {c[0]: c for c in cases(bucket, ep, cache_dir, tmp_path)}
    _, argv, words = table[case]
    p = admin.ctl(argv)
    assert p.returncode == 2, (p.returncode, p.stderr)
    first = p.stderr.strip().splitlines()[0] if p.stderr.strip() else ""
    for w in words:
        assert w in first, "objmountctl %s: the first line %r does not name %r" % (
            " ".join(argv), first, w)


def test_doctor_refuses_loose_credentials_with_a_chmod_fix(bucket, ep, tmp_path):
    loose = admin.write_credentials(str(tmp_path / "loose"), mode=0o644)
    p = admin.ctl(["doctor", bucket, "-o", ep + ",credentials=" + loose])
    assert p.returncode == 1, p.stdout + p.stderr
    fails = [ln for ln in p.stdout.splitlines() if ln.startswith("[FAIL]")]
    assert len(fails) == 1 and "chmod 600 " + loose in fails[0], p.stdout


def test_stats_of_a_directory_inside_a_mount_is_not_a_mount(rw_mount, bucket, s3client):
    s3client.put_object(Bucket=bucket, Key="d/f", Body=b"x")
    m = rw_mount(bucket)
    assert admin.wait_socket(m.path)
    p = admin.ctl(["stats", m.join("d")])
    line = admin.one_error_line(p, "stats of a subdirectory")
    assert "not an objmount mount" in line, line
    assert admin.ctl(["stats", m.path + "/"]).returncode == 0, "a trailing slash is refused"


def test_help_exits_0_and_lists_every_command():
    p = admin.ctl(["--help"])
    assert p.returncode == 0, p.stderr
    for cmd in ("status", "stats", "unmount", "uploads", "recover", "doctor", "cache"):
        assert cmd in p.stdout, p.stdout
