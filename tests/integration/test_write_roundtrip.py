"""Files written through the mount are stored byte-identical.

Every object is checked with boto3 straight against the server, never read back
through the mount. Sizes: 0 B, 1 B, part_size-1/part_size/part_size+1 (with
-o part_size=5M: one PUT, one PUT, multipart), 100 MiB and 1 GiB, written
with `cp`; `dd` in odd block sizes (and `conv=notrunc` rewrites of an
existing object); seeded random-offset writes into new and existing objects;
sparse writes whose holes read back as zeros; truncate down and up
(os.truncate, ftruncate on an open descriptor, `truncate -s`); appends to
small and multipart objects; a rewrite of an existing object's middle
without truncation. After every close nothing is left in staging/ and
nothing went to recovery/."""

import os
import random
import subprocess

import pytest

from harness.mount import (MiB, PART, check_object, check_object_file, payload, random_file,
                           wait_for)

WRITE_OPTS = "part_size=5M,upload_retry_delay=0.05"


def rw(mount, bucket, cache_dir, opts=""):
    o = "%s,cache_dir=%s" % (WRITE_OPTS, cache_dir)
    return mount(bucket, o + ("," + opts if opts else ""))


def staged(cache_dir):
    return sorted(os.listdir(os.path.join(cache_dir, "staging")))


def recovered(cache_dir):
    return sorted(os.listdir(os.path.join(cache_dir, "recovery")))


def nothing_left(cache_dir):
    """Once every descriptor is closed (release follows close
    asynchronously), staging/ is empty, and a clean run recovers nothing."""
    assert wait_for(lambda: not staged(cache_dir), 10), \
        "staging files left after close: %s" % staged(cache_dir)
    assert not recovered(cache_dir), "data went to recovery: %s" % recovered(cache_dir)


