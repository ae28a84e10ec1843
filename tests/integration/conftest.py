"""Fixtures for driving objmount's own programs from pytest.

  oms3    the protocol client (om-s3) against s3server
  (mount and cache_dir come from tests/conftest.py)
  rw_mount     function: factory rw_mount(bucket, opts="", **kw) -> mount(...) with
          this test's cache_dir, fast engine and upload retries (RW_OPTS) and opts
  tmpfs        function: factory tmpfs(size) -> path of a tmpfs of that size
          ("64m"), unmounted after the test
  data_bucket  session: seeded objects of part-boundary sizes, 100 MiB, and
          64 small files (layout: SIZES, SMALL_FILES in harness.mount)
"""

import subprocess
import time

import pytest

from harness.mount import (DEFAULT_PART_SIZES, SIZES, SMALL_FILES, DataBucket,
                           new_bucket, payload, seed, size_key, small_size)
from harness.omtools import OmS3


@pytest.fixture
def oms3(s3server):
    return OmS3(s3server.endpoint)


RW_OPTS = "retry_base=0.02,retry_max=0.2,part_size=5M,upload_retry_delay=0.05"


@pytest.fixture
def rw_mount(mount, cache_dir):
    """mount() for tests that change the bucket: -o cache_dir=<this test's>,
    RW_OPTS, then opts; other keyword arguments go to Mount."""
    def make(bucket, opts="", **kw):
        o = "cache_dir=%s,%s" % (cache_dir, RW_OPTS)
        return mount(bucket, o + ("," + opts if opts else ""), **kw)
    return make


@pytest.fixture
def tmpfs(tmp_path):
    """Factory: a directory with a tmpfs of its own (a small or full disk),
    or with fstype="ramfs" a ramfs (no size limit; refuses O_DIRECT)."""
    made = []

    def make(size, fstype="tmpfs"):
        d = tmp_path / ("tmpfs%d" % len(made))
        d.mkdir()
        opts = "size=%s,mode=0700" % size if fstype == "tmpfs" else "mode=0700"
        subprocess.run(["mount", "-t", fstype, "-o", opts, fstype, str(d)], check=True)
        made.append(str(d))
        return str(d)
    yield make
    for d in made:
        for _ in range(50):
            if subprocess.run(["umount", d], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", d], capture_output=True)


# -- a session bucket of seeded objects for read tests -----------------------------
@pytest.fixture(scope="session")
def data_bucket(s3server, s3client):
    """Objects of SIZES and DEFAULT_PART_SIZES at sizes/<n>, and 64 ~110 KB
    files at small/imgNNN.jpg, uploaded once per session. Read-only: tests
    must not change it."""
    objects = {size_key(n): payload(size_key(n), n) for n in SIZES + DEFAULT_PART_SIZES}
    for i, k in enumerate(SMALL_FILES):
        objects[k] = payload(k, small_size(i))
    name = new_bucket(s3client, "data")
    seed(s3client, name, objects)
    return DataBucket(name, objects)
