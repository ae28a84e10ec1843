"""One measured read of one dataset by one loader library (tools/bench/loaders.py
runs this file with the peers venv's python, tools/bench/setup_peers.sh).

    PEERS_PY tools/bench/loader_clients.py SPEC.json

SPEC (JSON): client, dataset, workers, seed, and where the data is:
  root      a directory (files clients) or an s3://bench/PREFIX/ URI
  endpoint  the S3 or AIStore endpoint (through the fault proxy)
  region    the S3 region; AWS keys come from the environment
  names     the dataset's object names under the prefix (images, npz)
  key       the object of the h5 and big datasets; size its size
  h5_offset the byte offset of the HDF5 dataset "x" (contiguous layout)
  windows   [[offset, length], ...] of the h5 dataset, in bytes of "x"

Datasets:
  images  every file once, shuffled (seeded), batches of 32
  npz     every file once, shuffled, each np.load()ed (arrays materialised)
  h5      the windows of "x" read through h5py (the file opened once per worker)
  big     the one object read whole, sequentially (1 MiB reads)

Clients (the same `workers` for each: DataLoader worker processes, or the
library's own concurrency where it recommends num_workers=0):
  files       plain torch DataLoader over files (objmount's mount, local disk)
  s3torch     s3torchconnector S3MapDataset (images, npz), S3Client range-based
              readers under h5py (h5), sequential reader (big)
  s3dlio      s3dlio ObjectStoreIterableDataset (its Rust loader, `workers`
              concurrent GETs, DataLoader num_workers=0 as it recommends),
              get_range under h5py (h5), get (big)
  dali        DALI fn.readers.file (CPU pipeline, device_id=None, num_threads=workers)
              over root: s3:// or a directory; no HDF5 reader (h5 is n/a)
  ais-map     AIStore SDK AISMapDataset in a DataLoader (images, npz); range
              reads under h5py (h5); get_reader(num_workers=workers) (big)
  ais-get     AIStore SDK plain object gets from `workers` threads

Prints one JSON line: samples, bytes, seconds (the epoch: from after the
imports, less the set-up such as a dataset's listing), setup_seconds,
epoch_cpu_s (CPU of this process and its reaped workers from after the
imports); or error (type and message) when the library
failed: the caller makes that a row, not a crash.
"""

import io
import json
import os
import random
import sys
import time
import traceback

MiB = 1 << 20
BATCH_IMAGES = 32


# -- file-like objects over range GETs, for h5py -------------------------------
class RangeFile(io.RawIOBase):
    """A read-only file over a function get(offset, length) -> bytes: what h5py
    needs (read, readinto, seek, tell) from a library that only gets ranges."""

    def __init__(self, get, size):
        self._get, self._size, self._pos = get, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, off, whence=0):
        self._pos = off if whence == 0 else (self._pos + off if whence == 1 else self._size + off)
        return self._pos

    def tell(self):
        return self._pos

    def readinto(self, b):
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._get(self._pos, n)
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)


# -- datasets over files ---------------------------------------------------------
class ListDS:
    """Map-style dataset: item i = fetch(names[i]) -> number of bytes."""

    def __init__(self, names, fetch):
        self.names, self.fetch = names, fetch

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        return self.fetch(self.names[i])


class WindowDS:
    """Item i = window i of the h5 dataset "x", read through h5py from the file
    opened (once per worker process) by opener()."""

    def __init__(self, windows, opener):
        self.windows, self.opener, self.h5 = windows, opener, None

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        import h5py

        if self.h5 is None:
            self.h5 = h5py.File(self.opener(), "r")
        off, n = self.windows[i]
        return int(self.h5["x"][off:off + n].nbytes)


def npz_bytes(data):
    """np.load() every array of an npz (a file object or any buffer)."""
    import numpy as np

    with np.load(data if hasattr(data, "read") else io.BytesIO(memoryview(data))) as z:
        return int(sum(z[k].nbytes for k in z.files))


def sum_lengths(batch):
    return sum(batch) if isinstance(batch, list) else int(batch.sum())


def run_loader(ds, workers, seed, batch):
    import torch
    from torch.utils.data import DataLoader

    g = torch.Generator()
    g.manual_seed(seed)
    dl = DataLoader(ds, batch_size=batch, shuffle=True, generator=g, num_workers=workers,
                    collate_fn=list, persistent_workers=False)
    samples = nbytes = 0
    it = iter(dl)
    for b in it:
        samples += len(b)
        nbytes += sum(b)
    del it  # joins the workers: their CPU is then in RUSAGE_CHILDREN
    return samples, nbytes


