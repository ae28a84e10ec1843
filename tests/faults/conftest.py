"""Fixtures for fault tests of the mount.

  mount   function: factory mount(bucket, opts="", prefix=None, endpoint=None,
          **Mount kwargs) -> a started harness.mount.Mount; tests here pass
          endpoint=faultproxy.endpoint (or .gateway_endpoint). Unmounted at
          teardown; the test errors unless each daemon exited 0 after it.
  cache_dir  function: a fresh, empty directory for -o cache_dir=
"""

import pytest

from harness.mount import MountFactory


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
