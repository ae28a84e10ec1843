"""Reads through a real objmount mount are byte-identical to the objects.

Every object of the session data set (0 B, 1 B, the small-object threshold
+-1, part_size-1/part_size/part_size+1 with -o part_size=5M, three parts, and
100 MiB) is read by `cat`, Python read(), seeded random pread patterns
(crossing part boundaries and the end of the object) and random slices of an
mmap, and compared with the bytes uploaded with boto3."""

import mmap
import os
import random
import stat
import subprocess

import pytest

from harness.mount import (DEFAULT_PART_SIZES, MiB, PART, PART_OPT, SIZES, check_bytes,
                           read_all, size_key)

IDS = {0: "0B", 1: "1B", 4096: "4KiB", MiB - 1: "1MiB-1", MiB: "1MiB", MiB + 1: "1MiB+1",
       PART - 1: "part-1", PART: "part", PART + 1: "part+1", 2 * PART + 1: "2part+1",
       100 * MiB: "100MiB"}
sizes = pytest.mark.parametrize("size", SIZES, ids=[IDS[s] for s in SIZES])
nonempty = pytest.mark.parametrize("size", [s for s in SIZES if s],
                                   ids=[IDS[s] for s in SIZES if s])


@pytest.fixture
def m(mount, data_bucket):
    return mount(data_bucket.name, PART_OPT)


def pread_ops(size, seed, n):
    """Seeded (offset, length) pairs: anywhere, across part boundaries, across
    the end of the object, at and past the end."""
    rng = random.Random(seed)
    lens = [1, 2, 511, 4096, 4097, 65536, 131075, MiB + 5, PART + 17]
    weights = [3, 2, 2, 3, 2, 3, 2, 1, 1 if size > 10 * MiB else 0]
    ops = []
    for i in range(n):
        ln = rng.choices(lens, weights)[0]
        r = rng.random()
        if r < 0.15 and size >= PART:
            k = rng.randint(1, size // PART)
            off = max(0, k * PART - rng.randint(1, min(ln, 4096)))
        elif r < 0.25:
            off = max(0, size - rng.randint(0, ln))  # across (or exactly at) the end
        elif r < 0.30:
            off = size + rng.randint(0, 3 * MiB)  # past the end
        else:
            off = rng.randint(0, max(0, size - 1))
        ops.append((off, ln))
    return ops


@sizes
def test_cat_reads_identical_bytes(m, data_bucket, size):
    key = size_key(size)
    p = subprocess.run(["cat", m.join(key)], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    check_bytes(p.stdout, data_bucket[key], "cat " + key)


@sizes
def test_python_read_identical_bytes(m, data_bucket, size):
    key = size_key(size)
    with open(m.join(key), "rb") as f:
        check_bytes(f.read(), data_bucket[key], "read() " + key)
    # unbuffered, in odd chunks that never line up with pages or parts
    check_bytes(read_all(m.join(key), chunk=131071 if size <= 16 * MiB else MiB + 7),
                data_bucket[key], "os.read chunks " + key)


@sizes
def test_stat_reports_object_size_and_regular_file(m, data_bucket, size):
    st = os.stat(m.join(size_key(size)))
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == size


@nonempty
def test_random_pread_matches_source(m, data_bucket, size):
    key = size_key(size)
    want = data_bucket[key]
    fd = os.open(m.join(key), os.O_RDONLY)
    try:
        for off, ln in pread_ops(size, seed=size, n=150 if size > 10 * MiB else 250):
            got = os.pread(fd, ln, off)
            check_bytes(got, want[off:off + ln], "pread(%s, len=%d, off=%d)" % (key, ln, off))
    finally:
        os.close(fd)


def test_pread_across_every_part_boundary_matches_source(m, data_bucket):
    size = 100 * MiB
    key = size_key(size)
    want = data_bucket[key]
    fd = os.open(m.join(key), os.O_RDONLY)
    try:
        # backwards, so nothing before a boundary was read (or prefetched) first
        for k in range(size // PART - 1, 0, -1):
            b = k * PART
            for off, ln in ((b - 1, 2), (b - 4096, 8192), (b - 3, 1)):
                got = os.pread(fd, ln, off)
                check_bytes(got, want[off:off + ln], "pread(%s, len=%d, off=%d)" % (key, ln, off))
    finally:
        os.close(fd)


@sizes
def test_read_at_or_past_end_returns_nothing(m, data_bucket, size):
    fd = os.open(m.join(size_key(size)), os.O_RDONLY)
    try:
        for off in (size, size + 1, size + 4096, size + 64 * MiB):
            assert os.pread(fd, 4096, off) == b"", "pread at offset %d of %d" % (off, size)
        os.lseek(fd, size, os.SEEK_SET)
        assert os.read(fd, 65536) == b""
    finally:
        os.close(fd)


@nonempty
def test_mmap_random_slices_match_source(m, data_bucket, size):
    key = size_key(size)
    want = data_bucket[key]
    with open(m.join(key), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert len(mm) == size
        rng = random.Random(size + 1)
        for off, ln in pread_ops(size, seed=size + 1, n=120):
            off = min(off, size - 1)
            check_bytes(mm[off:off + ln], want[off:off + ln], "mmap[%d:%d] of %s"
                        % (off, off + ln, key))
        for _ in range(200):  # single-byte page faults anywhere
            i = rng.randrange(size)
            assert mm[i] == want[i], "mmap[%d] of %s" % (i, key)
        if size <= 16 * MiB:
            check_bytes(mm[:], want, "whole mmap of " + key)


@pytest.mark.parametrize("size", DEFAULT_PART_SIZES, ids=["8MiB-1", "8MiB", "8MiB+1"])
def test_default_part_size_boundaries_read_identically(mount, data_bucket, size):
    m = mount(data_bucket.name)  # no part_size: the default (8 MiB)
    key = size_key(size)
    want = data_bucket[key]
    check_bytes(read_all(m.join(key)), want, "read " + key)
    fd = os.open(m.join(key), os.O_RDONLY)
    try:
        for off, ln in ((8 * MiB - 1, 2), (8 * MiB - 4096, 8192), (size - 1, 10), (0, size + 1)):
            check_bytes(os.pread(fd, ln, off), want[off:off + ln], "pread(%d, %d)" % (ln, off))
    finally:
        os.close(fd)


def test_header_then_rest_read_identical(m, data_bucket):
    # the image-loader pattern: a small header read, a seek, then the rest
    for key in ["small/img%03d.jpg" % i for i in (0, 7, 63)] + [size_key(MiB + 1)]:
        want = data_bucket[key]
        with open(m.join(key), "rb", buffering=0) as f:
            check_bytes(f.read(16), want[:16], key + " header")
            f.seek(len(want) - 2)
            check_bytes(f.read(2), want[-2:], key + " trailer")
            f.seek(16)
            check_bytes(f.read(), want[16:], key + " rest")


def test_reopen_reads_same_bytes(m, data_bucket):
    for key in (size_key(PART + 1), "small/img001.jpg"):
        for _ in range(3):
            check_bytes(read_all(m.join(key)), data_bucket[key], "reopened " + key)


def test_backwards_sequential_reads_match_source(m, data_bucket):
    key = size_key(2 * PART + 1)
    want = data_bucket[key]
    fd = os.open(m.join(key), os.O_RDONLY)
    try:
        off = len(want)
        while off > 0:
            ln = min(300000, off)
            off -= ln
            check_bytes(os.pread(fd, ln, off), want[off:off + ln], "pread(%d, %d)" % (ln, off))
    finally:
        os.close(fd)
