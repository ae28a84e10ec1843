"""Fixtures for fault tests of the mount.

  mount   function: factory mount(bucket, opts="", prefix=None, endpoint=None,
          **Mount kwargs) -> a started harness.mount.Mount; tests here pass
          endpoint=faultproxy.endpoint (or .gateway_endpoint). Unmounted at
          teardown; the test errors unless each daemon exited 0 after it.
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
