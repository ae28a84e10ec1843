#!/usr/bin/python3
"""Reader workloads that bench.py runs in a child process over a mount.

    workload.py seq PATH [--block BYTES] [--size BYTES]
    workload.py files LIST [--threads N] [--block BYTES]

seq reads one file from start to end with read() calls of --block bytes.
files reads every file named in LIST (lines "PATH<TAB>SIZE") whole, with N
threads taking the next file from a shared queue (a DataLoader-like pattern:
open, read to EOF, close). Both check that the number of bytes read equals
the expected size (a short read is an error, not a fast result).

Prints one JSON line: {"seconds", "bytes", "files", "errors": [...]} and
exits 1 when any error happened. Timing covers the reads only (not Python
start-up); the caller enforces the time limit.
"""

import argparse
import json
import os
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


def cmd_seq(args):
    buf = bytearray(args.block)
    errors = []
    t0 = time.monotonic()
    try:
        n = read_whole(args.path, buf)
    except OSError as e:
        n = 0
        errors.append("%s: %s" % (args.path, e))
    seconds = time.monotonic() - t0
    if not errors and args.size is not None and n != args.size:
        errors.append("%s: read %d bytes, expected %d" % (args.path, n, args.size))
    return {"seconds": seconds, "bytes": n, "files": 1, "errors": errors}


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
                if i >= len(items):
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
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    return {"seconds": seconds, "bytes": state["bytes"], "files": state["files"],
            "errors": errors[:20], "error_count": len(errors)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seq")
    s.add_argument("path")
    s.add_argument("--block", type=int, default=1 << 20)
    s.add_argument("--size", type=int, default=None)
    f = sub.add_parser("files")
    f.add_argument("list")
    f.add_argument("--threads", type=int, default=1)
    f.add_argument("--block", type=int, default=1 << 20)
    args = ap.parse_args(argv)
    res = cmd_seq(args) if args.cmd == "seq" else cmd_files(args)
    print(json.dumps(res), flush=True)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
