"""objmount on tools/synthbucket.py: a bucket of 20,000 keys that exist only
as a formula (8 x 8 directories, 500 files per leaf directory, 40 leaves).

The server is started here on a free loopback port (module scope) and
stopped at the end; mounts go through harness.mount like every other test.
"""

import hashlib
import os
import subprocess
import sys

import pytest

from harness.mount import check_bytes
from harness.synthserver import REPO_ROOT, mounts_of, serving

sys.path.insert(0, os.path.join(REPO_ROOT, "tools"))
import synthbucket  # noqa: E402

# a synthetic server, not the selected one: run in one pass only (tests/matrix.py, ELSEWHERE)

KEYS = 20000
LAYOUT = dict(fanout=8, per_dir=500, size=3000)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    with serving(tmp_path_factory, KEYS, bucket="bench", **LAYOUT) as srv:
        yield srv


@pytest.fixture
def synth_mount(synth, cache_dir):
    """mount(opts="") -> objmount on the synthetic bucket, with this test's cache_dir."""
    with mounts_of(synth, cache_dir) as make:
        yield make


def layout():
    return synthbucket.Layout(KEYS, **LAYOUT)


def kinds(stats):
    return stats["requests"]["by_kind"]


def test_layout_of_the_server_is_the_expected_one(synth):
    assert synth.layout["depth"] == 2 and synth.layout["keys"] == KEYS


def test_find_counts_every_key(synth, synth_mount):
    m = synth_mount("profile=training,ro")
    out = subprocess.run(["find", m.path, "-type", "f"], capture_output=True, text=True,
                         check=True, timeout=300).stdout.split("\n")[:-1]
    assert len(out) == KEYS
    lay = layout()
    got = sorted(os.path.relpath(p, m.path) for p in out)
    assert got == [lay.key(i) for i in range(KEYS)]


@pytest.mark.parametrize("index", [0, 499, 500, 12345, KEYS - 1])
def test_file_contents_and_sizes_are_the_generated_ones(synth, synth_mount, index):
    m = synth_mount("profile=training,ro")
    lay = layout()
    key = lay.key(index)
    want = b"".join(lay.chunks(key, 0, lay.size))
    assert os.stat(m.join(key)).st_size == lay.size == len(want)
    with open(m.join(key), "rb") as f:
        got = f.read()
    check_bytes(got, want, key)
    assert hashlib.md5(got).hexdigest() == lay.etag(key)
    with open(m.join(key), "rb") as f:  # a read in the middle
        check_bytes(os.pread(f.fileno(), 100, 2950), want[2950:], key + " at 2950")


def test_key_not_in_the_set_is_enoent(synth, synth_mount):
    m = synth_mount("profile=training,ro")
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("d0004", "d0008", "f000000.jpg"))  # leaf 40: past the last key
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("d0000", "d0000", "f000500.jpg"))  # past per_dir


@pytest.mark.parametrize("opts", ["profile=training,ro", "ro"])
def test_ls_l_of_a_directory_sends_no_head(synth, synth_mount, opts):
    m = synth_mount(opts)
    d = m.join("d0003", "d0002")
    os.stat(d)  # the lookups of the path itself are not ls -l's
    synth.stats(reset=True)
    lines = subprocess.run(["ls", "-l", d], capture_output=True, text=True, check=True,
                           timeout=120).stdout.splitlines()
    st = kinds(synth.stats())
    assert len(lines) == 1 + 500  # "total" and one line per key
    assert all(" 3000 " in line for line in lines[1:])
    assert st.get("HeadObject", 0) == 0, st
    assert st.get("GetObject", 0) == 0 and st.get("GetObjectRange", 0) == 0, st
    assert st.get("ListObjectsV2", 0) >= 1, st
