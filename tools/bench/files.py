#!/usr/bin/python3
"""Small files, one round trip each: readers walking a folder in order, and
shuffled readers with objmount's order hint (issue 25).

    /usr/bin/python3 tools/bench/files.py [--quick] [--peers objmount,objmount-nopf,s3fs,rclone]
        [--server KIND] [--files N] [--file-kib K] [--latency 10,20] [--readers 1,4,8]
        [--seconds S] [--out results.json]
        [--objmount-opts O] [--s3fs-opts O] [--rclone-flags F]

One private server (--server, default versitygw: tests/harness/servers.py)
with the fault proxy in front (LATENCY ms before the first byte of every
request), seeded with FILES objects of FILE-KIB KiB under ds/.
For every latency, every peer and every number of readers R:

  order     R reader processes (a DataLoader's workers with shuffle=False,
            batch 1: worker k opens files k, k+R, k+2R ... of the sorted
            listing) read whole files for at most SECONDS;
  shuffled  the same over one seeded permutation; objmount is first given the
            permutation with the order hint (OM_IOC_PREFETCH on ds/, what the
            README's HintedRandomSampler does), the peers just read it. The
            clock starts before the hint: the prefetch it starts is timed,
            no peer gets a head start;
  limit     (no mount) 64 threads of boto3 GETs through the same proxy: what
            this server and proxy can give.

Every peer is mounted fresh for every run (empty caches), and the page cache
is dropped first. Each file's MD5 is checked against the seeded object's: a
difference fails the run. files/s = files read / the slowest reader's time.

Peers: objmount (-o profile=training, as issue 25's figures), objmount-nopf
(the same with prefetch_files=0: today's objmount without the prefetch across
files), s3fs and rclone with bench.py's settings (no disk cache), each with
its --*-opts/--*-flags added. The peers' order rotates from row to row.

Prints a Markdown table; --out writes JSON. Must run as root.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as benchmod  # noqa: E402
import cases as casemod  # noqa: E402
import peers as peermod  # noqa: E402  (puts tests/ on sys.path)
from harness.hint import hint  # noqa: E402

BUCKET = peermod.BUCKET
KiB = 1 << 10
DS_PREFIX = "ds/"
log = benchmod.log

WORKER = r"""
import hashlib, json, os, sys, time
paths, want, deadline = json.load(open(sys.argv[1]))
n = nbytes = 0
bad = []
t0 = time.monotonic()
for p in paths:
    if time.monotonic() > deadline:
        break
    h = hashlib.md5()
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            nbytes += len(b)
    if h.hexdigest() != want[os.path.basename(p)]:
        bad.append(p)
    n += 1
