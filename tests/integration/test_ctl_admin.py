"""objmountctl's bucket and cache commands: uploads list/abort, recover
list/push/drop, doctor.

Orphaned multipart uploads are made with boto3. Recovery entries are made
the way users get them: a mount whose endpoint (the fault proxy) fails every
upload, so close() returns EIO and the bytes go to CACHE_DIR/recovery; then
`recover push` uploads them straight to the server, verified. doctor runs
against the server, with a wrong secret, an unreachable endpoint and a missing
bucket; each failing check is marked FAIL and followed by its fix."""

import errno
import hashlib
import os
import socket

import pytest

from harness import admin
from harness.mount import check_object, payload, wait_for
from harness.trees import exists

FAST = "retry_base=0.02,retry_max=0.2"


def ctl_ok(args, **kw):
    p = admin.ctl(args, **kw)
    assert p.returncode == 0, "objmountctl %s failed (%d):\n%s%s" % (
        " ".join(map(str, args)), p.returncode, p.stdout, p.stderr)
    return p


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- uploads ----------------------------------------------------------------------------------
def listed_uploads(bucket, endpoint, extra=()):
    p = ctl_ok(["uploads", "list", bucket, "-o", "endpoint=%s,%s" % (endpoint, FAST)] +
               list(extra))
    rows = {}
    for ln in p.stdout.splitlines():
        f = ln.split("\t")
        if len(f) >= 2:
            rows[f[1]] = f[0]
    return rows, p.stdout


def server_uploads(s3client, bucket):
    ups = s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return {u["UploadId"]: u["Key"] for u in ups}


def test_uploads_list_and_abort(s3client, bucket, s3server):
    ep = s3server.endpoint
    rows, out = listed_uploads(bucket, ep)
    assert rows == {} and "no multipart uploads" in out, out
    made = {}
    for key in ("a/one.bin", "two.bin", "three.bin"):
        uid = s3client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        made[uid] = key
    first = next(iter(made))
    s3client.upload_part(Bucket=bucket, Key=made[first], UploadId=first, PartNumber=1,
                         Body=b"x" * 1000)
    rows, out = listed_uploads(bucket, ep)
    assert rows == made, out
    rows, out = listed_uploads(bucket, ep, ["--older-than", "1h"])
    assert rows == {}, "uploads made just now listed as older than 1h:\n" + out
    # abort without a filter is refused: it could cut uploads in progress
    p = admin.ctl(["uploads", "abort", bucket, "-o", "endpoint=" + ep])
    line = admin.one_error_line(p, "uploads abort without --older-than")
    assert "--older-than" in line, line
    assert server_uploads(s3client, bucket) == made
    # new uploads survive --older-than 1h
    ctl_ok(["uploads", "abort", bucket, "--older-than", "1h", "-o", "endpoint=" + ep])
    assert server_uploads(s3client, bucket) == made
    # one by key and id
    p = ctl_ok(["uploads", "abort", bucket, "--key", made[first], "--upload-id", first,
                "-o", "endpoint=" + ep])
    assert first in p.stdout, p.stdout
    left = {u: k for u, k in made.items() if u != first}
    assert server_uploads(s3client, bucket) == left
    # the rest with --older-than 0s
    p = ctl_ok(["uploads", "abort", bucket, "--older-than", "0s", "-o", "endpoint=" + ep])
    for u in left:
        assert u in p.stdout, p.stdout
    assert server_uploads(s3client, bucket) == {}
    rows, out = listed_uploads(bucket, ep)
    assert rows == {}, out


# -- recover --------------------------------------------------------------------------------
PERMANENT = {"status": 500, "code": "InternalError", "kind": ["PutObject", "UploadPart"]}


def recovery_rows(cache_dir):
    p = ctl_ok(["recover", "list", "-o", "cache_dir=" + cache_dir])
    rows = {}
    for ln in p.stdout.splitlines():
        f = ln.split("\t")
        if len(f) >= 4:
            rows[f[0]] = f
    return rows, p.stdout


