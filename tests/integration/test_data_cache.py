"""The data cache (-o data_cache=): bytes identical across epochs and
remounts, no GET for a cached data set after a remount with
profile=training, a changed object never served from old blocks, corrupt,
truncated and foreign blocks dropped and fetched again, kill -9 during a
fill, two mounts sharing one cache_dir under one bound, a scan 1.5x the
cache keeping more than half, a full disk, loose permissions, bad
options."""

import glob
import os
import signal
import subprocess

import pytest

from harness import admin
from harness.mount import MiB, MountFailed, daemon_pids, payload, seed, wait_for

HDR = 64


def stats(m):
    return admin.stats_json(m.path)


def live(rw_mount, bucket, opts, **kw):
    m = rw_mount(bucket, opts, **kw)
    assert admin.wait_socket(m.path), "no admin socket for %s" % m.path
    return m


def read_tree(m, names):
    got = {}
    for n in names:
        with open(m.join(n), "rb") as f:
            got[n] = f.read()
    return got


def blocks(cache_dir):
    return sorted(p for p in glob.glob(os.path.join(cache_dir, "data", "??", "*"))
                  if os.path.isfile(p))


def flip_byte(path, at, mask):
    """Change the byte at offset at of path in place (XOR mask)."""
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ mask]))


def drop_page_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")  # the page cache only: the kernel keeps its inodes


def settle(m):
    """Wait until the cache has written what it was given."""
    assert wait_for(lambda: stats(m)["data_cache"]["in_flight"] == 0, timeout=30)


@pytest.fixture
def dataset(s3client, bucket):
    objs = {"ds/f%02d.bin" % i: payload("dc%d" % i, 300000 + 70001 * i) for i in range(10)}
    objs["ds/big.bin"] = payload("dc-big", 5 * MiB + 12345)
    seed(s3client, bucket, objs)
    return objs


def test_epochs_and_remount_are_identical_and_a_cached_set_sends_no_get(
        rw_mount, bucket, dataset, cache_dir):
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    settle(m)
    st = stats(m)["data_cache"]
    assert st["inserts"] >= len(dataset) and st["hit_bytes"] == 0, st
    files = blocks(cache_dir)
    assert files and all(os.stat(p).st_mode & 0o777 == 0o600 for p in files)
    assert os.stat(os.path.join(cache_dir, "data")).st_mode & 0o777 == 0o700
    drop_page_cache()
    assert read_tree(m, dataset) == dataset  # epoch 2, same mount
    st2 = stats(m)
    assert st2["data_cache"]["hit_bytes"] >= sum(map(len, dataset.values())), st2["data_cache"]
    m.unmount()
    # the next job: profile=training lists and reads, no GET at all
    m = live(rw_mount, bucket, "profile=training")
    before = stats(m)["reads"]["gets"]
    walked = sorted(os.path.join(r, f)[len(m.path) + 1:]
                    for r, _, fs in os.walk(m.path) for f in fs)
    assert walked == sorted(dataset)
    assert read_tree(m, dataset) == dataset
    st3 = stats(m)
    assert st3["reads"]["gets"] == before, st3["reads"]
    assert st3["data_cache"]["hit_bytes"] >= sum(map(len, dataset.values()))


def test_a_version_learned_at_open_is_kept_for_the_next_epoch(rw_mount, bucket, dataset,
                                                              s3client, s3server):
    """A listing without version tokens (AIStore's S3 API with xxhash2 lists
    empty ETags) costs one HEAD per file at its first open, for the version
    the cache is keyed by; the inode and the listing's entry keep that
    version, so a second epoch under trusted metadata asks no HEAD again
    and reads from the cache.
    Servers that list versions (and AIStore's native API) ask none at all."""
    listed = s3client.list_objects_v2(Bucket=bucket, Prefix="ds/")["Contents"]
    without = sum(1 for o in listed if not o.get("ETag", "").strip('"'))
    if getattr(s3server, "api", "s3") == "native":
        without = 0  # its listing carries version and checksum
    m = live(rw_mount, bucket, "ro,profile=training")
    assert read_tree(m, dataset) == dataset
    settle(m)
    heads = stats(m)["reads"]["version_heads"]
    # the case happened where it can: every file listed without a version was asked once
    assert heads == without, (heads, without)
    # the page cache only: dropping the kernel's inodes too (3) would reach
    # the mounts of every other test running at once (tests/unit/ns/
    # test_meta.c shows a forgotten inode coming back with the version)
    drop_page_cache()
    assert read_tree(m, dataset) == dataset  # epoch 2
    st = stats(m)
    assert st["reads"]["version_heads"] == heads, st["reads"]
    assert st["data_cache"]["hit_bytes"] >= sum(map(len, dataset.values())), st["data_cache"]


