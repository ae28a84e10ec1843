"""Concurrent readers through one mount: threads and processes, on one file
and on many files, every byte compared with the source."""

import hashlib
import mmap
import multiprocessing
import os
import random
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.mount import MiB, PART, PART_OPT, SMALL_FILES, check_bytes, read_all, size_key

BIG = size_key(100 * MiB)
MID = size_key(2 * PART + 1)


@pytest.fixture
def m(mount, data_bucket):
    return mount(data_bucket.name, PART_OPT)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def _reader(args):
    """In a child process: (path, mode) -> sha256 of what was read."""
    path, mode = args
    if mode == "seq":
        return sha(read_all(path, chunk=256 * 1024 + 3))
    with open(path, "rb") as f:
        return sha(f.read())


def test_threads_on_one_file_read_identical_bytes(m, data_bucket):
    want = data_bucket[MID]
    path = m.join(MID)
    errors = []
    start = threading.Barrier(8)

    def sequential(chunk):
        start.wait()
        check_bytes(read_all(path, chunk=chunk), want, "sequential chunk=%d" % chunk)

    def random_preads(seed):
        rng = random.Random(seed)
        fd = os.open(path, os.O_RDONLY)
        try:
            start.wait()
            for _ in range(150):
                off, ln = rng.randrange(len(want)), rng.choice([1, 4096, 65536, 300001])
                check_bytes(os.pread(fd, ln, off), want[off:off + ln], "pread(%d,%d)" % (ln, off))
        finally:
            os.close(fd)

    jobs = [lambda c=c: sequential(c) for c in (4096, 65536, MiB, 3 * MiB + 1)]
    jobs += [lambda s=s: random_preads(s) for s in range(4)]

    def run(job):
        try:
            job()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    assert not errors, errors[0]
    m.check_alive()


def test_threads_share_one_descriptor(m, data_bucket):
    want = data_bucket[BIG]
    fd = os.open(m.join(BIG), os.O_RDONLY)
    try:
        def work(seed):
            rng = random.Random(seed)
            for _ in range(40):
                off, ln = rng.randrange(len(want)), rng.choice([4096, 131072, MiB])
                check_bytes(os.pread(fd, ln, off), want[off:off + ln], "pread(%d,%d)" % (ln, off))

        with ThreadPoolExecutor(8) as ex:
            list(ex.map(work, range(8)))
    finally:
        os.close(fd)


def _mmap_threads_child(path, want):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        bad = []

        def work(seed):
            rng = random.Random(seed)
            for _ in range(60):
                off, ln = rng.randrange(len(want)), rng.choice([1, 4096, 70001, MiB])
                if mm[off:off + ln] != want[off:off + ln]:
                    bad.append((off, ln))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    os._exit(1 if bad else 0)


def test_threads_on_one_mmap_read_identical_bytes(m, data_bucket):
    # a loader's worker threads slicing one memory-mapped file; a failed page
    # fault is SIGBUS, so the threads run in a child process
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=_mmap_threads_child, args=(m.join(BIG), data_bucket[BIG]))
    p.start()
    p.join(180)
    if p.is_alive():
        p.kill()
        pytest.fail("mmap readers hung")
    assert p.exitcode == 0, {1: "wrong bytes from the mapping",
                             -signal.SIGBUS: "SIGBUS: a page fault failed (EIO)"}.get(
        p.exitcode, "exit %s" % p.exitcode)


def test_processes_on_one_file_read_identical_bytes(m, data_bucket):
    want = sha(data_bucket[BIG])
    procs = [subprocess.Popen(["sha256sum", m.join(BIG)], stdout=subprocess.PIPE)
             for _ in range(4)]
    procs += [subprocess.Popen("cat '%s' | sha256sum" % m.join(BIG), shell=True,
                               stdout=subprocess.PIPE)]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0
        assert out.split()[0].decode() == want


def test_threads_on_many_files_read_identical_bytes(m, data_bucket):
    keys = SMALL_FILES + [size_key(n) for n in (MiB + 1, PART - 1, PART + 1)]

    def work(key):
        check_bytes(read_all(m.join(key), chunk=65536), data_bucket[key], key)
        return key

    with ThreadPoolExecutor(16) as ex:
        assert sorted(ex.map(work, keys)) == sorted(keys)


def test_processes_on_many_files_read_identical_bytes(m, data_bucket):
    keys = SMALL_FILES + [size_key(n) for n in (MiB - 1, PART, 2 * PART + 1)]
    jobs = [(m.join(k), "seq" if i % 2 else "whole") for i, k in enumerate(keys)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(6) as pool:
        got = pool.map(_reader, jobs, chunksize=2)
    for k, h in zip(keys, got):
        assert h == sha(data_bucket[k]), k


def test_listing_while_reading(m, data_bucket):
    """readdir and stat in parallel with reads of the same directory."""
    def lister(_):
        for _ in range(20):
            names = os.listdir(m.join("small"))
            assert len(names) == len(SMALL_FILES)
            for n in names[:10]:
                os.stat(m.join("small", n))

    def reader(key):
        check_bytes(read_all(m.join(key)), data_bucket[key], key)

    with ThreadPoolExecutor(8) as ex:
        fs = [ex.submit(lister, i) for i in range(3)]
        fs += [ex.submit(reader, k) for k in SMALL_FILES]
        for f in fs:
            f.result(timeout=120)
