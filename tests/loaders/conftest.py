"""Fixtures for the loader tests: unmodified Debian python3 loaders (PIL,
torchvision, numpy, h5py, torch, tarfile) over a real objmount mount.

Every test runs twice, over the fixture `backend`:
  direct    objmount -> the test server (versitygw, Swift or AIStore) directly
  aistore   objmount -> the fault proxy's AIStore gateway (every object
            request answered with 307 to the target; endpoint path /s3)

  loader_data   session: the data set, generated locally (deterministic) in a
                temporary directory and uploaded with boto3 to one bucket;
                `.local(rel)` is the local copy of the object `rel`
  backend       session, parametrized: .name, .endpoint, .redirects() (the
                gateway's redirect count; None for the others)
  data_mount    a read mount of loader_data's bucket over `backend`, shared by
                the tests of one backend; each test checks the daemon is still
                alive afterwards, and the session ends with a clean unmount
                (the daemon exits 0) or an error
  mount         function: factory mount(bucket, opts="", **kw) -> a started
                Mount on backend.endpoint with cache_dir= and fast retries
                (harness.mount.MountFactory); unmounted and checked at teardown
  redirected    context manager: the block must have caused redirects on the
                aistore backend (proves the data went through the gateway)
  nothing_recovered
                function: call to assert no commit left data in recovery/

Mount options: cache_dir=<tmp>,retry_base=0.02,retry_max=0.2, plus
$OBJMOUNT_LOADER_OPTS when set (e.g. log_level=debug to keep a debug log; the
log of a failing mount is printed by its unmount check).
"""

import contextlib
import io
import json
import os
import random
import struct
import tarfile
import zlib

import pytest

from harness import servers
from harness.faultproxy import FaultProxy
from harness.mount import IMPL, MountFactory, new_bucket, seed

FAST = "retry_base=0.02,retry_max=0.2"
EXTRA_OPTS = os.environ.get("OBJMOUNT_LOADER_OPTS", "")

# image tree for ImageFolder: CLASSES x PER_CLASS
CLASSES = ["cat", "dog", "fish", "owl"]
PER_CLASS = 25


def mount_opts(cache_dir, *more):
    return ",".join(o for o in ("cache_dir=" + cache_dir, FAST, EXTRA_OPTS) + more if o)