@pytest.fixture
def lost(rw_mount, bucket, faultproxy, cache_dir):
    """Two files whose commits failed for good: {key: bytes}, in recovery."""
    m = rw_mount(bucket, "retries=1,upload_retries=1", endpoint=faultproxy.endpoint)
    os.mkdir(m.join("d"))
    faultproxy.set_faults(errors=PERMANENT)
    files = {"lost1.bin": payload("lost1", 3000), "d/lost2.bin": payload("lost2", 6 << 20)}
    for key, data in files.items():
        fd = os.open(m.join(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
        try:
            os.write(fd, data)
        finally:
            with pytest.raises(OSError) as ei:
                os.close(fd)
        assert ei.value.errno == errno.EIO, ei.value
    staging = os.path.join(cache_dir, "staging")
    assert wait_for(lambda: not os.listdir(staging), 10), os.listdir(staging)
    # the mount counts them in status while it runs
    p = admin.ctl(["status"])
    row = [ln for ln in p.stdout.splitlines() if ln.split(None, 1)[0] == m.path]
    assert row and row[0].split(None, 7)[6] == "2", p.stdout
    assert row[0].split(None, 7)[7] != "-", "no last error after two failed commits: " + row[0]
    faultproxy.reset()
    m.unmount()
    return files


def test_recover_list_push_drop(lost, bucket, s3client, s3server, cache_dir):
    rows, out = recovery_rows(cache_dir)
    assert len(rows) == 2, out
    by_key = {}
    for rid, f in rows.items():
        assert f[2].startswith(bucket + "/"), f
        by_key[f[2][len(bucket) + 1:]] = rid
        assert str(len(lost[f[2][len(bucket) + 1:]])) in f[3], f
    assert set(by_key) == set(lost), out
    assert not exists(s3client, bucket, "lost1.bin")
    # push one, straight to the server
    p = ctl_ok(["recover", "push", by_key["d/lost2.bin"], "-o",
                "cache_dir=%s,endpoint=%s,%s" % (cache_dir, s3server.endpoint, FAST)])
    assert "verified" in p.stdout, p.stdout
    check_object(s3client, bucket, "d/lost2.bin", lost["d/lost2.bin"])
    rows, out = recovery_rows(cache_dir)
    assert list(rows) == [by_key["lost1.bin"]], out
    # drop the other
    p = ctl_ok(["recover", "drop", by_key["lost1.bin"], "-o", "cache_dir=" + cache_dir])
    rows, out = recovery_rows(cache_dir)
    assert rows == {} and "no recovered data" in out, out
    assert os.listdir(os.path.join(cache_dir, "recovery")) == []
    assert not exists(s3client, bucket, "lost1.bin")


def test_recover_push_all(lost, bucket, s3client, s3server, cache_dir):
    o = "cache_dir=%s,endpoint=%s,%s" % (cache_dir, s3server.endpoint, FAST)
    ctl_ok(["recover", "push", "--all", "-o", o])
    for key, data in lost.items():
        check_object(s3client, bucket, key, data)
        md5 = s3client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
        assert md5 == hashlib.md5(data).hexdigest() or "-" in md5
    assert recovery_rows(cache_dir)[0] == {}


@pytest.mark.parametrize("action", ["push", "drop"])
def test_recover_of_an_unknown_id_is_refused(lost, s3server, cache_dir, action):
    o = "cache_dir=%s,endpoint=%s,%s" % (cache_dir, s3server.endpoint, FAST)
    p = admin.ctl(["recover", action, "no-such-id", "-o", o])
    line = admin.one_error_line(p, "recover %s of an unknown id" % action)
    assert "no-such-id" in line, line
    assert len(recovery_rows(cache_dir)[0]) == 2


def test_recover_push_to_a_failing_endpoint_keeps_the_data(lost, bucket, cache_dir):
    o = "cache_dir=%s,endpoint=http://127.0.0.1:%d,%s,retries=1,upload_retries=0" % (
        cache_dir, closed_port(), FAST)
    rows, _ = recovery_rows(cache_dir)
    rid = next(iter(rows))
    p = admin.ctl(["recover", "push", rid, "-o", o], timeout=120)
    admin.one_error_line(p, "recover push to an unreachable endpoint")
    assert rid in recovery_rows(cache_dir)[0], "data dropped after a failed push"


# -- doctor ---------------------------------------------------------------------------------
def doctor(bucket, endpoint, env=None, extra=""):
    o = "endpoint=%s,%s%s" % (endpoint, FAST, "," + extra if extra else "")
    return admin.ctl(["doctor", bucket, "-o", o], env=env, timeout=120)


def checks(out):
    """[(mark, text, fix or None)] of doctor's report."""
    rows = []
    for ln in out.splitlines():
        if ln.startswith("[") and "]" in ln:
            mark, text = ln[1:ln.index("]")].strip(), ln[ln.index("]") + 1:].strip()
            rows.append([mark, text, None])
        elif ln.strip().startswith("fix:") and rows:
            rows[-1][2] = ln.strip()[4:].strip()
    return rows


def assert_ok_lines_clean(rows, out):
    """A check marked ok carries no error."""
    for mark, text, _ in rows:
        if mark == "ok":
            assert not any(w in text for w in ("denied", "Denied", "SignatureDoesNotMatch",
                                               "NoSuchBucket", "works not", "InvalidAccessKey")), \
                "a check marked ok reports a failure: %r\n%s" % (text, out)


def test_doctor_all_ok_against_the_server(bucket, s3server):
    p = doctor(bucket, s3server.endpoint)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = checks(p.stdout)
    assert rows and all(m in ("ok", "info") for m, _, _ in rows), p.stdout
    texts = " | ".join(t for _, t, _ in rows)
    for what in ("reachable", "clock", "credentials accepted", "lists", "path-style",
                 "redirects"):
        assert what in texts, "doctor does not check %r:\n%s" % (what, p.stdout)
    assert_ok_lines_clean(rows, p.stdout)
    assert "all checks passed" in p.stdout


def test_doctor_wrong_secret_fails_credentials_with_a_fix(bucket, s3server):
    p = doctor(bucket, s3server.endpoint, env={"AWS_SECRET_ACCESS_KEY": "wrong-secret"})
    assert p.returncode == 1, p.stdout + p.stderr
    rows = checks(p.stdout)
    failed = [r for r in rows if r[0] == "FAIL"]
    assert any(t.startswith("credentials") for _, t, _ in failed), p.stdout
    assert all(fix for _, _, fix in failed), "a failing check without its fix:\n" + p.stdout
    cred = [r for r in failed if r[1].startswith("credentials")][0]
    assert "secret" in cred[2], cred
    assert "wrong-secret" not in p.stdout + p.stderr, "the secret was printed"
    assert_ok_lines_clean(rows, p.stdout)


def test_doctor_unreachable_endpoint_fails_reachable(bucket):
    port = closed_port()
    p = doctor(bucket, "http://127.0.0.1:%d" % port)
    assert p.returncode == 1, p.stdout + p.stderr
    rows = checks(p.stdout)
    failed = [r for r in rows if r[0] == "FAIL"]
    assert failed and "reachable" in failed[0][1] and failed[0][2], p.stdout
    assert_ok_lines_clean(rows, p.stdout)


def test_doctor_missing_bucket_fails_lists(s3server):
    p = doctor("no-such-bucket-here", s3server.endpoint)
    assert p.returncode == 1, p.stdout + p.stderr
    rows = checks(p.stdout)
    failed = [r for r in rows if r[0] == "FAIL"]
    assert [t for _, t, _ in failed if "no-such-bucket-here" in t and "lists" in t], p.stdout
    assert all(fix for _, _, fix in failed), p.stdout
    cred = [r for r in rows if r[1].startswith("credentials accepted")]
    assert cred and cred[0][0] == "ok" and cred[0][1] == "credentials accepted", p.stdout
    assert_ok_lines_clean(rows, p.stdout)
