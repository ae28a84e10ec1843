"""Shared pytest fixtures for objmount's Python-driven tests.

Run with Debian's interpreter (boto3 and pytest come from Debian):
    /usr/bin/python3 -m pytest tests/...

The server is versitygw unless `--server NAME` (or OBJMOUNT_TEST_SERVER=NAME)
selects another kind of harness.servers (swift, aistore, aistore-proxy, ais);
the fixtures below give the selected server's endpoint and credentials either
way. tests/matrix.py says which test files run on which kind.

Fixtures here are generic test infrastructure:
  s3server     session: the selected server on free loopback ports; .kind
               names it (endpoint: what objmount is given)
  bucket       function: a fresh, empty bucket name on s3server
  s3client     session: boto3 client straight to s3server (botocore retries)
  s3raw        session: boto3 client straight to s3server, no retries
  faultproxy   function: a FaultProxy in front of s3server, faults off
  mount        function: factory mount(bucket, opts="", prefix=None, endpoint=None,
               **Mount kwargs) -> a started harness.mount.Mount (objmount -f on
               a fresh mount point, endpoint defaulting to s3server; fault tests
               pass endpoint=faultproxy.endpoint). Every mount is unmounted at
               teardown, and the test errors unless each daemon was still alive
               then and exited 0 after the unmount.
  cache_dir    function: a fresh, empty directory for -o cache_dir=
Every server is stopped at the end of its scope, on failure and on Ctrl-C
too (fixture finalizers, an atexit hook, and PR_SET_PDEATHSIG in the child).
tests/loaders overrides mount and cache_dir with its own.
"""

import itertools
import os
import sys
import time
import uuid

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from harness.faultproxy import FaultProxy  # noqa: E402
from harness.mount import MountFactory  # noqa: E402
from harness import servers  # noqa: E402
from harness.procs import ServerNotInstalled  # noqa: E402
import matrix  # noqa: E402

_bucket_numbers = itertools.count(1)


def pytest_addoption(parser):
    parser.addoption("--server", choices=servers.KINDS, default=None,
                     help="server to test against (default: $%s or %s)"
                     % (servers.ENV, servers.DEFAULT))


def pytest_configure(config):
    kind = config.getoption("server")
    servers.select(kind or servers.selected())


def pytest_collection_modifyitems(config, items):
    """Keep the files tests/matrix.py runs on the selected kind; skip, with
    the table's reason, those it names a reason for; drop the rest (files
    that run once, on another kind)."""
    kind = servers.selected()
    keep, drop = [], []
    names = {}
    for item in items:
        path = os.path.relpath(str(item.fspath), TESTS_DIR)
        run, reason = matrix.runs(path, kind)
        if run:
            names.setdefault(path, []).append(item.name)
            why, _ = matrix.test_skip(path, item.name, kind)
            if why:
                item.add_marker(pytest.mark.skip(reason="not on %s: %s" % (kind, why)))
            keep.append(item)
        elif reason:
            item.add_marker(pytest.mark.skip(reason="not on %s: %s" % (kind, reason)))
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    # stale entries are looked for only when whole files were collected (no
    # -k, -m or FILE::NAME selection)
    if not (config.option.keyword or config.option.markexpr
            or any("::" in a for a in config.args)):
        stale = [key for path, got in names.items()
                 for key in matrix.unused_skips(path, got, kind)]
        if stale:
            raise pytest.UsageError("tests/matrix.py TESTS names tests that do not exist on %s: %s"
                                    % (kind, ", ".join("%s::%s" % k for k in stale)))


def pytest_report_header(config):
    return "objmount test server: " + servers.selected()


def start_server(attempts=3):
    """A started server of the selected kind. A start that fails (Swift's
    five ports are picked free and then bound by its own processes, so
    another pytest worker can take one in between; a loaded machine can miss
    the start-up deadline) is retried on fresh ports after a pause."""
    for attempt in range(1, attempts + 1):
        srv = servers.server_class()()
        try:
            return srv.start()
        except Exception as e:  # noqa: BLE001 - reported when the last attempt fails
            if attempt == attempts or isinstance(e, ServerNotInstalled):
                raise
            sys.stderr.write("test server did not start (attempt %d of %d): %s\n"
                             % (attempt, attempts, str(e).splitlines()[0] if str(e) else e))
            time.sleep(2 * attempt)


@pytest.fixture(scope="session")
def s3server():
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def s3client(s3server):
    """boto3 for test set-up and checks. A loaded or briefly full machine
    makes a server answer 503 now and then (Swift answered CreateBucket with
    503 while another process filled the disk, and 77 tests of two modules
    errored in set-up): up to 10 attempts with backoff (botocore's standard
    mode, about two minutes in all) before a set-up step fails."""
    return s3server.client(retries=10)


@pytest.fixture(scope="session")
def s3raw(s3server):
    return s3server.client(retries=0)


@pytest.fixture
def bucket(s3server, s3client):
    """A new empty bucket for this test (name: t<N>-<random>)."""
    name = "t%d-%s" % (next(_bucket_numbers), uuid.uuid4().hex[:8])
    s3client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def faultproxy(s3server):
    fp = FaultProxy(s3server)
    fp.start()
    try:
        yield fp
    finally:
        fp.stop()


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