# -- the data set ------------------------------------------------------------------
def _image(rng, h, w, mode):
    """A photo-like picture: gradients plus noise (JPEG sizes vary like photos)."""
    import numpy as np

    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)),
                     ((x + y) * 127 // max(h + w - 2, 1))], axis=-1)
    noise = rng.integers(-60, 61, size=(h, w, 3))
    amount = rng.uniform(0.1, 1.0)
    arr = np.clip(base + noise * amount, 0, 255).astype(np.uint8)
    from PIL import Image

    img = Image.fromarray(arr, "RGB")
    if mode == "L":
        img = img.convert("L")
    elif mode == "RGBA":
        alpha = Image.fromarray(rng.integers(0, 256, size=(h, w), dtype=np.uint8), "L")
        img.putalpha(alpha)
    return img


def _encode(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def write_records(payloads):
    """TFRecord-style framing: uint64 LE length, uint32 crc32 of those 8 bytes,
    payload, uint32 crc32 of the payload (zlib's crc32, not TF's masked crc32c)."""
    out = io.BytesIO()
    for p in payloads:
        hdr = struct.pack("<Q", len(p))
        out.write(hdr)
        out.write(struct.pack("<I", zlib.crc32(hdr)))
        out.write(p)
        out.write(struct.pack("<I", zlib.crc32(p)))
    return out.getvalue()


class LoaderData:
    """bucket; root (local directory mirroring the bucket); objects {key: bytes};
    records (payloads of records/train-00000.rec, in order); tar_members
    {key: [(name, bytes)] in order} of shards/shard-00000N.tar; arrays {name: ndarray}."""

    def __init__(self, root):
        self.root = root
        self.bucket = None
        self.objects = {}
        self.records = []
        self.tar_members = {}
        self.arrays = {}
        self.classes, self.per_class = CLASSES, PER_CLASS

    def add(self, key, data):
        self.objects[key] = data
        path = self.local(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def local(self, key):
        return os.path.join(self.root, key)

    def keys(self, prefix):
        return sorted(k for k in self.objects if k.startswith(prefix))


def _gen_images(d, rng):
    # single images for PIL: JPEG (baseline, progressive, greyscale), PNG
    # (RGB, RGBA, L, and one noise PNG of several MiB: ranged reads)
    import numpy as np
    from PIL import Image

    for i, (h, w) in enumerate([(240, 320), (480, 640), (17, 33), (1200, 900)]):
        d.add("images/photo_%d.jpg" % i, _encode(_image(rng, h, w, "RGB"), "JPEG", quality=90))
    d.add("images/progressive.jpg",
          _encode(_image(rng, 300, 400, "RGB"), "JPEG", quality=85, progressive=True))
    d.add("images/grey.jpg", _encode(_image(rng, 200, 300, "L"), "JPEG", quality=80))
    d.add("images/rgb.png", _encode(_image(rng, 256, 256, "RGB"), "PNG"))
    d.add("images/rgba.png", _encode(_image(rng, 200, 150, "RGBA"), "PNG"))
    d.add("images/grey.png", _encode(_image(rng, 64, 640, "L"), "PNG"))
    noise = rng.integers(0, 256, size=(1100, 1100, 3), dtype=np.uint8)
    d.add("images/noise.png", _encode(Image.fromarray(noise, "RGB"), "PNG", compress_level=1))
    # class-per-directory tree for ImageFolder (a few PNGs among the JPEGs)
    for c in CLASSES:
        for i in range(PER_CLASS):
            h, w = int(rng.integers(64, 320)), int(rng.integers(64, 320))
            img = _image(rng, h, w, "RGB")
            if i % 10 == 7:
                d.add("tree/%s/%s_%03d.png" % (c, c, i), _encode(img, "PNG"))
            else:
                d.add("tree/%s/%s_%03d.jpg" % (c, c, i), _encode(img, "JPEG", quality=88))


def _gen_arrays(d, rng):
    import numpy as np

    arrs = {
        "small": np.arange(17, dtype=np.int16),
        "floats": rng.standard_normal((700, 500)).astype(np.float32),  # 1.4 MB
        "fortran": np.asfortranarray(rng.integers(0, 1 << 30, size=(300, 211), dtype=np.int64)),
        "records": np.array([(i, i * 0.5, b"name%d" % i) for i in range(1000)],
                            dtype=[("id", "<i4"), ("w", "<f8"), ("name", "S12")]),
        "big": rng.standard_normal((3000, 2048)).astype(np.float32),  # 24 MiB, for mmap
    }
    for name, a in arrs.items():
        b = io.BytesIO()
        np.save(b, a)
        d.add("arrays/%s.npy" % name, b.getvalue())
    d.arrays = arrs
    b = io.BytesIO()
    np.savez(b, x=arrs["floats"], y=arrs["small"], r=arrs["records"])
    d.add("arrays/bundle.npz", b.getvalue())
    b = io.BytesIO()
    np.savez_compressed(b, x=arrs["floats"], f=arrs["fortran"])
    d.add("arrays/bundle_compressed.npz", b.getvalue())


def _gen_h5(d, rng, tmp):
    import h5py
    import numpy as np

    feats = rng.standard_normal((6000, 512)).astype(np.float32)  # 12 MiB raw
    imgs = rng.integers(0, 256, size=(400, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 1000, size=6000).astype(np.int64)
    path = os.path.join(tmp, "data.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=feats, chunks=(64, 128), compression="gzip",
                         compression_opts=4, shuffle=True)
        f.create_dataset("images", data=imgs, chunks=(16, 32, 32, 3), compression="lzf")
        f.create_dataset("labels", data=labels, chunks=(1000,), compression="gzip")
        f.attrs["classes"] = 1000
    with open(path, "rb") as f:
        d.add("h5/data.h5", f.read())
    d.arrays.update({"h5/features": feats, "h5/images": imgs, "h5/labels": labels})
    # one sample per chunk, read by DataLoader workers
    samples = rng.integers(0, 256, size=(600, 48, 48, 3), dtype=np.uint8)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=samples, chunks=(1, 48, 48, 3), compression="gzip")
        f.create_dataset("y", data=labels[:600], chunks=(600,))
    with open(path, "rb") as f:
        d.add("h5/samples.h5", f.read())
    os.unlink(path)
    d.arrays.update({"h5/samples/x": samples, "h5/samples/y": labels[:600]})


def _gen_streams(d):
    r = random.Random(6)
    sizes = [r.choice([0, 1, 7, 100, 4096]) if i % 17 == 0 else
             (r.randint(1 << 20, 3 << 20) if i % 53 == 0 else r.randint(1, 150_000))
             for i in range(400)]
    d.records = [r.randbytes(n) for n in sizes]
    d.add("records/train-00000.rec", write_records(d.records))
    # WebDataset-style shards: per sample <key>.jpg, <key>.cls, <key>.json, in order
    jpgs = [d.objects[k] for k in d.keys("tree/") if k.endswith(".jpg")]
    for shard in range(2):
        members = []
        for i in range(shard * 240, shard * 240 + 240):
            key = "sample%06d" % i
            members.append((key + ".jpg", jpgs[i % len(jpgs)] if jpgs else r.randbytes(50_000)))
            members.append((key + ".cls", b"%d" % (i % 7)))
            members.append((key + ".json", json.dumps({"i": i, "pad": "x" * r.randint(0, 3000)})
                            .encode()))
            if i % 40 == 0:
                members.append((key + ".bin", r.randbytes(r.randint(1 << 20, 2 << 20))))
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
            for name, data in members:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime, ti.mode = len(data), 1700000000, 0o644
                t.addfile(ti, io.BytesIO(data))
        key = "shards/shard-%06d.tar" % shard
        d.tar_members[key] = members
        d.add(key, out.getvalue())


@pytest.fixture(scope="session")
def loader_data(s3server, s3client, tmp_path_factory):
    import numpy as np

    root = str(tmp_path_factory.mktemp("loader-data"))
    d = LoaderData(os.path.join(root, "local"))
    rng = np.random.default_rng(2024)
    _gen_images(d, rng)
    _gen_arrays(d, rng)
    _gen_h5(d, rng, root)
    _gen_streams(d)
    d.bucket = new_bucket(s3client, "loaders")
    seed(s3client, d.bucket, d.objects)
    return d


# -- backends -----------------------------------------------------------------------
class Backend:
    def __init__(self, name, endpoint, proxy=None):
        self.name = name
        self.endpoint = endpoint
        self.proxy = proxy

    def redirects(self):
        return self.proxy.redirects_issued() if self.proxy else None

    def __repr__(self):
        return self.name


@pytest.fixture(scope="session")
def aistore_proxy(s3server):
    fp = FaultProxy(s3server)
    fp.start()
    try:
        yield fp
    finally:
        fp.stop()


def _backends():
    """Every loader test runs straight against the server and, on S3 servers
    without redirects, through the fault proxy's AIStore gateway (its 307s to
    a target); a real AIStore cluster redirects by itself, so there the
    emulation would only be a second, weaker copy of the direct run."""
    if servers.selected() in servers.AISTORE_KINDS:
        return ["direct"]
    return ["direct", "aistore"]


@pytest.fixture(scope="session", params=_backends())
def backend(request, s3server):
    if request.param == "direct":
        return Backend(s3server.kind, s3server.endpoint)
    fp = request.getfixturevalue("aistore_proxy")
    return Backend("aistore", fp.gateway_endpoint, fp)


@pytest.fixture
def redirected(backend):
    @contextlib.contextmanager
    def check(what="the reads"):
        before = backend.redirects()
        yield
        if backend.proxy is not None:
            after = backend.redirects()
            assert after > before, "%s caused no redirect at the AIStore gateway" % what

    return check


@pytest.fixture(scope="session")
def _data_mounts(tmp_path_factory):
    factory = MountFactory(None)
    try:
        yield factory
    finally:
        factory.finish()


@pytest.fixture(scope="session")
def _shared_mount(backend, loader_data, _data_mounts, tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache-" + backend.name))
    m = _data_mounts(loader_data.bucket, mount_opts(cache), endpoint=backend.endpoint)
    yield m
    m.unmount()  # raises (with the daemon's log) unless it exited 0


@pytest.fixture
def data_mount(_shared_mount):
    yield _shared_mount
    _shared_mount.check_alive()


@pytest.fixture
def cache_dir(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    return str(d)


@pytest.fixture
def nothing_recovered(cache_dir):
    """Call it to assert objmount kept nothing in cache_dir/recovery (no
    commit failed). No-op under OBJMOUNT_TEST_MOUNT=s3fs (no recovery)."""

    def check():
        if IMPL == "objmount":
            kept = os.listdir(os.path.join(cache_dir, "recovery"))
            assert not kept, "commits failed; kept in recovery: %s" % kept

    return check


@pytest.fixture
def mount(backend, cache_dir):
    factory = MountFactory(backend.endpoint)

    def start(bucket, opts="", **kw):
        return factory(bucket, mount_opts(cache_dir, opts), **kw)

    start.finish = factory.finish
    try:
        yield start
    finally:
        factory.finish()
