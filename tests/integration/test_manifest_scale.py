"""Manifest mounts at 1,000,000 keys (issue 16), on tools/synthbucket.py.

`objmountctl manifest build` lists the synthetic bucket once; a mount with
-o manifest=FILE then starts and walks directories with no LIST and no HEAD,
stats and reads files with GETs only, and refuses the bytes of objects that
changed since the build: the server is restarted with another object size,
so every ETag differs, and a read must fail rather than return the new
bytes (or a mix).
"""

import errno
import os
import sys

import pytest

from harness.admin import ctl
from harness.mount import check_bytes
from harness.synthserver import REPO_ROOT, mounts_of, serving

sys.path.insert(0, os.path.join(REPO_ROOT, "tools"))
import synthbucket  # noqa: E402

# a synthetic server, not the selected one: run in one pass only (tests/matrix.py, ELSEWHERE)

KEYS = 1_000_000
LAYOUT = dict(fanout=32, per_dir=1000, size=2000)
BUCKET = "bench"


def kinds(srv):
    return srv.stats()["requests"]["by_kind"]


def no_listing_and_no_head(k):
    return (sum(v for n, v in k.items() if n.startswith("ListObjects")) == 0
            and k.get("HeadObject", 0) == 0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A manifest of the 1 M-key bucket, built once for the module."""
    out = str(tmp_path_factory.mktemp("manifest-scale") / "bench.om")
    with serving(tmp_path_factory, KEYS, bucket=BUCKET, **LAYOUT) as srv:
        p = ctl(["manifest", "build", BUCKET, "-o", "endpoint=" + srv.endpoint,
                 "--output", out], timeout=600)
        assert p.returncode == 0, p.stderr
        pages = sum(v for n, v in kinds(srv).items() if n.startswith("ListObjects"))
        assert pages >= KEYS // 1000, kinds(srv)
    show = ctl(["manifest", "show", out])
    assert show.returncode == 0, show.stderr
    assert "{:,}".format(KEYS) in show.stdout or str(KEYS) in show.stdout, show.stdout
    return out


def test_a_start_and_a_walk_send_no_list_and_no_head(built, tmp_path_factory, cache_dir):
    lay = synthbucket.Layout(KEYS, **LAYOUT)
    with serving(tmp_path_factory, KEYS, bucket=BUCKET, **LAYOUT) as srv, \
            mounts_of(srv, cache_dir) as mount:
        srv.stats(reset=True)
        m = mount("manifest=" + built)
        assert no_listing_and_no_head(kinds(srv)), kinds(srv)
        top = sorted(os.listdir(m.path))
        assert len(top) == LAYOUT["fanout"], top
        # a whole first-level subtree, then one file
        n = sum(len(files) for _, _, files in os.walk(m.join(top[0])))
        assert n == sum(1 for i in range(KEYS) if lay.key(i).startswith(top[0] + "/"))
        key = lay.key(123_456)
        assert os.stat(m.join(key)).st_size == LAYOUT["size"]
        assert no_listing_and_no_head(kinds(srv)), kinds(srv)
        with open(m.join(key), "rb") as f:
            got = f.read()
        check_bytes(got, b"".join(lay.chunks(key, 0, lay.size)), key)
        k = kinds(srv)
        assert no_listing_and_no_head(k), k
        assert sum(v for n, v in k.items() if n.startswith("GetObject")) >= 1, k


def test_objects_changed_since_the_build_are_refused(built, tmp_path_factory, cache_dir):
    changed = dict(LAYOUT, size=LAYOUT["size"] + 1)  # every object's bytes and ETag change
    lay = synthbucket.Layout(KEYS, **changed)
    with serving(tmp_path_factory, KEYS, bucket=BUCKET, **changed) as srv, \
            mounts_of(srv, cache_dir) as mount:
        m = mount("manifest=" + built)
        key = lay.key(999_999)
        assert os.stat(m.join(key)).st_size == LAYOUT["size"]  # what the manifest says
        with pytest.raises(OSError) as e:
            with open(m.join(key), "rb") as f:
                f.read()
        assert e.value.errno in (errno.EIO, errno.ESTALE), e.value
        assert "manifest" in m.log, m.log[-2000:]
