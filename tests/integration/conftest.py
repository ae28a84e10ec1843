"""Fixtures for driving objmount's own programs from pytest.

  oms3    the protocol client (om-s3) against s3server
  mount   function: factory mount(bucket, opts="", prefix=None, endpoint=None,
          **Mount kwargs) -> a started harness.mount.Mount (objmount -f on a
          fresh mount point, endpoint defaulting to s3server). Every mount is
          unmounted at teardown, and the test errors unless each daemon was
          still alive then and exited 0 after the unmount.
  cache_dir    function: a fresh, empty directory for -o cache_dir=
  rw_mount     function: factory rw_mount(bucket, opts="", **kw) -> mount(...) with
          this test's cache_dir, fast engine and upload retries (RW_OPTS) and opts
  data_bucket  session: seeded objects of part-boundary sizes, 100 MiB, and
          64 small files (layout: SIZES, SMALL_FILES in harness.mount)
"""

import pytest

from harness.mount import (DEFAULT_PART_SIZES, SIZES, SMALL_FILES, DataBucket, MountFactory,
                           new_bucket, payload, seed, size_key, small_size)
from harness.omtools import OmS3


@pytest.fixture
def oms3(s3server):
    return OmS3(s3server.endpoint)


@pytest.fixture
def mount(s3server):
    factory = MountFactory(s3server.endpoint)
    try:
        yield factory
    finally:
        factory.finish()


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh cache_dir for one test (objmount puts staging/ and recovery/
    in it); pass it as -o cache_dir= so no test touches the user's cache."""
    d = tmp_path / "cache"
    d.mkdir()
    return str(d)


RW_OPTS = "retry_base=0.02,retry_max=0.2,part_size=5M,upload_retry_delay=0.05"


@pytest.fixture
def rw_mount(mount, cache_dir):
    """mount() for tests that change the bucket: -o cache_dir=<this test's>,
    RW_OPTS, then opts; other keyword arguments go to Mount."""
    def make(bucket, opts="", **kw):
        o = "cache_dir=%s,%s" % (cache_dir, RW_OPTS)
        return mount(bucket, o + ("," + opts if opts else ""), **kw)
    return make


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
