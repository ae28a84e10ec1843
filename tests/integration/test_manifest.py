"""Manifest mounts (-o manifest=): `objmountctl manifest build` lists a bucket
once; a mount with the manifest walks and stats it without one LIST or
HEAD (counted by the fault proxy), reads the same bytes as the bucket, and
refuses to hand out anything but the manifest's version of an object."""

import os
import subprocess

import pytest

from harness.admin import ctl
from harness.mount import MountFailed, check_bytes, daemon_env, payload, read_all, seed
from harness.omtools import tool


def dataset():
    """A few hundred keys in nested directories, odd names included."""
    objects = {}
    for a in range(3):
        for b in range(4):
            for k in range(25):
                key = "ds/part%d/group %d/sample_%03d.bin" % (a, b, k)
                objects[key] = payload(key, 100 + (a * 1000 + b * 100 + k) % 3000)
    for k in range(20):
        objects["ds/top_%02d.txt" % k] = payload("top%d" % k, 10 + k)
    objects["ds/caf\u00e9/\u65e5\u672c.txt"] = b"unicode"
    objects["readme.md"] = b"hello"
    return objects


def kinds(fp):
    r = fp.stats()["requests"]["by_kind"]
    return {k: v for k, v in r.items() if v}


def build(s3server, bucket, out, source=None, threads=4):
    p = ctl(["manifest", "build", source or bucket, "-o", "endpoint=" + s3server.endpoint,
             "--threads", threads, "--output", out])
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def seeded(s3client, bucket):
    objects = dataset()
    seed(s3client, bucket, objects)
    return objects


def tree(root):
    """{relative path: size} of every file under root, by os.walk and stat."""
    found = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            found[os.path.relpath(p, root)] = os.stat(p).st_size
    return found


