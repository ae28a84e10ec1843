"""numpy and h5py read arrays through the mount, and h5py writes one.

Reads are compared with the arrays the files were made from; random slices
use a seeded generator, so a failure names a slice that can be replayed."""

import os

import pytest

from harness.mount import get_object

np = pytest.importorskip("numpy")

SLICES = 150


def test_numpy_load_npy(data_mount, loader_data, redirected):
    with redirected():
        for name, want in loader_data.arrays.items():
            if name.startswith("h5/") or name == "big":
                continue  # big.npy: first read by the mmap test
            got = np.load(data_mount.join("arrays/%s.npy" % name))
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.flags.f_contiguous == want.flags.f_contiguous, name
            assert np.array_equal(got, want), "arrays/%s.npy differs" % name


def test_numpy_load_npz(data_mount, loader_data, redirected):
    a = loader_data.arrays
    with redirected():
        with np.load(data_mount.join("arrays/bundle.npz")) as z:
            assert sorted(z.files) == ["r", "x", "y"]
            assert np.array_equal(z["x"], a["floats"])
            assert np.array_equal(z["y"], a["small"])
            assert np.array_equal(z["r"], a["records"])
        with np.load(data_mount.join("arrays/bundle_compressed.npz")) as z:
            assert sorted(z.files) == ["f", "x"]
            assert np.array_equal(z["f"], a["fortran"])  # read before x: zip seeks back
            assert np.array_equal(z["x"], a["floats"])


def test_numpy_mmap_random_slices(data_mount, loader_data, redirected):
    want = loader_data.arrays["big"]
    rng = np.random.default_rng(11)
    with redirected():
        got = np.load(data_mount.join("arrays/big.npy"), mmap_mode="r")
        assert isinstance(got, np.memmap) and got.shape == want.shape and got.dtype == want.dtype
        rows, cols = want.shape
        for i in range(SLICES):
            r0 = int(rng.integers(0, rows))
            r1 = int(rng.integers(r0, min(rows, r0 + 200) + 1))
            c0 = int(rng.integers(0, cols))
            c1 = int(rng.integers(c0, cols + 1))
            step = int(rng.integers(1, 4))
            sl = np.s_[r0:r1:step, c0:c1]
            assert np.array_equal(got[sl], want[sl]), "slice %d: [%d:%d:%d, %d:%d]" % (
                i, r0, r1, step, c0, c1)
        idx = np.sort(rng.choice(rows, 64, replace=False))
        assert np.array_equal(got[idx], want[idx]), "fancy rows %s" % idx.tolist()
        assert np.array_equal(got[:, 777], want[:, 777])  # one value per 8 KiB row
        assert got[-1, -1] == want[-1, -1] and got[0, 0] == want[0, 0]
        assert np.array_equal(np.asarray(got), want)  # every page at the end
        del got


# -- h5py ----------------------------------------------------------------------------
h5py = pytest.importorskip("h5py")


def test_h5py_chunked_compressed_random_slices(data_mount, loader_data, redirected):
    a = loader_data.arrays
    feats, imgs, labels = a["h5/features"], a["h5/images"], a["h5/labels"]
    rng = np.random.default_rng(12)
    with redirected(), h5py.File(data_mount.join("h5/data.h5"), "r") as f:
        ds = f["features"]
        assert ds.chunks == (64, 128) and ds.compression == "gzip" and ds.shuffle
        assert f["images"].compression == "lzf" and f.attrs["classes"] == 1000
        for i in range(SLICES):
            r0 = int(rng.integers(0, feats.shape[0]))
            r1 = int(rng.integers(r0 + 1, min(feats.shape[0], r0 + 300) + 1))
            c0 = int(rng.integers(0, feats.shape[1]))
            c1 = int(rng.integers(c0 + 1, feats.shape[1] + 1))
            assert np.array_equal(ds[r0:r1, c0:c1], feats[r0:r1, c0:c1]), \
                "features slice %d: [%d:%d, %d:%d]" % (i, r0, r1, c0, c1)
        for i in rng.integers(0, imgs.shape[0], 40):  # one sample at a time, as a loader does
            assert np.array_equal(f["images"][int(i)], imgs[int(i)]), "images[%d]" % i
        idx = np.sort(rng.choice(labels.shape[0], 100, replace=False))
        assert np.array_equal(f["labels"][idx], labels[idx])
        assert np.array_equal(f["labels"][:], labels)