def local(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def sh(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr)
    return p


def pwrite_all(fd, data, off):
    while data:
        n = os.pwrite(fd, data, off)
        data, off = data[n:], off + n


# -- cp ------------------------------------------------------------------------------
CP_SIZES = {"0B": 0, "1B": 1, "part-1": PART - 1, "part": PART, "part+1": PART + 1,
            "100MiB": 100 * MiB}


@pytest.mark.parametrize("size", list(CP_SIZES.values()), ids=list(CP_SIZES))
def test_cp_round_trip_is_byte_identical(mount, bucket, s3client, cache_dir, tmp_path, size):
    m = rw(mount, bucket, cache_dir)
    want = payload("cp", size)
    sh("cp", local(tmp_path, "src", want), m.join("out.bin"))
    check_object(s3client, bucket, "out.bin", want)
    assert os.stat(m.join("out.bin")).st_size == size
    nothing_left(cache_dir)


def test_1gib_cp_round_trip_is_byte_identical(mount, bucket, s3client, cache_dir, tmp_path):
    # default part size (8 MiB): 128 parts uploaded while cp still writes
    m = mount(bucket, "upload_retry_delay=0.05,cache_dir=" + cache_dir)
    src = str(tmp_path / "src")
    random_file(src, 1024 * MiB)
    sh("cp", src, m.join("ckpt-1g.bin"))
    check_object_file(s3client, bucket, "ckpt-1g.bin", src)
    assert os.stat(m.join("ckpt-1g.bin")).st_size == 1024 * MiB
    nothing_left(cache_dir)


def test_cp_over_existing_object_replaces_it(mount, bucket, s3client, cache_dir, tmp_path):
    s3client.put_object(Bucket=bucket, Key="a", Body=payload("old-a", 2 * PART + 1))
    s3client.put_object(Bucket=bucket, Key="b", Body=payload("old-b", 1000))
    m = rw(mount, bucket, cache_dir)
    shorter, longer = payload("new-a", 1000), payload("new-b", PART + 3)
    sh("cp", local(tmp_path, "a", shorter), m.join("a"))
    sh("cp", local(tmp_path, "b", longer), m.join("b"))
    check_object(s3client, bucket, "a", shorter)
    check_object(s3client, bucket, "b", longer)
    nothing_left(cache_dir)


# -- dd --------------------------------------------------------------------------------
@pytest.mark.parametrize("bs", [1000, 4093, MiB + 7], ids=["bs1000", "bs4093", "bs1M+7"])
def test_dd_odd_block_sizes_and_notrunc_rewrite(mount, bucket, s3client, cache_dir, tmp_path,
                                                 bs):
    m = rw(mount, bucket, cache_dir)
    want = payload("dd%d" % bs, 2 * PART + 12345)
    sh("dd", "if=" + local(tmp_path, "src", want), "of=" + m.join("dd.bin"), "bs=%d" % bs,
       "status=none")
    check_object(s3client, bucket, "dd.bin", want, "dd bs=%d" % bs)
    # rewrite blocks across the first part boundary of the existing object
    patch = payload("patch%d" % bs, 2 * bs + 17)
    seek = PART // bs
    sh("dd", "if=" + local(tmp_path, "patch", patch), "of=" + m.join("dd.bin"), "bs=%d" % bs,
       "seek=%d" % seek, "conv=notrunc", "status=none")
    off = seek * bs
    want = want[:off] + patch + want[off + len(patch):]
    check_object(s3client, bucket, "dd.bin", want, "dd conv=notrunc bs=%d" % bs)
    nothing_left(cache_dir)


# -- random offsets ----------------------------------------------------------------------
def random_writes(fd, model, rng, n, span):
    for _ in range(n):
        ln = rng.choice([1, 7, 4096, 65537, 300001, MiB + 3])
        off = rng.randrange(span)
        data = rng.randbytes(ln)
        pwrite_all(fd, data, off)
        if off + ln > len(model):
            model.extend(bytes(off + ln - len(model)))
        model[off:off + ln] = data


def test_random_offset_writes_are_byte_identical(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    rng = random.Random(4)
    model = bytearray()
    fd = os.open(m.join("rand.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        random_writes(fd, model, rng, 200, 3 * PART + 100)
    finally:
        os.close(fd)
    check_object(s3client, bucket, "rand.bin", bytes(model), "new file, random writes")
    # the same into the existing object (no O_TRUNC: it is fetched first)
    fd = os.open(m.join("rand.bin"), os.O_RDWR)
    try:
        random_writes(fd, model, rng, 60, 4 * PART)
    finally:
        os.close(fd)
    check_object(s3client, bucket, "rand.bin", bytes(model), "existing object, random writes")
    nothing_left(cache_dir)


def test_random_offset_writes_into_existing_small_object(mount, bucket, s3client, cache_dir):
    base = payload("small-base", 70000)
    s3client.put_object(Bucket=bucket, Key="s.bin", Body=base)
    m = rw(mount, bucket, cache_dir)
    rng = random.Random(5)
    model = bytearray(base)
    fd = os.open(m.join("s.bin"), os.O_WRONLY)
    try:
        for _ in range(40):
            off, ln = rng.randrange(90000), rng.choice([1, 100, 4097])
            data = rng.randbytes(ln)
            pwrite_all(fd, data, off)
            if off + ln > len(model):
                model.extend(bytes(off + ln - len(model)))
            model[off:off + ln] = data
    finally:
        os.close(fd)
    check_object(s3client, bucket, "s.bin", bytes(model))
    nothing_left(cache_dir)


# -- sparse ----------------------------------------------------------------------------
def test_sparse_write_far_past_start_reads_back_zeros(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    far = 64 * MiB + 3
    tail = payload("tail", 4097)
    fd = os.open(m.join("sparse.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.lseek(fd, far, os.SEEK_SET)
        assert os.write(fd, tail) == len(tail)
    finally:
        os.close(fd)
    check_object(s3client, bucket, "sparse.bin", bytes(far) + tail)
    nothing_left(cache_dir)


def test_sparse_islands_leave_zero_holes(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    islands = [(0, 10), (PART - 3, 7), (2 * PART + 4096, MiB), (3 * PART + 1, 1)]
    model = bytearray(3 * PART + 2)
    fd = os.open(m.join("holes.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i, (off, ln) in enumerate(islands[::-1]):  # the end first
            data = payload("island%d" % i, ln)
            pwrite_all(fd, data, off)
            model[off:off + ln] = data
    finally:
        os.close(fd)
    check_object(s3client, bucket, "holes.bin", bytes(model))
    nothing_left(cache_dir)


# -- truncate ----------------------------------------------------------------------------
def test_os_truncate_closed_object_down_and_up(mount, bucket, s3client, cache_dir):
    base = payload("trunc", 2 * PART + 100)
    s3client.put_object(Bucket=bucket, Key="t.bin", Body=base)
    s3client.put_object(Bucket=bucket, Key="small.bin", Body=base[:1000])
    m = rw(mount, bucket, cache_dir)
    os.truncate(m.join("t.bin"), PART + 5)  # multipart -> multipart, down
    check_object(s3client, bucket, "t.bin", base[:PART + 5], "truncated down")
    assert os.stat(m.join("t.bin")).st_size == PART + 5
    os.truncate(m.join("t.bin"), 3 * PART + 1)  # up: the new tail is zeros
    want = base[:PART + 5] + bytes(2 * PART - 4)
    check_object(s3client, bucket, "t.bin", want, "truncated up")
    os.truncate(m.join("t.bin"), 1000)  # multipart -> single PUT
    check_object(s3client, bucket, "t.bin", base[:1000], "truncated to 1000")
    os.truncate(m.join("t.bin"), 0)
    check_object(s3client, bucket, "t.bin", b"", "truncated to 0")
    os.truncate(m.join("small.bin"), 10)
    os.truncate(m.join("small.bin"), 100)
    check_object(s3client, bucket, "small.bin", base[:10] + bytes(90), "small down then up")
    nothing_left(cache_dir)


def test_ftruncate_on_open_descriptor(mount, bucket, s3client, cache_dir):
    m = rw(mount, bucket, cache_dir)
    data = payload("ft", 11 * MiB)
    fd = os.open(m.join("ft.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.ftruncate(fd, 6 * MiB)  # drops parts already uploaded in the background
        assert os.fstat(fd).st_size == 6 * MiB
        more = payload("ft-more", 1000)
        os.lseek(fd, 0, os.SEEK_END)
        assert os.write(fd, more) == len(more)
        os.ftruncate(fd, 13 * MiB)
        island = payload("ft-island", 5000)
        pwrite_all(fd, island, 12 * MiB)
    finally:
        os.close(fd)
    want = bytearray(data[:6 * MiB] + more)
    want.extend(bytes(13 * MiB - len(want)))
    want[12 * MiB:12 * MiB + 5000] = island
    check_object(s3client, bucket, "ft.bin", bytes(want))
    nothing_left(cache_dir)


def test_truncate_command_sizes(mount, bucket, s3client, cache_dir):
    base = payload("tcmd", MiB)
    s3client.put_object(Bucket=bucket, Key="tc.bin", Body=base)
    m = rw(mount, bucket, cache_dir)
    p = m.join("tc.bin")
    sh("truncate", "-s", "7M", p)
    check_object(s3client, bucket, "tc.bin", base + bytes(6 * MiB), "truncate -s 7M")
    sh("truncate", "-s", "-3M", p)
    check_object(s3client, bucket, "tc.bin", base + bytes(3 * MiB), "truncate -s -3M")
    sh("truncate", "-s", "17", p)
    check_object(s3client, bucket, "tc.bin", base[:17], "truncate -s 17")
    sh("truncate", "-s", "5M", m.join("new.bin"))  # creates it
    check_object(s3client, bucket, "new.bin", bytes(5 * MiB), "truncate -s 5M of a new file")
    nothing_left(cache_dir)


# -- append -----------------------------------------------------------------------------
APPENDS = {"empty+10": (0, 10), "small": (100, 50), "into-multipart": (PART - 10, 20),
           "multipart": (2 * PART + 5, MiB + 3)}


@pytest.mark.parametrize("base_len,add_len", list(APPENDS.values()), ids=list(APPENDS))
def test_append_to_existing_object(mount, bucket, s3client, cache_dir, tmp_path, base_len,
                                   add_len):
    base = payload("app-base", base_len)
    s3client.put_object(Bucket=bucket, Key="app.bin", Body=base)
    m = rw(mount, bucket, cache_dir)
    add = payload("app-add", add_len)
    with open(m.join("app.bin"), "ab") as f:
        f.write(add)
    check_object(s3client, bucket, "app.bin", base + add, "append with open('ab')")
    # and with the shell's >> (O_APPEND from a second process)
    add2 = payload("app-add2", 333)
    src = local(tmp_path, "add2", add2)
    sh("sh", "-c", 'cat "$1" >> "$2"', "sh", src, m.join("app.bin"))
    check_object(s3client, bucket, "app.bin", base + add + add2, "append with >>")
    nothing_left(cache_dir)


# -- rewrite in place --------------------------------------------------------------------
REWRITES = {"small": (1000, 500, 10), "multipart-boundary": (3 * PART + 77, PART - 10, 100),
            "multipart-last-part": (3 * PART + 77, 3 * PART + 5, 50)}


@pytest.mark.parametrize("size,off,ln", list(REWRITES.values()), ids=list(REWRITES))
def test_rewrite_middle_without_truncation(mount, bucket, s3client, cache_dir, size, off, ln):
    base = payload("mid", size)
    s3client.put_object(Bucket=bucket, Key="mid.bin", Body=base)
    m = rw(mount, bucket, cache_dir)
    patch = payload("mid-patch", ln)
    with open(m.join("mid.bin"), "r+b") as f:
        f.seek(off)
        f.write(patch)
    check_object(s3client, bucket, "mid.bin", base[:off] + patch + base[off + ln:])
    nothing_left(cache_dir)


# -- shared writable mmap (numpy.memmap, torch storages from files) -----------------------------
@pytest.mark.parametrize("msync", [True, False], ids=["msync", "munmap-only"])
def test_shared_mmap_writes_are_stored(mount, bucket, s3client, cache_dir, msync):
    import mmap

    m = rw(mount, bucket, cache_dir)
    size = 2 * PART + 100
    rng = random.Random(9)
    model = bytearray(size)
    fd = os.open(m.join("mm.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            for _ in range(200):
                off, ln = rng.randrange(size), rng.choice([1, 4096, 70001])
                data = rng.randbytes(min(ln, size - off))
                mm[off:off + len(data)] = data
                model[off:off + len(data)] = data
            if msync:
                mm.flush()
        finally:
            mm.close()
    finally:
        os.close(fd)
    wait_for(lambda: not staged(cache_dir), 10)  # the last writer reference is gone
    check_object(s3client, bucket, "mm.bin", bytes(model))
    nothing_left(cache_dir)