def test_build_and_show(s3server, bucket, seeded, tmp_path):
    out = str(tmp_path / "ds.manifest")
    p = build(s3server, bucket, out)
    assert "%d keys" % len(seeded) in p.stderr
    show = ctl(["manifest", "show", out])
    assert show.returncode == 0, show.stderr
    assert "keys        %d " % len(seeded) in show.stdout, show.stdout
    assert "source      %s:" % bucket in show.stdout
    assert "first level 1 objects, 1 directories" in show.stdout, show.stdout
    keys = ctl(["manifest", "show", out, "--keys"])
    lines = keys.stdout.splitlines()
    assert [ln.split("\t")[3] for ln in lines] == sorted(seeded, key=lambda k: k.encode())
    assert all(int(ln.split("\t")[0]) == len(seeded[ln.split("\t")[3]]) for ln in lines)
    # to stdout: a pipe, a file, a file appended to
    (tmp_path / "appended").write_bytes(b"")
    for name, redirect in (("piped", '| cat > "$3"'), ("file", '> "$3"'),
                           ("appended", '>> "$3"')):
        p = subprocess.run(["bash", "-c", '"$0" manifest build "$1" -o "endpoint=$2" ' + redirect,
                            tool("objmountctl"), bucket, s3server.endpoint,
                            str(tmp_path / name)],
                           env=daemon_env(), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        again = ctl(["manifest", "show", str(tmp_path / name)])
        assert "keys        %d " % len(seeded) in again.stdout, name + again.stdout + again.stderr


def test_walk_costs_no_list_and_no_head(s3server, mount, faultproxy, bucket, seeded, tmp_path,
                                        cache_dir):
    out = str(tmp_path / "ds.manifest")
    build(s3server, bucket, out)
    m = mount(bucket, "manifest=%s,cache_dir=%s" % (out, cache_dir),
              endpoint=faultproxy.endpoint)
    faultproxy.reset_stats()
    assert tree(m.path) == {k: len(v) for k, v in seeded.items()}
    p = subprocess.run(["ls", "-lR", m.path], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(["find", m.path, "-type", "f"], capture_output=True, timeout=60)
    assert len(p.stdout.splitlines()) == len(seeded)
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("ds", "no such file"))
    assert faultproxy.requests_seen() == 0, kinds(faultproxy)
    # read-only
    with pytest.raises(OSError):
        open(m.join("ds", "new.txt"), "wb")
    for key, want in seeded.items():
        check_bytes(read_all(m.join(key)), want, key)
    seen = kinds(faultproxy)
    assert set(seen) == {"GetObject"}, seen


def test_changed_and_deleted_objects_are_errors(s3server, mount, s3client, bucket, seeded,
                                                tmp_path, cache_dir):
    out = str(tmp_path / "ds.manifest")
    build(s3server, bucket, out)
    changed, same_size, deleted = ("ds/top_03.txt", "ds/part1/group 2/sample_007.bin",
                                   "ds/top_04.txt")
    s3client.put_object(Bucket=bucket, Key=changed, Body=b"new bytes, another size")
    flipped = bytes(b ^ 0xFF for b in seeded[same_size])  # same size, other bytes
    s3client.put_object(Bucket=bucket, Key=same_size, Body=flipped)
    s3client.delete_object(Bucket=bucket, Key=deleted)
    m = mount(bucket, "manifest=%s,cache_dir=%s" % (out, cache_dir))
    # the manifest's sizes stay what stat shows
    assert os.stat(m.join(changed)).st_size == len(seeded[changed])
    for key in (changed, same_size, deleted):
        for _ in range(2):  # the second attempt fails too: attributes stay the manifest's
            with pytest.raises(OSError) as e:
                read_all(m.join(key))
            assert e.value.errno in (5, 2, 116), e.value  # EIO, ENOENT, ESTALE
    log = m.log
    assert "%s: the object changed since the manifest was built" % same_size in log, log
    assert "%s: the object is gone (deleted since the manifest was built)" % deleted in log, log
    # the others still read
    check_bytes(read_all(m.join("ds/top_05.txt")), seeded["ds/top_05.txt"], "unchanged")


def test_damaged_or_foreign_manifest_refuses_the_mount(s3server, mount, bucket, seeded, tmp_path,
                                                       s3client, cache_dir):
    out = tmp_path / "ds.manifest"
    build(s3server, bucket, str(out))
    good = out.read_bytes()
    cases = {
        "checksum mismatch": good[:200] + bytes([good[200] ^ 1]) + good[201:],
        "truncated": good[:len(good) // 2],
        "not an objmount manifest": b"just some text\n" * 10,
    }
    for why, data in cases.items():
        bad = tmp_path / "bad"
        bad.write_bytes(data)
        with pytest.raises(MountFailed) as e:
            mount(bucket, "manifest=%s,cache_dir=%s" % (bad, cache_dir))
        assert why in e.value.stderr, e.value.stderr
        assert str(bad) in e.value.stderr
    other = "%s-other" % bucket[:40]
    s3client.create_bucket(Bucket=other)
    with pytest.raises(MountFailed) as e:
        mount(other, "manifest=%s,cache_dir=%s" % (out, cache_dir))
    assert "was built from %s:" % bucket in e.value.stderr, e.value.stderr
    with pytest.raises(MountFailed) as e:
        mount(bucket, "manifest=%s,cache_dir=%s,rw" % (out, cache_dir))
    assert "read-only" in e.value.stderr, e.value.stderr


def test_manifest_in_the_bucket_costs_one_get(s3server, mount, faultproxy, s3client, bucket,
                                              seeded, tmp_path, cache_dir):
    out = tmp_path / "ds.manifest"
    build(s3server, bucket, str(out), source=bucket + ":ds")
    s3client.put_object(Bucket=bucket, Key="manifests/ds.omm", Body=out.read_bytes())
    faultproxy.reset_stats()
    m = mount(bucket, "manifest=s3:manifests/ds.omm,cache_dir=%s" % cache_dir, prefix="ds",
              endpoint=faultproxy.endpoint)
    assert kinds(faultproxy) == {"GetObject": 1}, kinds(faultproxy)
    want = {k[3:]: len(v) for k, v in seeded.items() if k.startswith("ds/")}
    assert tree(m.path) == want
    assert kinds(faultproxy) == {"GetObject": 1}, kinds(faultproxy)
    assert os.listdir(os.path.join(cache_dir, "manifests"))
    # a manifest of ds/ cannot serve the whole bucket
    with pytest.raises(MountFailed) as e:
        mount(bucket, "manifest=s3:manifests/ds.omm,cache_dir=%s" % cache_dir)
    assert "does not hold the mount" in e.value.stderr, e.value.stderr