class H5Samples:
    """A map-style dataset over an HDF5 file, opened lazily in each DataLoader
    worker (h5py handles do not survive fork): the usual HDF5 loader."""

    def __init__(self, path):
        self.path = path
        self.f = None

    def __len__(self):
        with h5py.File(self.path, "r") as f:
            return f["x"].shape[0]

    def __getitem__(self, i):
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return i, self.f["x"][i], int(self.f["y"][i])


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_h5py_samples_in_dataloader_workers(data_mount, loader_data, redirected):
    """Four workers read one HDF5 file at once, a chunk per sample, two
    shuffled epochs."""
    torch = pytest.importorskip("torch")
    x, y = loader_data.arrays["h5/samples/x"], loader_data.arrays["h5/samples/y"]
    ds = H5Samples(data_mount.join("h5/samples.h5"))
    loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, num_workers=4,
                                         collate_fn=lambda b: b,
                                         generator=torch.Generator().manual_seed(3))
    with redirected():
        for epoch in range(2):
            seen = []
            for batch in loader:
                for i, xi, yi in batch:
                    assert np.array_equal(xi, x[i]) and yi == y[i], \
                        "sample %d differs (epoch %d)" % (i, epoch)
                    seen.append(i)
            assert sorted(seen) == list(range(len(x))), "epoch %d" % epoch


def write_h5(path):
    """A chunked, compressed HDF5 file written the way h5py writes one: slabs,
    a resize, a write back at the front, attributes (metadata flushed behind
    the write position at close)."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2500, 700)).astype(np.float32)
    y = rng.integers(0, 10, size=2500).astype(np.int32)
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", shape=(1500, 700), maxshape=(None, 700), dtype="f4",
                              chunks=(100, 700), compression="gzip", compression_opts=1,
                              shuffle=True)
        for i in range(0, 1500, 300):
            ds[i:i + 300] = x[i:i + 300]
        ds.resize((2500, 700))
        ds[1500:] = x[1500:]
        ds[0:5] = x[0:5] * 3
        f.create_dataset("y", data=y, chunks=(500,), compression="gzip")
        f.attrs["written_through"] = "objmount"
        f["x"].attrs["scale"] = 3.0
    x[0:5] *= 3
    return x, y


def check_h5(path, x, y):
    with h5py.File(path, "r") as f:
        assert f.attrs["written_through"] == "objmount" and f["x"].attrs["scale"] == 3.0
        assert f["x"].shape == x.shape and f["x"].chunks == (100, 700)
        assert np.array_equal(f["x"][:], x)
        assert np.array_equal(f["x"][1234:1400:3, 10:600], x[1234:1400:3, 10:600])
        assert np.array_equal(f["y"][:], y)


def test_h5py_file_written_through_mount_reads_back(mount, bucket, s3client, tmp_path,
                                                    redirected, nothing_recovered):
    m = mount(bucket)
    with redirected("the h5py write"):
        x, y = write_h5(m.join("written.h5"))
    check_h5(m.join("written.h5"), x, y)  # same mount, right after close
    m.unmount()
    local = tmp_path / "fetched.h5"
    local.write_bytes(get_object(s3client, bucket, "written.h5"))
    check_h5(str(local), x, y)
    m2 = mount(bucket)
    with redirected("the reads after remount"):
        check_h5(m2.join("written.h5"), x, y)
    assert os.path.getsize(m2.join("written.h5")) == local.stat().st_size
    nothing_recovered()
