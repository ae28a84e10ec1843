#!/usr/bin/python3
"""Workloads that bench.py runs in a child process over a mount.

    workload.py files LIST [--threads N] [--block BYTES] [--seconds S]
    workload.py loader ROOT --expect N [--workers 4] [--batch 32] [--seed S]
    workload.py write PATH --size BYTES [--block BYTES] [--seed S]

files reads every file named in LIST (lines "PATH<TAB>SIZE") whole, with N
threads taking the next file from a shared queue (a DataLoader-like pattern:
open, read to EOF, close), and checks that the number of bytes read equals
the expected size (a short read is an error, not a fast result). With
--seconds, no file is started after S seconds (the rate is what counts).

loader runs torchvision.datasets.ImageFolder over ROOT (a class-per-directory
tree of JPEGs) and one epoch of torch.utils.data.DataLoader(num_workers,
shuffle=True, fixed seed): every image is opened and decoded by PIL
(ImageFolder's default loader, convert("RGB")) and turned into a tensor. The
timing starts before ImageFolder scans ROOT (imports excluded) and ends when
the last batch arrives; it checks that N images of the expected shape came.

write writes SIZE bytes to PATH (O_CREAT|O_TRUNC) in --block sized write()
calls, then close(): a checkpoint writer. The blocks are block_data(seed, i)
(bench.py knows the MD5 of the whole). It reports the CLOCK_MONOTONIC times
of open, of the last write and of the end of close(), so the caller can
measure when the object is complete in the bucket on the same clock.

Each prints one JSON line ({"seconds", "bytes", "files", "errors": [...],
...}) and exits 1 when any error happened. The caller enforces time limits.
"""

import argparse
import json
import os
import random
import sys
import threading
import time


def read_whole(path, buf):
    """Bytes read from path until EOF, len(buf) bytes per read() call."""
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        mv = memoryview(buf)
        while True:
            n = os.readv(fd, [mv])
            if n == 0:
                return total
            total += n
    finally:
        os.close(fd)


def cmd_files(args):
    with open(args.list) as f:
        items = [(p, int(s)) for p, s in (line.rstrip("\n").split("\t") for line in f if line.strip())]
    lock = threading.Lock()
    state = {"next": 0, "bytes": 0, "files": 0}
    errors = []

    def worker():
        buf = bytearray(args.block)
        while True:
            with lock:
                i = state["next"]
                if i >= len(items) or (end and time.monotonic() > end):
                    return
                state["next"] = i + 1
            path, size = items[i]
            try:
                n = read_whole(path, buf)
            except OSError as e:
                with lock:
                    errors.append("%s: %s" % (path, e))
                continue
            with lock:
                state["bytes"] += n
                state["files"] += 1
                if n != size:
                    errors.append("%s: read %d bytes, expected %d" % (path, n, size))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    t0 = time.monotonic()
    end = t0 + args.seconds if args.seconds else None
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    return {"seconds": seconds, "bytes": state["bytes"], "files": state["files"],
            "complete": state["files"] == len(items), "errors": errors[:20],
            "error_count": len(errors)}


def cmd_loader(args):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.set_num_threads(1)
    errors = []
    t0 = time.monotonic()
    ds = datasets.ImageFolder(args.root, transform=transforms.PILToTensor())
    t_scan = time.monotonic()
    if len(ds) != args.expect:
        errors.append("ImageFolder found %d images, expected %d" % (len(ds), args.expect))
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    dl = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                    generator=gen, persistent_workers=False)
    images = 0
    pixels = 0
    try:
        for x, y in dl:
            images += x.shape[0]
            pixels += x.numel()
    except Exception as e:  # a worker's OSError comes back wrapped
        errors.append("DataLoader: %s" % str(e).strip().splitlines()[-1][:300])
    t1 = time.monotonic()
    if not errors and images != args.expect:
        errors.append("DataLoader yielded %d images, expected %d" % (images, args.expect))
    return {"seconds": t1 - t0, "scan_s": t_scan - t0, "epoch_s": t1 - t_scan,
            "files": images, "pixels": pixels, "errors": errors}


def block_data(seed, block):
    """The pool of a write run: block i is the pool with its first 8 bytes
    replaced by i (so no two parts are equal)."""
    return bytearray(random.Random("%s-ckpt" % seed).randbytes(block))


def cmd_write(args):
    buf = block_data(args.seed, args.block)
    mv = memoryview(buf)
    errors = []
    written = 0
    t_open = time.monotonic()
    t_written = t_closed = None
    try:
        fd = os.open(args.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            i = 0
            while written < args.size:
                buf[:8] = i.to_bytes(8, "little")
                n = min(args.block, args.size - written)
                off = 0
                while off < n:
                    off += os.write(fd, mv[off:n])
                written += n
                i += 1
            t_written = time.monotonic()
        finally:
            os.close(fd)  # the commit: its error is the write's error
        t_closed = time.monotonic()
    except OSError as e:
        errors.append("%s: %s" % (args.path, e))
    return {"t_open": t_open, "t_written": t_written, "t_closed": t_closed,
            "seconds": (t_closed or time.monotonic()) - t_open, "bytes": written, "files": 1,
            "errors": errors}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("files")
    f.add_argument("list")
    f.add_argument("--threads", type=int, default=1)
    f.add_argument("--block", type=int, default=1 << 20)
    f.add_argument("--seconds", type=float, default=None)
    lo = sub.add_parser("loader")
    lo.add_argument("root")
    lo.add_argument("--expect", type=int, required=True)
    lo.add_argument("--workers", type=int, default=4)
    lo.add_argument("--batch", type=int, default=32)
    lo.add_argument("--seed", type=int, default=0)
    w = sub.add_parser("write")
    w.add_argument("path")
    w.add_argument("--size", type=int, required=True)
    w.add_argument("--block", type=int, default=8 << 20)
    w.add_argument("--seed", default="objmount-bench")
    args = ap.parse_args(argv)
    res = {"files": cmd_files, "loader": cmd_loader, "write": cmd_write}[args.cmd](args)
    print(json.dumps(res), flush=True)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
