"""Files written through the mount by h5py and torch.save are stored intact.

h5py writes a chunked, gzip-compressed dataset that it grows and then seeks
back into (superblock, B-tree and heap updates land behind the write
position); torch.save writes a zip archive and the caller fsyncs before
closing. The stored object is fetched with boto3 and loaded locally: it must
load, hold the same values, and be byte-identical to the same file written
to local disk by the same calls."""

import io
import os

import pytest

from harness.mount import check_bytes, get_object, wait_for

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

WRITE_OPTS = "part_size=5M,upload_retry_delay=0.05"


def rw(mount, bucket, cache_dir):
    return mount(bucket, "%s,cache_dir=%s" % (WRITE_OPTS, cache_dir))


def nothing_left(cache_dir):
    staging, recovery = (os.path.join(cache_dir, d) for d in ("staging", "recovery"))
    assert wait_for(lambda: not os.listdir(staging), 10), os.listdir(staging)
    assert not os.listdir(recovery), os.listdir(recovery)


def write_h5(path):
    """A ~14 MB HDF5 file (three 5 MiB parts): a chunked gzip dataset
    written in slabs, then resized and written again at the front, plus
    attributes; no timestamps, so equal calls give equal bytes."""
    rng = np.random.default_rng(7)
    data = rng.standard_normal((3000, 1200)).astype(np.float32)
    labels = np.arange(3000, dtype=np.int64) * 7 % 1000
    with h5py.File(path, "w") as f:  # libver earliest: the root group has no times
        ds = f.create_dataset("x", shape=(2000, 1200), maxshape=(None, 1200), dtype="f4",
                              chunks=(100, 1200), compression="gzip", compression_opts=1,
                              track_times=False)
        for i in range(0, 2000, 250):
            ds[i:i + 250] = data[i:i + 250]
        ds.resize((3000, 1200))
        ds[2000:] = data[2000:]
        ds[0:10] = data[0:10] * 2  # back to the first chunk
        f.create_dataset("y", data=labels, chunks=(500,), compression="gzip",
                         track_times=False)
        f.attrs["epoch"] = 3
        f["x"].attrs["note"] = "seeked back"
    data[0:10] *= 2
    return data, labels


def test_h5py_chunked_compressed_file_reads_back_identical(mount, bucket, s3client, cache_dir,
                                                           tmp_path):
    m = rw(mount, bucket, cache_dir)
    data, labels = write_h5(m.join("data.h5"))
    reference = tmp_path / "ref.h5"
    write_h5(str(reference))
    stored = get_object(s3client, bucket, "data.h5")
    got = tmp_path / "got.h5"
    got.write_bytes(stored)
    with h5py.File(got, "r") as f:
        assert f.attrs["epoch"] == 3
        assert f["x"].attrs["note"] == "seeked back"
        assert f["x"].compression == "gzip" and f["x"].chunks == (100, 1200)
        np.testing.assert_array_equal(f["x"][:], data)
        np.testing.assert_array_equal(f["y"][:], labels)
    check_bytes(stored, reference.read_bytes(), "data.h5 against the same file written locally")
    nothing_left(cache_dir)


def checkpoint():
    g = torch.Generator().manual_seed(3)
    return {"epoch": 12,
            "model": {"w%d" % i: torch.randn(512, 1024, generator=g) for i in range(6)},
            "opt": {"lr": 0.1, "step": torch.tensor(1234)},
            "ids": torch.arange(100000, dtype=torch.int64)}


@pytest.mark.parametrize("close_first", [False, True], ids=["fsync-then-check", "close"])
def test_torch_save_with_fsync_reads_back_identical(mount, bucket, s3client, cache_dir,
                                                    close_first):
    m = rw(mount, bucket, cache_dir)
    ckpt = checkpoint()
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    want = buf.getvalue()
    assert len(want) > 12 * 2 ** 20  # multipart with 5 MiB parts
    with open(m.join("ckpt.pt"), "wb") as f:
        torch.save(ckpt, f)
        f.flush()
        os.fsync(f.fileno())
        if not close_first:
            # fsync committed: the object is complete before close
            check_bytes(get_object(s3client, bucket, "ckpt.pt"), want, "ckpt.pt after fsync")
    stored = get_object(s3client, bucket, "ckpt.pt")
    check_bytes(stored, want, "ckpt.pt against torch.save to memory")
    loaded = torch.load(io.BytesIO(stored), weights_only=False)
    assert loaded["epoch"] == 12 and loaded["opt"]["lr"] == 0.1
    assert torch.equal(loaded["opt"]["step"], ckpt["opt"]["step"])
    assert torch.equal(loaded["ids"], ckpt["ids"])
    for k, v in ckpt["model"].items():
        assert torch.equal(loaded["model"][k], v), k
    nothing_left(cache_dir)