# -- clients ------------------------------------------------------------------------
def c_files(spec):
    root, ds, w, seed = spec["root"], spec["dataset"], spec["workers"], spec["seed"]
    if ds == "images":
        def fetch(n):
            with open(os.path.join(root, n), "rb") as f:
                return len(f.read())
        return run_loader(ListDS(spec["names"], fetch), w, seed, BATCH_IMAGES)
    if ds == "npz":
        def fetch(n):
            with open(os.path.join(root, n), "rb") as f:
                return npz_bytes(f)
        return run_loader(ListDS(spec["names"], fetch), w, seed, 1)
    path = os.path.join(root, spec["key"])
    if ds == "h5":
        return run_loader(WindowDS(spec["windows"], lambda: path), w, seed, 1)
    return read_sequential(open(path, "rb", buffering=0))


def read_sequential(f):
    buf = bytearray(MiB)
    n = 0
    with f:
        while True:
            got = f.readinto(buf)
            if not got:
                break
            n += got
    return 1, n


def s3torch_client(spec):
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client

    return S3Client(spec["region"], endpoint=spec["endpoint"],
                    s3client_config=S3ClientConfig(force_path_style=True))


def c_s3torch(spec):
    from s3torchconnector import S3MapDataset, S3ClientConfig, S3ReaderConstructor

    ds, w, seed, prefix = spec["dataset"], spec["workers"], spec["seed"], spec["root"]
    cfg = S3ClientConfig(force_path_style=True)
    if ds in ("images", "npz"):
        transform = (lambda r: len(r.read())) if ds == "images" else (lambda r: npz_bytes(r.read()))
        t0 = time.monotonic()
        mds = S3MapDataset.from_prefix(prefix, region=spec["region"], endpoint=spec["endpoint"],
                                       transform=transform, s3client_config=cfg)
        len(mds)  # lists the prefix
        spec["_setup"] = time.monotonic() - t0
        return run_loader(mds, w, seed, BATCH_IMAGES if ds == "images" else 1)
    bucket = prefix[5:].split("/", 1)[0]
    if ds == "h5":
        def opener():
            return s3torch_client(spec).get_object(
                bucket, spec["key"], reader_constructor=S3ReaderConstructor.range_based())
        return run_loader(WindowDS(spec["windows"], opener), w, seed, 1)
    r = s3torch_client(spec).get_object(bucket, spec["key"])
    n = 0
    while True:
        b = r.read(MiB)
        if not b:
            break
        n += len(b)
    return 1, n


def c_s3dlio(spec):
    import s3dlio
    from s3dlio.torch import ObjectStoreIterableDataset

    ds, w, seed, prefix = spec["dataset"], spec["workers"], spec["seed"], spec["root"]
    if ds in ("images", "npz"):
        # the iterable dataset lists in a thread of its own and, when that
        # fails, leaves the consumer waiting forever: list once here first,
        # so that a failure is an error (not counted in the epoch)
        t0 = time.monotonic()
        s3dlio.list(prefix)
        spec["_setup"] = time.monotonic() - t0
        it = ObjectStoreIterableDataset.from_prefix(prefix, num_workers=w, prefetch=2 * w,
                                                    shuffle=True, seed=seed, return_type="bytes")
        samples = nbytes = 0
        for b in it:  # num_workers=0: s3dlio's Rust loader does the I/O
            samples += 1
            nbytes += len(b) if ds == "images" else npz_bytes(b)
        return samples, nbytes
    uri = prefix + spec["key"]
    if ds == "h5":
        def opener():
            return RangeFile(lambda off, n: bytes(s3dlio.get_range(uri, off, n)), spec["size"])
        return run_loader(WindowDS(spec["windows"], opener), w, seed, 1)
    return 1, len(memoryview(s3dlio.get(uri)))