def test_a_changed_object_is_never_served_from_old_blocks(
        rw_mount, bucket, dataset, cache_dir, s3client):
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, ["ds/f03.bin", "ds/big.bin"])["ds/big.bin"] == dataset["ds/big.bin"]
    settle(m)
    m.unmount()
    new = payload("dc-big-v2", 5 * MiB + 12345)  # same size, new bytes
    s3client.put_object(Bucket=bucket, Key="ds/big.bin", Body=new)
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, ["ds/big.bin"])["ds/big.bin"] == new
    assert read_tree(m, ["ds/f03.bin"])["ds/f03.bin"] == dataset["ds/f03.bin"]
    st = stats(m)
    assert st["data_cache"]["miss_bytes"] >= len(new)


def test_corrupt_truncated_and_foreign_blocks_are_dropped_and_fetched_again(
        rw_mount, bucket, dataset, cache_dir):
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    settle(m)
    m.unmount()
    files = blocks(cache_dir)
    assert len(files) >= 4
    flip_byte(files[0], HDR + 1000, 0xff)  # a flipped byte in the data
    with open(files[1], "r+b") as f:  # truncated
        f.truncate(os.path.getsize(files[1]) // 2)
    # foreign: another block's file under this block's name (same length
    # when possible)
    same = [p for p in files[3:] if os.path.getsize(p) == os.path.getsize(files[2])]
    if same:
        with open(same[0], "rb") as src, open(files[2], "wb") as dst:
            dst.write(src.read())
    else:
        with open(files[2], "r+b") as f:
            f.seek(12)
            f.write(b"\0" * 8)  # the id in the header
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    st = stats(m)["data_cache"]
    assert st["corrupt"] >= 3, st
    assert "failed its check" in m.log


def test_a_wholly_cached_object_is_read_from_its_block_files_and_checked_again_if_changed(
        rw_mount, bucket, dataset, cache_dir):
    """An object whose blocks are all cached is replied straight from the
    block files (read with O_DIRECT, or spliced for short reads; no read
    buffer): each file is verified the first time this mount opens it,
    and again once it changed (here: a byte flipped in place while
    mounted, which must never reach a reader)."""
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    settle(m)
    m.unmount()
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    st = stats(m)
    assert st["reads"]["cache_file_reads"] > 0, st["reads"]
    assert st["data_cache"]["direct_reads"] > 0, st["data_cache"]
    assert st["data_cache"]["direct_buffer_bytes"] > 0, st["data_cache"]
    assert st["data_cache"]["corrupt"] == 0
    # the buffers of those reads go back once none was used for 5 s
    assert wait_for(lambda: stats(m)["data_cache"]["direct_buffer_bytes"] == 0, timeout=20), \
        stats(m)["data_cache"]
    files = blocks(cache_dir)
    flip_byte(files[0], HDR + 77, 0x5a)  # after this mount verified it
    drop_page_cache()
    assert read_tree(m, dataset) == dataset
    assert stats(m)["data_cache"]["corrupt"] >= 1
    assert "failed its check" in m.log


def test_a_block_file_is_checked_once_per_mount_when_many_read_it_at_once(
        rw_mount, bucket, s3client, cache_dir):
    """Cached files read after a remount by eight threads at once, with the
    kernel's readahead sending several reads of each: every block file is
    checked once (`data_cache.verified`), where the reads that reached an
    unchecked block together each checked it (400 files of 1 MiB: 790
    checks), and every byte is right. Reading them again checks nothing."""
    from concurrent.futures import ThreadPoolExecutor

    objs = {"ep/f%02d.bin" % i: payload("once%d" % i, MiB + (i % 3) * 300000)
            for i in range(40)}
    seed(s3client, bucket, objs)
    nblocks = sum((len(v) + MiB - 1) // MiB for v in objs.values())
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, objs) == objs
    settle(m)
    m.unmount()
    m = live(rw_mount, bucket, "data_cache=256M")
    drop_page_cache()

    def read_one(n):
        with open(m.join(n), "rb") as f:
            return n, f.read()

    for _ in range(2):
        with ThreadPoolExecutor(8) as ex:
            assert dict(ex.map(read_one, sorted(objs))) == objs
        st = stats(m)
        assert st["reads"]["cache_file_reads"] > 0, st["reads"]
        assert st["data_cache"]["verified"] == nblocks, st["data_cache"]
        drop_page_cache()


def test_a_cache_dir_that_refuses_o_direct_is_read_through_the_page_cache(
        rw_mount, bucket, dataset, cache_dir, tmpfs):
    """On a filesystem without O_DIRECT (ramfs) the replies from block
    files are read through the page cache: the log says so once, every
    byte is right, a flipped byte is still caught. (ramfs reports no free
    space, so nothing is stored there: the blocks are stored on disk
    first, then copied.)"""
    m = live(rw_mount, bucket, "data_cache=64M")
    assert read_tree(m, dataset) == dataset
    settle(m)
    m.unmount()
    cache = tmpfs(None, fstype="ramfs")
    subprocess.run(["cp", "-a", cache_dir + "/.", cache], check=True)
    m = live(rw_mount, bucket, "data_cache=64M,log_level=info,cache_dir=%s" % cache)
    for _ in range(2):
        assert read_tree(m, dataset) == dataset
        drop_page_cache()
    st = stats(m)
    assert st["reads"]["cache_file_reads"] > 0, st["reads"]
    assert st["data_cache"]["direct_reads"] == 0, st["data_cache"]
    assert st["data_cache"]["corrupt"] == 0
    assert m.log.count("refuses O_DIRECT") == 1, m.log
    files = blocks(cache)
    flip_byte(files[0], HDR + 5, 0x11)
    drop_page_cache()
    assert read_tree(m, dataset) == dataset
    assert stats(m)["data_cache"]["corrupt"] >= 1


def test_kill_9_during_a_fill_leaves_nothing_bad(rw_mount, bucket, dataset, cache_dir,
                                                 faultproxy):
    """The daemon killed while the cache is being filled: the fetch of
    big.bin (six blocks) is slowed to 4 s a MiB at the proxy, and the kill
    comes once the cache has stored some of its blocks and not all, with
    its GETs still in flight (checked, not slept for)."""
    m = live(rw_mount, bucket, "data_cache=256M", endpoint=faultproxy.endpoint)
    faultproxy.set_faults(latency={"per_mib_ms": 4000, "kind": "GetObject", "key": "big\\.bin$"})
    nblocks = -(-len(dataset["ds/big.bin"]) // MiB)
    proc = subprocess.Popen(["cat", m.join("ds/big.bin")], stdout=subprocess.DEVNULL)
    seen = {}

    def filling():
        seen["cache"] = stats(m)["data_cache"]
        seen["proxy"] = faultproxy.stats()["requests"]
        return 1 <= seen["cache"]["inserts"] < nblocks and seen["proxy"]["delayed_in_flight"] >= 1
    try:
        assert wait_for(filling, 60), "no fill under way: %s" % seen
    finally:
        for pid in daemon_pids(m.path):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
    m.unmount(check=False)
    stored = blocks(cache_dir)
    assert 1 <= len(stored) < nblocks, (stored, seen)  # what the fill had stored
    m = live(rw_mount, bucket, "data_cache=256M")
    assert read_tree(m, dataset) == dataset
    settle(m)
    assert stats(m)["data_cache"]["corrupt"] == 0
    tmp = os.listdir(os.path.join(cache_dir, "data", "tmp"))
    assert tmp == [], tmp


def test_two_mounts_share_one_cache_dir_under_one_bound(
        rw_mount, bucket, s3client, cache_dir):
    objs = {"s/a%02d.bin" % i: payload("sh%d" % i, MiB) for i in range(24)}
    seed(s3client, bucket, objs)
    a = live(rw_mount, bucket, "data_cache=16M")
    b = live(rw_mount, bucket, "data_cache=16M")
    first = sorted(objs)[:6]
    assert read_tree(a, first) == {k: objs[k] for k in first}
    settle(a)
    gets = stats(b)["reads"]["gets"]
    assert read_tree(b, first) == {k: objs[k] for k in first}
    assert stats(b)["reads"]["gets"] == gets, "b fetched what a had cached"
    # both fill: the bound holds for the two together
    half = len(objs) // 2
    for m, names in ((a, sorted(objs)[:half]), (b, sorted(objs)[half:])):
        assert read_tree(m, names) == {k: objs[k] for k in names}
    settle(a)
    settle(b)
    total = sum(os.path.getsize(p) for p in blocks(cache_dir))
    assert total <= 16 * MiB, total
    with open(os.path.join(cache_dir, "data", "usage"), "rb") as f:
        counted = int.from_bytes(f.read(8), "little")
    assert counted == total


def test_a_scan_of_1_5x_the_cache_keeps_more_than_half(rw_mount, bucket, s3client, cache_dir):
    # 16 MiB hold 15 blocks of 1 MiB (each file carries a 64-byte header)
    objs = {"scan/x%02d.bin" % i: payload("scan%d" % i, MiB) for i in range(23)}
    seed(s3client, bucket, objs)
    m = live(rw_mount, bucket, "data_cache=16M")
    names = sorted(objs)
    for epoch in (1, 2, 3):
        before = stats(m)["data_cache"]
        assert read_tree(m, names) == objs
        settle(m)
        drop_page_cache()
        after = stats(m)["data_cache"]
        hit = after["hit_bytes"] - before["hit_bytes"]
        miss = after["miss_bytes"] - before["miss_bytes"]
        if epoch > 1:
            assert hit / (hit + miss) >= 0.5, (epoch, hit, miss, after)


@pytest.fixture
def tiny_fs(tmpfs):
    return tmpfs("12m")


def test_a_full_disk_turns_storing_off_and_reads_go_on(mount, bucket, s3client, tiny_fs):
    objs = {"full/y%02d.bin" % i: payload("full%d" % i, MiB) for i in range(20)}
    seed(s3client, bucket, objs)
    m = mount(bucket, "ro,cache_dir=%s,data_cache=64M,min_free_space=0" % tiny_fs)
    assert admin.wait_socket(m.path)
    assert read_tree(m, sorted(objs)) == objs
    settle(m)
    st = stats(m)["data_cache"]
    assert st["storing"] is False, st
    assert m.log.count("blocks are not stored any more") == 1, m.log
    assert read_tree(m, sorted(objs)) == objs


def test_auto_on_a_small_filesystem_stays_within_it(mount, bucket, s3client, tiny_fs):
    m = mount(bucket, "ro,cache_dir=%s,data_cache=auto" % tiny_fs)
    assert "data cache off" in m.log and "not enough" in m.log, m.log
    seed(s3client, bucket, {"z.bin": payload("z", 3000)})
    with open(m.join("z.bin"), "rb") as f:
        assert f.read() == payload("z", 3000)


def test_loose_permissions_are_made_private(rw_mount, bucket, dataset, cache_dir):
    data = os.path.join(cache_dir, "data")
    os.makedirs(data, exist_ok=True)
    os.chmod(cache_dir, 0o755)
    os.chmod(data, 0o755)
    m = live(rw_mount, bucket, "data_cache=64M")
    assert os.stat(data).st_mode & 0o777 == 0o700
    assert "made private" in m.log
    assert read_tree(m, ["ds/f01.bin"])["ds/f01.bin"] == dataset["ds/f01.bin"]


@pytest.mark.parametrize("value", ["bogus", "1k", "-5", ""])
def test_bad_data_cache_values_are_refused(mount, bucket, value):
    with pytest.raises(MountFailed) as e:
        mount(bucket, "data_cache=%s" % value)
    assert "data_cache" in str(e.value) or "data_cache" in (e.value.stderr or "")


def test_objmountctl_cache_stats_warm_and_drop(rw_mount, bucket, dataset, cache_dir):
    m = live(rw_mount, bucket, "data_cache=64M")
    p = admin.ctl(["cache", "stats", m.path])
    assert p.returncode == 0 and p.stdout.startswith("data cache: 0.0 of 64.0 MiB"), p
    p = admin.ctl(["cache", "warm", m.join("ds")])
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("warmed %d of %d files" % (len(dataset), len(dataset))), p.stdout
    assert "the data cache stored 10.9 MiB" in p.stdout, p.stdout
    gets = stats(m)["reads"]["gets"]
    drop_page_cache()
    assert read_tree(m, dataset) == dataset
    assert stats(m)["reads"]["gets"] == gets  # all from the cache
    n = len(blocks(cache_dir))
    p = admin.ctl(["cache", "drop", m.join("ds", "big.bin")])
    assert p.returncode == 0 and p.stdout == "removed 6 block(s) from the data cache\n", p
    assert len(blocks(cache_dir)) == n - 6
    p = admin.ctl(["cache", "drop", m.path])
    assert p.returncode == 0 and p.stdout == "removed %d block(s) from the data cache\n" % (n - 6)
    assert blocks(cache_dir) == []
    assert stats(m)["data_cache"]["size_bytes"] == 0
    assert read_tree(m, dataset) == dataset  # fetched again


def test_objmountctl_cache_bad_input(rw_mount, bucket, tmp_path):
    m = live(rw_mount, bucket, "")  # no data cache
    cases = [
        (["cache", "warm", str(tmp_path)], 1, "is not in an objmount mount"),
        (["cache", "warm", "/nonexistent/x"], 1, "is not in an objmount mount"),
        (["cache", "stats", str(tmp_path)], 1, "is not an objmount mount point"),
        (["cache", "stats", m.path], 0, "data cache: off"),
        (["cache", "warm", m.path], 1, "this mount has no data cache"),
        (["cache", "drop", m.path], 1, "this mount has no data cache"),
        (["cache", "frob"], 2, "cache: use"),
        (["cache"], 2, "cache: use"),
        (["cache", "warm", m.path, "--threads", "0"], 1, "--threads wants"),
    ]
    for args, code, text in cases:
        p = admin.ctl(args)
        out = p.stdout + p.stderr
        assert p.returncode == code and text in out, (args, p.returncode, out)
        if code:
            assert len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def test_a_randomly_read_object_is_filled_whole_in_the_background(
        rw_mount, bucket, s3client, cache_dir):
    import random
    size = 40 * MiB + 777  # reads within part_size of the last one count as sequential
    want = payload("rnd", size)
    seed(s3client, bucket, {"r/h5.bin": want})
    m = live(rw_mount, bucket, "data_cache=256M")
    rnd = random.Random(5)
    with open(m.join("r/h5.bin"), "rb", buffering=0) as f:
        for _ in range(32):
            off = rnd.randrange(0, size - 4096)
            assert os.pread(f.fileno(), 4096, off) == want[off:off + 4096]
        assert wait_for(lambda: stats(m)["data_cache"]["blocks"] == 41, timeout=60), \
            stats(m)["data_cache"]
    st = stats(m)
    assert st["reads"]["cache_fills"] == 1 and st["reads"]["cache_fill_bytes"] > 0, st["reads"]
    m.unmount()
    m = live(rw_mount, bucket, "profile=training")
    gets = stats(m)["reads"]["gets"]
    with open(m.join("r/h5.bin"), "rb", buffering=0) as f:
        for _ in range(200):
            off = rnd.randrange(0, size - 4096)
            assert os.pread(f.fileno(), 4096, off) == want[off:off + 4096]
    assert stats(m)["reads"]["gets"] == gets


@pytest.mark.parametrize("size", [300000, 11 * MiB + 5], ids=["one-part", "multipart"])
def test_a_written_file_is_read_back_from_the_cache(rw_mount, bucket, s3client, cache_dir, size):
    want = payload("ckpt%d" % size, size)
    m = live(rw_mount, bucket, "data_cache=256M")
    with open(m.join("ckpt.pt"), "wb") as f:
        f.write(want)
    # the last release (after close returns) copies it into the cache
    nblocks = (size + MiB - 1) // MiB
    assert wait_for(lambda: stats(m)["data_cache"]["blocks"] == nblocks, timeout=30), \
        stats(m)["data_cache"]
    m.unmount()
    assert s3client.get_object(Bucket=bucket, Key="ckpt.pt")["Body"].read() == want
    m = live(rw_mount, bucket, "profile=training")
    gets = stats(m)["reads"]["gets"]
    with open(m.join("ckpt.pt"), "rb") as f:
        assert f.read() == want
    assert stats(m)["reads"]["gets"] == gets


def test_a_read_only_mount_creates_its_cache_dir_with_parents(mount, bucket, s3client, tmp_path):
    seed(s3client, bucket, {"p.bin": payload("p", 2 * MiB)})
    deep = tmp_path / "fresh" / "home" / ".cache" / "objmount"
    m = mount(bucket, "ro,data_cache=64M,cache_dir=%s" % deep)
    assert admin.wait_socket(m.path)
    with open(m.join("p.bin"), "rb") as f:
        assert f.read() == payload("p", 2 * MiB)
    settle(m)
    assert len(blocks(str(deep))) == 2
    for d in (deep.parent, deep, deep / "data"):
        assert os.stat(d).st_mode & 0o777 == 0o700, d