print(json.dumps({"files": n, "bytes": nbytes, "seconds": time.monotonic() - t0, "bad": bad}))
"""


def run_readers(root, order, readers, seconds, want, work, t0=None):
    """R processes, worker k reading order[k::R] under root: files/s. t0:
    when the clock started (default now), e.g. before an order hint, whose
    work then counts in the time."""
    if t0 is None:
        t0 = time.monotonic()
    deadline = t0 + seconds
    procs = []
    for k in range(readers):
        spec = os.path.join(work, "worker-%d.json" % k)
        with open(spec, "w") as f:
            json.dump([[os.path.join(root, n) for n in order[k::readers]], want, deadline], f)
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, spec],
                                      stdout=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 120)
        if p.returncode != 0:
            raise casemod.CaseError("a reader failed (exit %d)" % p.returncode)
        outs.append(json.loads(out))
    elapsed = time.monotonic() - t0
    bad = sum((o["bad"] for o in outs), [])
    if bad:
        raise casemod.CaseError("DATA MISMATCH in %d files, first %s" % (len(bad), bad[0]))
    files = sum(o["files"] for o in outs)
    return {"files": files, "seconds": round(elapsed, 2),
            "files_per_s": round(files / elapsed, 1) if elapsed > 0 else None}


def limit(srv, fp, names, seconds, threads=64):
    """64 threads of boto3 GETs through the proxy: files/s."""
    from concurrent.futures import ThreadPoolExecutor

    s3 = srv.client(endpoint=fp.endpoint, max_pool_connections=threads)
    deadline = time.monotonic() + seconds
    count = [0]
    lock = threading.Lock()

    def get(name):
        if time.monotonic() > deadline:
            return
        s3.get_object(Bucket=BUCKET, Key=DS_PREFIX + name)["Body"].read()
        with lock:
            count[0] += 1

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(get, names))
    elapsed = time.monotonic() - t0
    return {"files": count[0], "seconds": round(elapsed, 2),
            "files_per_s": round(count[0] / elapsed, 1)}


def make_peer(name, args, work):
    if name.startswith("objmount"):
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = ["profile=training"] + (["prefetch_files=0"] if name == "objmount-nopf" else [])
        p.extra += [o for o in args.objmount_opts.split(",") if o]
    elif name == "s3fs":
        p = peermod.S3fs()
        p.extra = [o for o in args.s3fs_opts.split(",") if o]
    else:
        p = peermod.Rclone()
        p.extra = args.rclone_flags.split()
    p.name = name
    return p


def measure(args):
    work = tempfile.mkdtemp(prefix="objmount-files-bench-")
    results = {"runs": [], "args": vars(args)}
    srv = peermod.start_server(args.server, work)
    results["server"] = srv.kind
    fp = None
    peers = {}
    try:
        fp = benchmod.start_proxy(srv)[0]
        ds = casemod.Dataset("ds", DS_PREFIX, args.files, args.file_kib * KiB,
                             args.file_kib * KiB, lambda i: "s%06d.jpg" % i)
        ds.plan(args.seed)
        benchmod.seed(srv, {"ds": ds}, args.seed, work)
        s3 = srv.client()
        want = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=DS_PREFIX):
            for o in page.get("Contents", []):
                want[o["Key"][len(DS_PREFIX):]] = o["ETag"].strip('"')
        names = sorted(want)
        shuffled = list(names)
        random.Random(args.seed).shuffle(shuffled)
        ctx = benchmod.Context(work, srv, {"ds": ds}, drop=True)
        for name in args.peers:
            p = make_peer(name, args, work)
            why = p.available()
            if why:
                log("%s: skipped (%s)" % (name, why))
                continue
            pw = os.path.join(work, name)
            os.makedirs(pw)
            p.prepare(fp.endpoint, pw)
            peers[name] = (p, pw)
        for lat in args.latency:
            fp.set_faults(latency={"first_byte_ms": lat})
            for mode in ("order", "shuffled"):
                order = names if mode == "order" else shuffled
                for r in args.readers:
                    ctx.drop_caches()
                    row = {"latency_ms": lat, "mode": mode, "readers": r, "peer": "limit"}
                    row.update(limit(srv, fp, order, args.seconds))
                    results["runs"].append(row)
                    log("%3d ms %-8s %d readers  %-13s %7.1f files/s"
                        % (lat, mode, r, "limit", row["files_per_s"]))
                    # rotate, as bench.py does: no peer always runs first
                    # (on a cold server) or last (after the others' load)
                    k = len(results["runs"]) % len(peers) if peers else 0
                    names_now = list(peers)[k:] + list(peers)[:k]
                    for name in names_now:
                        p, pw = peers[name]
                        row = {"latency_ms": lat, "mode": mode, "readers": r, "peer": name}
                        results["runs"].append(row)
                        try:
                            row.update(one_run(p, pw, fp, ctx, order, r, args, want, mode, name))
                        except (peermod.MountError, casemod.CaseError, subprocess.SubprocessError,
                                OSError) as e:
                            row["error"] = str(e)[:300]
                            log("%s: %s" % (name, row["error"]))
                            continue
                        log("%3d ms %-8s %d readers  %-13s %7.1f files/s%s"
                            % (lat, mode, r, name, row["files_per_s"],
                               "  (%s)" % row["prefetch"] if row.get("prefetch") else ""))
    finally:
        if fp is not None:
            fp.stop()
        srv.stop()
        peermod.remove_work(work, args.keep_work, log)
    return results


def one_run(p, pw, fp, ctx, order, readers, args, want, mode, name):
    run_dir = tempfile.mkdtemp(dir=pw)
    if hasattr(p, "cache_dir"):
        p.cache_dir = os.path.join(run_dir, "cache")  # fresh: nothing read before
        os.makedirs(p.cache_dir)
    mnt = os.path.join(run_dir, "mnt")
    m = p.mount(fp.endpoint, mnt, run_dir, os.path.join(pw, "daemon.log"), timeout=60)
    try:
        root = os.path.join(mnt, DS_PREFIX.rstrip("/"))
        os.listdir(root)  # the listing, as a loader's dataset does first
        ctx.drop_caches()
        t0 = time.monotonic()  # the clock runs from before the hint (issue 38)
        if mode == "shuffled" and name.startswith("objmount"):
            hint(root, order)
        row = run_readers(root, order, readers, args.seconds, want, run_dir, t0=t0)
        if name.startswith("objmount") and getattr(p, "ctl", None):
            out = subprocess.run([p.ctl, "stats", "--json", mnt], capture_output=True, text=True)
            if out.returncode == 0:
                st = json.loads(out.stdout)
                st = st[0] if isinstance(st, list) else st
                pf = st.get("prefetch") or {}
                row["prefetch"] = "%d ahead, %d hits" % (pf.get("files", 0), pf.get("hits", 0))
        return row
    finally:
        peermod.unmount(m, timeout=30)
        p.after_unmount()


def markdown(results):
    runs = results["runs"]
    seen = {r["peer"] for r in runs}
    # columns in --peers order, whatever order the rotation ran them in
    peers = [p for p in ["limit"] + list(results["args"]["peers"]) if p in seen]
    lines = ["| latency | order | readers | " + " | ".join(peers) + " |",
             "|---|---|---|" + "---|" * len(peers)]
    keys = []
    for r in runs:
        k = (r["latency_ms"], r["mode"], r["readers"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        cells = []
        for peer in peers:
            row = next((r for r in runs if (r["latency_ms"], r["mode"], r["readers"]) == k
                        and r["peer"] == peer), None)
            cells.append("-" if row is None else "error" if row.get("error")
                         else "%.0f" % row["files_per_s"])
        mode = "directory" if k[1] == "order" else "shuffled (objmount: hinted)"
        lines.append("| %d ms | %s | %d | %s |" % (k[0], mode, k[2], " | ".join(cells)))
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="600 files, 5 s per run")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--file-kib", type=int, default=110)
    ap.add_argument("--latency", default="10,20")
    ap.add_argument("--readers", default="1,4,8")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--peers", default="objmount,objmount-nopf,s3fs,rclone")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--out")
    peermod.add_server_arg(ap)
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.files, args.seconds = 600, 5.0
    args.latency = [int(x) for x in args.latency.split(",") if x]
    args.readers = [int(x) for x in args.readers.split(",") if x]
    args.peers = [x for x in args.peers.split(",") if x]
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, needs_root=True)
    return peermod.report(measure(args), markdown, args.out)


if __name__ == "__main__":
    sys.exit(main())
