"""objmountctl status --json and stats --json: valid JSON, one object per
mount, the numbers the mount really has, every field documented in
doc/json.md (and every documented field present), a mount whose daemon is
gone listed as not answering.

Other objmount mounts may exist on the machine (other test runs); checks
look only at the objects of the mounts made here."""

import json
import os
import re
import signal

from harness import admin
from harness.mount import payload, read_all, seed, wait_for

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "doc", "json.md")


def documented():
    """Field paths named in the tables of doc/json.md (`a`, `a.b`, `a[].b`)."""
    names = set()
    for ln in open(DOC, encoding="utf-8"):
        m = re.match(r"^\| `([a-z0-9_.\[\]]+)` \|", ln)
        if m:
            names.add(m.group(1))
    return names


def paths(obj, prefix=""):
    """Every field path of a JSON value, in doc/json.md's notation."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = prefix + k
            out.add(p)
            out |= paths(v, p + ".")
    elif isinstance(obj, list):
        for v in obj:
            out |= paths(v, prefix[:-1] + "[].")
    return out


def ctl_json(args):
    p = admin.ctl(args)
    # (exit 1 when some mount on the machine does not answer: another run's may not)
    assert p.returncode in (0, 1), "%s failed (%d): %s" % (args, p.returncode, p.stderr)
    assert p.stdout.endswith("\n") and p.stdout.count("\n") == 1, p.stdout[:500]
    return json.loads(p.stdout)


def mine(array, mountpoint):
    found = [o for o in array if o.get("mountpoint") == mountpoint]
    assert len(found) <= 1, found
    return found[0] if found else None


def live(rw_mount, bucket, **kw):
    m = rw_mount(bucket, **kw)
    assert admin.wait_socket(m.path), "no admin socket for %s" % m.path
    return m


def test_status_json_has_one_object_per_mount(rw_mount, bucket, s3client, s3server):
    seed(s3client, bucket, {"p/r.bin": payload("js-r", 5000)})
    m1 = live(rw_mount, bucket)
    m2 = live(rw_mount, bucket, prefix="p/")
    wf = open(m1.join("w.bin"), "wb")
    try:
        wf.write(b"abc")
        arr = ctl_json(["status", "--json"])
        assert isinstance(arr, list)
        s1, s2 = mine(arr, m1.path), mine(arr, m2.path)
        assert s1 and s2, arr
        assert s1["bucket"] == bucket and s1["prefix"] == "" and s2["prefix"].strip("/") == "p"
        assert s1["endpoint"] == s3server.endpoint
        assert s1["answering"] is True and s1["read_only"] is False
        assert s1["open_files"] == 1 and s1["open_writers"] == 1 and s2["open_files"] == 0
        assert s1["commits_in_flight"] == 0 and s1["recovery_files"] == 0
        assert s1["pid"] == m1.proc.pid and 0 <= s1["uptime_s"] < 120
        assert s1["last_error"] is None and s1["last_error_time"] is None, s1
        assert paths(s1) <= documented(), paths(s1) - documented()
    finally:
        wf.close()
    m2.unmount()
    assert mine(ctl_json(["status", "--json"]), m2.path) is None


def test_stats_json_counts_what_the_mount_did(rw_mount, bucket, s3client, faultproxy):
    """The counts are the mount's real ones: each operation's requests as
    many as the proxy in front of the server saw of that kind, and exact
    numbers for the work the test did (one file of 300,000 bytes read, one
    of 3 bytes written)."""
    want = payload("js-stats", 300000)
    s3client.put_object(Bucket=bucket, Key="f.bin", Body=want)
    m = live(rw_mount, bucket, opts="data_cache=64M,shards=tar",  # every field present
             endpoint=faultproxy.endpoint)
    # from here on: what the mount counts against what the proxy sees (the
    # bucket check before the mount is made by a client of its own)
    before = ctl_json(["stats", m.path, "--json"])
    faultproxy.reset_stats()
    assert read_all(m.join("f.bin")) == want
    with open(m.join("new"), "wb") as f:
        f.write(b"new")
    assert wait_for(lambda: ctl_json(["stats", m.path, "--json"])["data_cache"]["in_flight"] == 0)
    one = ctl_json(["stats", m.path, "--json"])
    seen = faultproxy.stats()["requests"]
    assert one["mountpoint"] == m.path and one["bucket"] == bucket
    ops = {o["op"]: o for o in one["operations"]}
    ops0 = {o["op"]: o["requests"] for o in before["operations"]}
    # every request the proxy saw, counted under its operation, and no other
    done = {op: o["requests"] - ops0.get(op, 0) for op, o in ops.items()}
    assert {op: n for op, n in done.items() if n} == seen["by_kind"], (done, seen)
    assert one["requests"]["total"] - before["requests"]["total"] == seen["total"], \
        (one["requests"], before["requests"], seen)
    assert one["requests"]["short_bodies"] == 0 and one["requests"]["retries"] == 0
    assert done["GetObject"] == 1 and done["PutObject"] == 1, done
    assert ops["GetObject"]["received_bytes"] == len(want), ops["GetObject"]
    assert ops["GetObject"]["latency_p50_ms"] <= ops["GetObject"]["latency_p99_ms"]
    # (a file this small comes whole with its lookup: no reads.gets of its own)
    assert one["reads"]["read_bytes"] == len(want), one["reads"]
    w = one["writes"]
    assert (w["commits"], w["uploaded_bytes"], w["part_uploads"], w["commit_failures"]) == \
        (1, 3, 0, 0), w
    assert one["memory"]["resident_bytes"] > 0 and one["recovery_files"] == 0
    dc = one["data_cache"]
    assert dc["limit_bytes"] == 64 << 20 and dc["storing"] is True, dc
    # each file is one block of the cache, stored once: the one read and
    # the one written; nothing was read from the cache
    assert (dc["inserts"], dc["insert_bytes"], dc["blocks"], dc["hits"]) == \
        (2, len(want) + 3, 2, 0), dc
    # every field is documented, and every documented stats field is there
    doc = documented()
    got = paths(one)
    assert got <= doc, "undocumented: %s" % sorted(got - doc)
    status_only = {"answering", "open_files", "open_writers", "commits_in_flight", "cache_dir",
                   "read_only", "last_error", "last_error_time", "source", "error"}
    assert doc - status_only <= got, "documented but missing: %s" % sorted(doc - status_only - got)
    # the array form holds the same mount, with the same counts (nothing
    # was done meanwhile)
    again = mine(ctl_json(["stats", "--json"]), m.path)
    assert again and again["requests"]["total"] == one["requests"]["total"], again


def test_stats_json_read_only_mount_has_null_writes(mount, bucket):
    m = mount(bucket, "ro")
    assert admin.wait_socket(m.path)
    one = ctl_json(["stats", m.path, "--json"])
    assert one["writes"] is None
    assert one["data_cache"] is None  # not asked for
    assert one["shards"] is None
    assert mine(ctl_json(["status", "--json"]), m.path)["read_only"] is True


def test_a_mount_whose_daemon_died_is_listed_as_not_answering(rw_mount, bucket):
    m = live(rw_mount, bucket)
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait(10)
    try:
        o = mine(ctl_json(["status", "--json"]), m.path)
        assert o == {"mountpoint": m.path, "source": bucket, "answering": False,
                     "error": o["error"]}, o
        assert o["error"], o
        p = admin.ctl(["status", "--json"])
        assert p.returncode == 1
        assert mine(ctl_json(["stats", "--json"]), m.path)["answering"] is False
    finally:
        m.unmount(check=False)


def test_json_and_prometheus_together_are_refused():
    p = admin.ctl(["stats", "/nonexistent", "--json", "--prometheus"])
    assert p.returncode != 0 and "choose one" in p.stderr, p.stderr
