"""DALI's readers through the mount (issue 35): what `fn.readers.file` and
`fn.readers.webdataset` do with files, replayed with the system Python on
every server of the harness.

DALI's own S3 tests read a tree of class folders with the file reader and
WebDataset tars with the webdataset reader, with and without index files.
Both readers map files with mmap unless `dont_use_mmap=True` (then one
read of the whole file, or of a member's range), and the webdataset reader
with an index (tools/wds2idx.py's v1.2 text) goes straight to each
member's offset, a worker taking every N-th sample (`shard_id` of
`num_shards`); without an index it walks the tar's headers with seeks.
DALI itself, a wheel of hundreds of MB, runs over the mount in the
benchmark's environment (tools/bench/loaders.py, the `dali-mount` rows);
these tests replay its access pattern so that every server's pass checks
the bytes it would get.
"""

import contextlib
import io
import mmap
import os
import random
import tarfile

import pytest

from harness.tars import dali_samples


def read_whole(path, use_mmap):
    """A file as DALI's file reader gets it: mapped, or one read of its size."""
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        if use_mmap:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return bytes(mm)
        data = os.read(f.fileno(), size)
        assert len(data) == size, "%s: one read gave %d of %d bytes" % (path, len(data), size)
        return data


def file_root_samples(root):
    """fn.readers.file(file_root=root): the class folders sorted, labels by
    their index, the files of each sorted."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    return [(os.path.join(c, f), label)
            for label, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))]


@pytest.mark.parametrize("use_mmap", [True, False], ids=["mmap", "dont_use_mmap"])
def test_file_reader_over_a_class_tree(data_mount, loader_data, redirected, use_mmap):
    root = data_mount.join("tree")
    samples = file_root_samples(root)
    want = [(k[len("tree/"):], loader_data.classes.index(k.split("/")[1]))
            for k in loader_data.keys("tree/")]
    assert samples == want
    order = list(range(len(samples)))
    random.Random(35).shuffle(order)  # random_shuffle=True
    # the first pass must have gone through the gateway; the second may be
    # answered by the page cache and objmount's buffers
    with redirected() if use_mmap else contextlib.nullcontext():
        for i in order:
            rel, _ = samples[i]
            got = read_whole(os.path.join(root, rel), use_mmap)
            assert got == loader_data.objects["tree/" + rel], rel


def test_file_reader_with_a_file_list(data_mount, loader_data, tmp_path):
    """fn.readers.file(file_root=..., file_list=...): "PATH LABEL" lines,
    paths relative to file_root, read in the list's order."""
    keys = loader_data.keys("tree/")[::3]
    lines = ["%s %d" % (k[len("tree/"):], i % 7) for i, k in enumerate(keys)]
    listing = tmp_path / "file_list.txt"
    listing.write_text("\n".join(lines) + "\n")
    root = data_mount.join("tree")
    for line in listing.read_text().splitlines():
        rel, label = line.rsplit(" ", 1)
        assert 0 <= int(label) < 7
        assert read_whole(os.path.join(root, rel), True) == loader_data.objects["tree/" + rel]


def shard_keys(loader_data):
    return sorted(loader_data.tar_members)


@pytest.mark.parametrize("use_mmap", [True, False], ids=["mmap", "dont_use_mmap"])
def test_webdataset_reader_with_an_index(data_mount, loader_data, redirected, use_mmap):
    """Two workers (num_shards=2) each take every other sample of each tar,
    going to the members' offsets the index gives."""
    for key in shard_keys(loader_data):
        with open(loader_data.local(key), "rb") as f:
            samples = dali_samples(f)  # the index wds2idx would write
        members = dict(loader_data.tar_members[key])
        assert sum(len(s) for s in samples) == len(members)
        path = data_mount.join(key)
        with redirected("the reads of %s" % key) if use_mmap else contextlib.nullcontext():
            for shard_id in range(2):
                with open(path, "rb", buffering=0) as f:
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if use_mmap else None
                    try:
                        for sample in samples[shard_id::2]:
                            for _ext, off, size, name in sample:
                                got = (mm[off:off + size] if mm is not None
                                       else os.pread(f.fileno(), size, off))
                                assert got == members[name], "%s in %s" % (name, key)
                    finally:
                        if mm is not None:
                            mm.close()


def test_webdataset_reader_without_an_index(data_mount, loader_data):
    """Without an index the reader walks the headers, seeking from one to
    the next (tarfile's random-access mode does the same), then reads each
    sample's members."""
    for key in shard_keys(loader_data):
        want = loader_data.tar_members[key]
        with open(data_mount.join(key), "rb", buffering=0) as raw:
            f = io.BufferedReader(raw, buffer_size=512)  # header-sized reads, then seeks
            with tarfile.open(fileobj=f, mode="r:") as tar:
                found = [(ti.name, ti.offset_data, ti.size) for ti in tar if ti.isfile()]
            assert [n for n, _, _ in found] == [n for n, _ in want]
            for (name, off, size), (_, data) in zip(found, want):
                assert os.pread(raw.fileno(), size, off) == data, "%s in %s" % (name, key)
