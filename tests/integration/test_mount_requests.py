"""What the mount asks the server for: counted by the fault proxy (no faults
on), between objmount and the test server.

Listing primes metadata, so `ls -l`, `find`, os.walk and os.scandir + stat
cost no HEAD per file; small files come in one GET; random reads do not
trigger large prefetch."""

import os
import random
import re
import subprocess
import threading
import time

import pytest

from harness.admin import ctl
from harness.mount import MiB, check_bytes, payload, read_all, seed


def files(prefix, n, size=lambda i: 1000 + i):
    return {"%s/f%03d.jpg" % (prefix, i): payload("%s/%d" % (prefix, i), size(i)) for i in range(n)}


def kinds(fp):
    r = fp.stats()["requests"]["by_kind"]
    return {k: v for k, v in r.items() if v}


@pytest.fixture
def proxied(mount, faultproxy):
    """mount(bucket, opts) through the fault proxy; stats zeroed once mounted."""
    def make(bucket, opts=""):
        m = mount(bucket, opts, endpoint=faultproxy.endpoint)
        faultproxy.reset_stats()
        return m
    return make


def test_ls_l_of_200_files_costs_no_head_per_file(proxied, faultproxy, bucket, s3client):
    objects = files("imgs", 200)
    objects.update({"imgs/sub%d/x" % i: b"x" for i in range(3)})
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    with os.scandir(m.join("imgs")) as it:
        entries = list(it)
    assert len(entries) == 203
    for e in entries:
        st = e.stat()
        if e.is_file():
            assert st.st_size == len(objects["imgs/" + e.name])
        os.stat(e.path)
        os.lstat(e.path)
    p = subprocess.run(["ls", "-l", m.join("imgs")], capture_output=True, timeout=60)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 204, p.stderr
    seen = kinds(faultproxy)
    assert seen.get("HeadObject", 0) <= 3, "HEAD per file? %s" % seen
    assert seen.get("ListObjectsV2", 0) <= 4, seen
    assert seen.get("GetObject", 0) == 0, seen


def test_a_folder_the_kernel_forgot_is_listed_again_only_when_stale(
        proxied, faultproxy, bucket, s3client):
    """drop_caches makes the kernel forget the folder's inode (as memory
    pressure does between epochs): with profile=training (listings trusted
    for a day) listing and reading it again costs no LIST; with a 1 s
    entry_timeout, once that passed, it is listed again."""
    objects = files("ep/set", 120)
    seed(s3client, bucket, objects)
    for opts, stale_after in (("profile=training", 0), ("entry_timeout=1,attr_timeout=1", 1.5)):
        m = proxied(bucket, opts)
        folder = m.join("ep/set")
        assert len(os.listdir(folder)) == 120
        faultproxy.reset_stats()
        if stale_after:
            time.sleep(stale_after)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")  # dentries and inodes
        assert sorted(os.listdir(folder)) == sorted(os.path.basename(k) for k in objects)
        for k in sorted(objects)[:5]:
            check_bytes(read_all(m.join(k)), objects[k], k)
        seen = kinds(faultproxy)
        assert (seen.get("ListObjectsV2", 0) > 0) == bool(stale_after), (opts, seen)
        m.unmount()


def test_a_training_mount_starts_with_its_root_listed(mount, faultproxy, bucket, s3client):
    """The bucket check is the first page of the root's listing; with
    listings trusted long (profile=training) the mount keeps it, so the
    first `ls` of the root and the lookup of a data set's folder after a
    remount cost no LIST (one of the two a remounted epoch waited for). A
    prefix mount keeps its prefix's names; a root of more than one page,
    and the default 10 s entry_timeout (a name added just after the mount
    is found), keep nothing."""
    objects = files("ds", 3)
    objects.update({"top.bin": b"t" * 100, "pre/sub/a": b"a", "pre/b": b"bb"})
    seed(s3client, bucket, objects)
    for opts, prefix, names in (("profile=training", None, ["ds", "pre", "top.bin"]),
                                ("profile=training", "pre", ["b", "sub"])):
        m = mount(bucket, opts, prefix=prefix, endpoint=faultproxy.endpoint)
        seen = kinds(faultproxy)
        assert seen.get("ListObjectsV2", 0) == 1, seen  # the check
        faultproxy.reset_stats()
        assert sorted(os.listdir(m.path)) == names
        first = os.path.join(m.path, names[0])
        assert os.path.isdir(first) == (names[0] in ("ds", "sub"))
        assert not os.path.exists(m.join("missing"))
        seen = kinds(faultproxy)
        assert seen.get("ListObjectsV2", 0) == 0 and seen.get("HeadObject", 0) == 0, seen
        m.unmount()
    # default entry_timeout: a name added after the mount is found at once
    m = mount(bucket, "", endpoint=faultproxy.endpoint)
    seed(s3client, bucket, {"late.bin": b"late"})
    check_bytes(read_all(m.join("late.bin")), b"late", "late.bin")
    m.unmount()
    # more than one page at the root: listed by the mount as before
    seed(s3client, bucket, {"r%04d" % i: b"r" for i in range(1001)})
    m = mount(bucket, "profile=training", endpoint=faultproxy.endpoint)
    faultproxy.reset_stats()
    assert len(os.listdir(m.path)) == 1001 + 4
    assert kinds(faultproxy).get("ListObjectsV2", 0) >= 2
    m.unmount()


