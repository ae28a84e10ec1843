"""Read buffers come from one pool with a byte budget (-o memory_limit):
with 32 concurrent sequential readers the daemon's peak RSS stays under the
budget plus a constant, and readers wait for space rather than fail."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.mount import MiB, new_bucket, payload, read_all, seed

BUDGET = 32 * MiB
CONSTANT = 40 * MiB  # FUSE thread buffers, curl, the inode table; measured ~16 MiB


@pytest.fixture(scope="module")
def sixteen(s3server, s3client):
    objects = {"o%02d" % i: payload("mem/o%d" % i, 16 * MiB) for i in range(16)}
    name = new_bucket(s3client, "mem")
    seed(s3client, name, objects)
    return name, objects


def rss(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s for pid %d" % (field, pid))


def test_memory_limit_bounds_rss_with_32_sequential_readers(mount, sixteen):
    bucket, objects = sixteen
    m = mount(bucket, "memory_limit=32M,part_size=5M")
    pid = m.proc.pid
    base = rss(pid)
    peak, done = [base], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        keys = sorted(objects) * 2  # 32 readers, two per object, own descriptors

        def work(key):
            return read_all(m.join(key), chunk=128 * 1024) == objects[key]

        t0 = time.monotonic()
        with ThreadPoolExecutor(32) as ex:
            results = list(ex.map(work, keys, timeout=180))
        took = time.monotonic() - t0
    finally:
        done.set()
        sampler.join()
    assert all(results), "%d of 32 readers got wrong bytes" % results.count(False)
    hwm = max(peak[0], rss(pid, "VmHWM"))
    assert hwm - base <= BUDGET + CONSTANT, (
        "peak RSS %.1f MiB over a %.1f MiB start with memory_limit=32M (allowed %.0f MiB more); "
        "32 readers took %.1f s" % (hwm / MiB, base / MiB, (BUDGET + CONSTANT) / MiB, took))