def c_dali(spec):
    from nvidia.dali import fn, pipeline_def

    ds, w, seed, root = spec["dataset"], spec["workers"], spec["seed"], spec["root"]
    if ds == "h5":
        raise NotImplementedError("DALI has no HDF5 reader")
    if ds == "big":
        files = [spec["key"]]
    else:
        files = spec["names"]
    batch = BATCH_IMAGES if ds == "images" else 1

    @pipeline_def(batch_size=batch, num_threads=w, device_id=None, prefetch_queue_depth=2)
    def pipe():
        data, _ = fn.readers.file(file_root=root, files=files, random_shuffle=ds != "big",
                                  seed=seed, name="r")
        return data

    t0 = time.monotonic()
    p = pipe()
    p.build()
    n = p.epoch_size("r")
    spec["_setup"] = time.monotonic() - t0
    samples = nbytes = 0
    t_first = time.monotonic()
    while samples < n:
        (out,) = p.run()
        for i in range(len(out)):
            if samples >= n:
                break
            t = out[i]
            if ds == "npz":
                import numpy as np

                nbytes += npz_bytes(np.asarray(t).tobytes())
            else:
                nbytes += int(t.shape()[0])
            samples += 1
    spec["_first"] = time.monotonic() - t_first
    return samples, nbytes


def ais_bucket(spec):
    from aistore.sdk import Client

    return Client(spec["endpoint"], max_pool_size=max(10, 2 * spec["workers"])).bucket(
        spec["bucket"])


def ais_range_opener(spec):
    def opener():
        obj = ais_bucket(spec).object(spec["key"])

        def get(off, n):
            return obj.get_reader(byte_range="bytes=%d-%d" % (off, off + n - 1)).read_all()
        return RangeFile(get, spec["size"])
    return opener


def c_ais_map(spec):
    from aistore.pytorch import AISMapDataset

    ds, w, seed = spec["dataset"], spec["workers"], spec["seed"]
    if ds in ("images", "npz"):
        b = ais_bucket(spec)
        t0 = time.monotonic()
        mds = AISMapDataset(ais_source_list=b, prefix_map={b: spec["prefix"]})
        len(mds)
        spec["_setup"] = time.monotonic() - t0

        class Measured:
            def __len__(self):
                return len(mds)

            def __getitem__(self, i):
                _, content = mds[i]
                return len(content) if ds == "images" else npz_bytes(content)
        return run_loader(Measured(), w, seed, BATCH_IMAGES if ds == "images" else 1)
    if ds == "h5":
        return run_loader(WindowDS(spec["windows"], ais_range_opener(spec)), w, seed, 1)
    data = ais_bucket(spec).object(spec["key"]).get_reader(num_workers=w).read_all()
    return 1, len(data)


def c_ais_get(spec):
    from concurrent.futures import ThreadPoolExecutor

    ds, w, seed = spec["dataset"], spec["workers"], spec["seed"]
    b = ais_bucket(spec)
    if ds in ("images", "npz"):
        names = list(spec["names"])
        random.Random(seed).shuffle(names)

        def get(n):
            data = b.object(spec["prefix"] + n).get_reader().read_all()
            return len(data) if ds == "images" else npz_bytes(data)
        with ThreadPoolExecutor(w) as ex:
            sizes = list(ex.map(get, names))
        return len(sizes), sum(sizes)
    if ds == "h5":
        return run_loader(WindowDS(spec["windows"], ais_range_opener(spec)), w, seed, 1)
    data = b.object(spec["key"]).get_reader().read_all()
    return 1, len(data)


CLIENTS = {"files": c_files, "s3torch": c_s3torch, "s3dlio": c_s3dlio, "dali": c_dali,
           "ais-map": c_ais_map, "ais-get": c_ais_get}


# what each client imports, before the clock starts
IMPORTS = {"files": [], "s3torch": ["s3torchconnector"], "s3dlio": ["s3dlio", "s3dlio.torch"],
           "dali": ["nvidia.dali.fn"], "ais-map": ["aistore.sdk", "aistore.pytorch"],
           "ais-get": ["aistore.sdk"]}


def cpu_now():
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    import importlib

    with open(sys.argv[1]) as f:
        spec = json.load(f)
    for m in ["numpy", "h5py", "torch.utils.data"] + IMPORTS[spec["client"]]:
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001  (reported by the client's own run)
            pass
    t0, c0 = time.monotonic(), cpu_now()
    try:
        samples, nbytes = CLIENTS[spec["client"]](spec)
        out = {"samples": samples, "bytes": nbytes}
    except Exception as e:  # noqa: BLE001  (a failing library is a row)
        msg = str(e).strip().splitlines()
        out = {"error": "%s: %s" % (type(e).__name__, " ".join(msg)[:400]),
               "trace": traceback.format_exc()[-2000:]}
    end = time.monotonic()
    out["epoch_cpu_s"] = cpu_now() - c0
    out["seconds"] = end - t0 - spec.get("_setup", 0.0)
    out["setup_seconds"] = spec.get("_setup", 0.0)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