def test_walk_and_find_cost_no_head_per_file(proxied, faultproxy, bucket, s3client):
    objects = {}
    for d in ("t/a", "t/a/b", "t/c", "t/d/e"):
        objects.update(files(d, 30))
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    n = 0
    for root, dirs, fnames in os.walk(m.join("t")):
        for f in fnames:
            rel = os.path.relpath(os.path.join(root, f), m.path)
            assert os.stat(os.path.join(root, f)).st_size == len(objects[rel])
            n += 1
    assert n == len(objects)
    p = subprocess.run(["find", m.join("t"), "-ls"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    seen = kinds(faultproxy)
    ndirs = 6  # t, t/a, t/a/b, t/c, t/d, t/d/e
    assert seen.get("HeadObject", 0) <= 3, "HEAD per file? %s" % seen
    assert seen.get("ListObjectsV2", 0) <= 3 * ndirs, seen
    assert seen.get("GetObject", 0) == 0, seen


def test_cold_stat_costs_one_head_and_one_list_at_most(proxied, faultproxy, bucket, s3client):
    seed(s3client, bucket, {"cold.bin": payload("cold", 5000)})
    m = proxied(bucket)
    assert os.stat(m.join("cold.bin")).st_size == 5000
    seen = kinds(faultproxy)
    assert seen.get("HeadObject", 0) <= 1 and seen.get("ListObjectsV2", 0) <= 1, seen
    before = faultproxy.requests_seen()
    for _ in range(5):  # within the attribute timeout: no request
        os.stat(m.join("cold.bin"))
    assert faultproxy.requests_seen() == before, kinds(faultproxy)


def test_missing_name_is_remembered(proxied, faultproxy, bucket):
    m = proxied(bucket)
    for _ in range(2):
        with pytest.raises(FileNotFoundError):
            os.stat(m.join("missing.bin"))
        if _ == 0:
            first = faultproxy.requests_seen()
            assert first <= 2, kinds(faultproxy)
    assert faultproxy.requests_seen() == first, "negative entry not cached: %s" % kinds(faultproxy)


def test_small_file_is_fetched_with_one_get(proxied, faultproxy, bucket, s3client):
    data = payload("small", 110000)
    seed(s3client, bucket, {"img.jpg": data})
    m = proxied(bucket)
    fd = os.open(m.join("img.jpg"), os.O_RDONLY)
    try:
        got = [os.pread(fd, 4096, off) for off in range(0, len(data), 4096)]
    finally:
        os.close(fd)
    check_bytes(b"".join(got), data, "img.jpg")
    assert faultproxy.requests_seen(kind="GetObject") == 1, kinds(faultproxy)


def test_reopen_of_unchanged_file_keeps_page_cache(proxied, faultproxy, bucket, s3client):
    data = payload("reopen", 3 * MiB + 5)
    seed(s3client, bucket, {"r.bin": data})
    m = proxied(bucket)
    check_bytes(read_all(m.join("r.bin")), data, "first read")
    gets = faultproxy.requests_seen(kind="GetObject")
    sent = faultproxy.stats()["bytes"]["to_clients"]
    for i in range(3):
        check_bytes(read_all(m.join("r.bin")), data, "reopen %d" % i)
    assert faultproxy.requests_seen(kind="GetObject") == gets, kinds(faultproxy)
    assert faultproxy.stats()["bytes"]["to_clients"] - sent < 64 * 1024


def test_random_reads_do_not_prefetch_much(proxied, faultproxy, bucket, s3client):
    size = 64 * MiB
    data = payload("random-big", size)
    seed(s3client, bucket, {"big.bin": data})
    m = proxied(bucket)
    rng = random.Random(5)
    fd = os.open(m.join("big.bin"), os.O_RDONLY)
    try:
        for _ in range(16):
            off = rng.randrange(0, size - 4096) & ~4095
            check_bytes(os.pread(fd, 4096, off), data[off:off + 4096], "pread at %d" % off)
    finally:
        os.close(fd)
    sent = faultproxy.stats()["bytes"]["to_clients"]
    assert sent < 16 * 2 * MiB, "16 random 4 KiB reads fetched %.1f MiB" % (sent / MiB)


def test_sequential_read_of_large_object_uses_ranged_gets(proxied, faultproxy, bucket, s3client):
    size = 40 * MiB + 3
    data = payload("seq-big", size)
    seed(s3client, bucket, {"seq.bin": data})
    m = proxied(bucket, "part_size=5M")
    check_bytes(read_all(m.join("seq.bin")), data, "seq.bin")
    gets = faultproxy.requests_seen(kind="GetObject")
    assert gets >= 8, "a 40 MiB sequential read in %d GETs (part_size=5M)" % gets
    sent = faultproxy.stats()["bytes"]["to_clients"]
    assert sent < size * 1.25, "fetched %.1f MiB for a %.1f MiB object" % (sent / MiB, size / MiB)


def test_opening_small_files_by_name_costs_one_get_each(proxied, faultproxy, bucket, s3client):
    """A loader opens files by name (no readdir): the lookup of a small
    object fetches it whole, so the open and read that follow cost nothing
    more: one request per file, where a HEAD and a GET would be two."""
    objects = files("train", 40, size=lambda i: 100000 + 997 * i)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    for k in sorted(objects):
        check_bytes(read_all(m.join(k)), objects[k], k)
    seen = kinds(faultproxy)
    assert seen.get("GetObject", 0) == len(objects), seen
    assert seen.get("HeadObject", 0) <= 1, "a HEAD per file? %s" % seen  # train/'s marker
    assert seen.get("ListObjectsV2", 0) <= 2, seen
    # stat alone shows the object's size and the stored mode
    s3client.put_object(Bucket=bucket, Key="train/moded.bin", Body=b"z" * 3000,
                        Metadata={"mode": str(0o100600)})
    m.unmount()
    m2 = proxied(bucket)
    st = os.stat(m2.join("train/moded.bin"))
    assert st.st_size == 3000 and st.st_mode == 0o100600, (st.st_size, oct(st.st_mode))
    check_bytes(read_all(m2.join("train/moded.bin")), b"z" * 3000, "moded.bin")


def test_lookups_in_one_directory_run_in_parallel(proxied, faultproxy, bucket, s3client):
    """Eight threads opening files of one folder have their lookups in
    flight together (the kernel is told FUSE_PARALLEL_DIROPS, which libfuse
    before 3.16 never passes on): with a slow server the proxy sees several
    requests at once, not one after another."""
    objects = files("one", 24, size=lambda i: 20000 + i)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    os.stat(m.join("one/" + os.path.basename(sorted(objects)[0])))  # lists one/
    faultproxy.set_faults(latency={"first_byte_ms": 300})
    faultproxy.reset_stats()
    names = sorted(objects)
    errors = []

    def reader(k):
        try:
            for name in names[k::8]:
                check_bytes(read_all(m.join(name)), objects[name], name)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    peak = faultproxy.stats()["requests"]["peak_in_flight"]
    assert peak >= 4, "at most %d requests in flight for 8 readers of one folder" % peak


def test_a_walk_lists_directories_ahead_and_each_once(proxied, faultproxy, bucket, s3client):
    """find opens the directories it has listed one after the other: the
    mount lists the next ones in the background while find works, and never
    twice. Opening one directory by name is not a walk: nothing else is
    listed."""
    objects = {}
    for top in "abcdef":
        for sub in "xyz":
            objects.update(files("t/%s/%s" % (top, sub), 3, size=lambda i: 100 + i))
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    assert sorted(os.listdir(m.join("t", "c", "y"))) == ["f000.jpg", "f001.jpg", "f002.jpg"]
    seen = kinds(faultproxy)
    assert seen.get("ListObjectsV2", 0) <= 4, "one directory opened by name: %s" % seen
    m.unmount()
    m = proxied(bucket)
    p = subprocess.run(["find", m.join("t"), "-type", "f"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    got = sorted(os.path.relpath(x, m.path) for x in p.stdout.split("\n") if x)
    assert got == sorted(objects)
    ndirs = 1 + 6 + 6 * 3
    seen = kinds(faultproxy)
    assert seen.get("ListObjectsV2", 0) <= ndirs + 1, "a directory listed twice: %s" % seen
    assert seen.get("HeadObject", 0) <= 1, seen
    stats = ctl(["stats", m.path]).stdout
    ahead = re.search(r"directories listed ahead of walks (\d+) \((\d+) then opened\)", stats)
    assert ahead and int(ahead.group(1)) >= 10 and int(ahead.group(2)) >= 10, stats


def test_stat_only_lookups_stop_fetching_bodies(proxied, faultproxy, bucket, s3client):
    """With metadata=head, ls -l looks every name up. A lookup reads a small
    object whole only while lookups are followed by opens: after a window of
    stat-only lookups it HEADs, and opens bring the single GETs back."""
    a = files("a", 200, size=lambda i: 50000 + i)
    b = files("b", 100, size=lambda i: 50000 + i)
    seed(s3client, bucket, dict(a, **b))
    m = proxied(bucket, "metadata=head")
    subprocess.run(["ls", "-l", m.join("a")], check=True, capture_output=True)
    seen = kinds(faultproxy)
    assert seen.get("GetObject", 0) <= 40, "ls -l read bodies: %s" % seen
    assert seen.get("HeadObject", 0) >= 160, seen
    faultproxy.reset_stats()
    for name in sorted(b):
        check_bytes(read_all(m.join(name)), b[name], name)
    seen = kinds(faultproxy)
    assert seen.get("GetObject", 0) == len(b), seen
    assert seen.get("HeadObject", 0) <= 64, "opens did not bring lookup GETs back: %s" % seen
    stats = ctl(["stats", m.path]).stdout
    heads = re.search(r"(\d+) HEADed instead", stats)
    assert heads and int(heads.group(1)) >= 160, stats
