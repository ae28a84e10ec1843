#!/usr/bin/python3
"""DataLoader workers on one HDF5 file: N processes each open the same
chunked HDF5 file with h5py and read random 64x64 windows of it for a fixed
time, every window checked (issue 23).

    /usr/bin/python3 tools/bench/h5workers.py [--size-mib 256] [--workers 4]
        [--seconds 20] [--peers objmount,objmount-training,s3fs,rclone]
        [--phases loopback,s3-like,s3-scaled] [--runs N] [--server KIND] [--out results.json]
        [--keep-work]

The file: one int32 dataset "x" of S x S values (S = sqrt(size / 4), 8192
for 256 MiB) in 128 x 128 chunks (64 KiB each), value = row * S + column,
made locally with h5py and uploaded with boto3 to a private server (--server,
default versitygw: tests/harness/servers.py) behind the fault proxy
(tools/bench/shared.py's phases: loopback, 10 ms to the first byte; s3-like,
20 ms and 64 MiB/s per connection; s3-scaled, 20 ms and 16 MiB/s per
connection).

For every phase and peer: the peer is mounted fresh (an empty cache
directory), the file is stat'ed, the page cache dropped and the server's
files read back in; then the N worker PROCESSES start together, each opens the
file with h5py (the open is inside the measured time) and reads windows
d[r:r+64, c:c+64] at random (its own seed) until SECONDS have passed,
comparing each with the values it must hold. A window that differs fails
the run (DATA MISMATCH, exit status 1). Windows/s = all workers' windows /
SECONDS. With --runs N every phase is measured N times, the peers one
after the other in each, in an order that rotates from run to run (so that
a slow minute of the machine falls on all of them, and no peer is always
first), and the table shows each peer's median (the runs' figures beside
it).

Prints a Markdown table (windows/s per phase and peer, ratios to s3fs-fuse
and rclone); --out writes JSON. Must run as root (FUSE mounts,
drop_caches). Everything started is stopped on exit and on Ctrl-C.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as benchmod  # noqa: E402
import cases as casemod  # noqa: E402
import peers as peermod  # noqa: E402
import shared as sharedmod  # noqa: E402

BUCKET = peermod.BUCKET
KEY = "features.h5"
MiB = 1 << 20
CHUNK = 128
WINDOW = 64
log = benchmod.log

WORKER = r"""
import json, random, sys, time
import h5py, numpy as np
path, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
W = %d
print("ready", flush=True)
sys.stdin.readline()
t0 = time.monotonic()
n = bad = 0
first_bad = None
with h5py.File(path, "r") as f:
    d = f["x"]
    side = d.shape[0]
    rng = random.Random(seed)
    cols = np.arange(W, dtype=np.int64)[None, :]
    rows = np.arange(W, dtype=np.int64)[:, None]
    while time.monotonic() - t0 < seconds:
        r = rng.randrange(0, side - W)
        c = rng.randrange(0, side - W)
        got = d[r:r + W, c:c + W]
        want = ((rows + r) * side + (cols + c)).astype(np.int32)
        if not np.array_equal(got, want):
            bad += 1
            first_bad = first_bad or [r, c]
        n += 1
print(json.dumps({"windows": n, "bad": bad, "first_bad": first_bad,
                  "seconds": time.monotonic() - t0}))
""" % WINDOW


def make_file(path, side):
    import h5py
    import numpy as np
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(side, side), dtype="int32", chunks=(CHUNK, CHUNK))
        cols = np.arange(side, dtype=np.int64)[None, :]
        step = 512
        for r in range(0, side, step):
            rows = np.arange(r, min(side, r + step), dtype=np.int64)[:, None]
            d[r:r + rows.shape[0], :] = (rows * side + cols).astype(np.int32)


def run_workers(path, workers, seconds, work):
    procs = []
    try:
        for k in range(workers):
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER, path, str(seconds),
                                           str(1000 + k)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise casemod.CaseError("a worker did not start: %s" % p.stderr.read()[-300:])
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=seconds + 120)
            except subprocess.TimeoutExpired:
                raise casemod.CaseTimeout("a worker took more than %.0f s" % (seconds + 120))
            if p.returncode != 0:
                raise casemod.CaseError("a worker failed (exit %d): %s"
                                        % (p.returncode, err.strip()[-300:]))
            outs.append(json.loads(out))
    finally:
        sharedmod.kill_all(procs)
    bad = sum(o["bad"] for o in outs)
    if bad:
        first = next(o["first_bad"] for o in outs if o["bad"])
        raise sharedmod.DataMismatch("%d windows differ from the file's values, first at row %d "
                                     "column %d" % (bad, first[0], first[1]))
    windows = sum(o["windows"] for o in outs)
    return {"windows": windows, "windows_s": round(windows / seconds, 1),
            "worker_windows": [o["windows"] for o in outs]}


def one_run(p, pw, fp, ctx, size, args):
    with sharedmod.fresh_mount(p, pw, fp) as (m, mnt, run_dir):
        path = os.path.join(mnt, KEY)
        if os.stat(path).st_size != size:
            raise sharedmod.DataMismatch("%s is %d bytes in the mount, %d uploaded"
                                         % (KEY, os.stat(path).st_size, size))
        ctx.drop_caches()
        ctx.warm("h5")
        fp.reset_stats()
        row = sharedmod.run_on(m, lambda: run_workers(path, args.workers, args.seconds, run_dir))
        st = fp.stats()
        row["gets"] = st["requests"]["by_kind"].get("GetObject", 0)
        row["mib_from_proxy"] = round(st["bytes"]["to_clients"] / MiB, 1)
        if p.name.startswith("objmount"):
            row.update(sharedmod.objmount_stats(p, mnt))
        return row


def measure(args, work, results):
    side = int(math.sqrt(args.size_mib * MiB / 4))
    side -= side % CHUNK
    local = os.path.join(work, KEY)
    t0 = time.monotonic()
    make_file(local, side)
    size = os.path.getsize(local)
    srv = peermod.start_server(args.server, work)
    results["meta"]["server"] = srv.kind
    fp = None
    try:
        fp = sharedmod.start_proxy(srv)
        srv.client().upload_file(local, BUCKET, KEY)
        os.unlink(local)
        results["meta"].update(side=side, size=size, seed_s=round(time.monotonic() - t0, 1))
        log("%s: %d x %d int32 in %d x %d chunks, %.1f MiB, made and uploaded in %.1f s"
            % (KEY, side, side, CHUNK, CHUNK, size / MiB, time.monotonic() - t0))
        dsets = {"h5": types.SimpleNamespace(prefix="")}
        ctx = benchmod.Context(work, srv, dsets, drop=True)
        peers = sharedmod.prepare_peers(args, work, fp, results)
        for phase in args.phases:
            fp.set_faults(latency=dict(sharedmod.PHASES[phase]))
            for run, name in ((k, name) for k in range(args.runs)
                              for name in sharedmod.rotated(list(peers), k)):
                p, pw = peers[name]
                row = {"phase": phase, "peer": name, "workers": args.workers, "run": run}
                results["runs"].append(row)
                if not sharedmod.try_run(row, name, lambda: one_run(p, pw, fp, ctx, size, args)):
                    continue
                log("%-8s %-17s %9.1f windows/s  %5d GETs, %.1f MiB from the proxy"
                    % (phase, name, row["windows_s"], row["gets"], row["mib_from_proxy"]))
    finally:
        if fp is not None:
            fp.stop()
        srv.stop()


def median_rows(rows):
    """One row per peer: the median windows/s of its runs (None if a run
    failed), and the runs' figures."""
    by = {}
    for r in rows:
        by.setdefault(r["peer"], []).append(r)
    out = {}
    for peer, rs in by.items():
        vals = [r.get("windows_s") for r in rs]
        ok = sorted(v for v in vals if v)
        out[peer] = {"windows_s": statistics.median(ok) if ok and len(ok) == len(vals) else None,
                     "all": vals}
    return out


def ratio(by, a, b):
    x, y = by.get(a, {}).get("windows_s"), by.get(b, {}).get("windows_s")
    return "%.2fx" % (x / y) if x and y else "-"


def cell(med):
    if not med["windows_s"]:
        return "error"
    if len(med["all"]) == 1:
        return "%.0f" % med["windows_s"]
    return "%.0f (%s)" % (med["windows_s"], ", ".join("%.0f" % v for v in med["all"]))


def markdown(results):
    runs = results["runs"]
    m = results["meta"]
    peers = [p for p in m["peers"] if p not in results["skipped"]]
    if "side" not in m:
        return "no results"
    out = ["%s: %d x %d int32 in %d x %d chunks (%.0f MiB); %d h5py worker processes, random "
           "%dx%d windows for %.0f s each, every window checked. %s (%s)"
           % (KEY, m["side"], m["side"], CHUNK, CHUNK, m["size"] / MiB, m["workers"], WINDOW,
              WINDOW, m["seconds"], m["date"], m["commit"])
           + ("; median of %d runs, the peers in turn in each (runs in parentheses)"
              % m.get("runs", 1) if m.get("runs", 1) > 1 else ""), "",
           "| phase | " + " | ".join(peers) + " | objmount/s3fs | objmount/rclone |",
           "|---|" + "---|" * (len(peers) + 2)]
    for phase in m["phases"]:
        by = median_rows([r for r in runs if r["phase"] == phase])
        cells = [cell(by[p]) if p in by else "-" for p in peers]
        out.append("| %s | %s | %s | %s |" % (phase, " | ".join(cells),
                                              ratio(by, "objmount", "s3fs"),
                                              ratio(by, "objmount", "rclone")))
    return "\n".join(out)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--size-mib", type=int, default=256, help="size of the file (default 256)")
    ap.add_argument("--workers", type=int, default=4, help="h5py processes (default 4)")
    ap.add_argument("--seconds", type=float, default=20.0, help="reading time (default 20)")
    ap.add_argument("--peers", type=lambda t: sharedmod.csv_list(t, sharedmod.PEERS),
                    default=list(sharedmod.PEERS),
                    help="comma-separated: %s (default all)" % ", ".join(sharedmod.PEERS))
    ap.add_argument("--phases", type=lambda t: sharedmod.csv_list(t, list(sharedmod.PHASES)),
                    default=list(sharedmod.PHASES),
                    help="comma-separated: %s (default all)" % ", ".join(sharedmod.PHASES))
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of every phase, peers in turn; medians shown (default 1)")
    ap.add_argument("--out", help="write the results as JSON to this file")
    peermod.add_server_arg(ap)
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    if args.size_mib < 1 or args.workers < 1 or args.seconds <= 0 or args.runs < 1:
        ap.error("--size-mib, --workers, --seconds and --runs must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the mounts and drop_caches")
    results = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "commit": benchmod.git_commit(), "workers": args.workers,
                        "seconds": args.seconds, "peers": args.peers, "phases": args.phases,
                        "runs": args.runs,
                        "command": " ".join(["/usr/bin/python3"] + sys.argv),
                        "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
               "peers": {}, "skipped": {}, "runs": []}
    work = tempfile.mkdtemp(prefix="objmount-h5workers-bench-")
    interrupted = False
    try:
        measure(args, work, results)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    finally:
        peermod.hold_signals()
        peermod.unmount_all(log)
        peermod.remove_work(work, args.keep_work, log)
    results["meta"].update(loadavg_after=os.getloadavg(), interrupted=interrupted)
    text = markdown(results)
    print(text)
    if args.out:
        results["markdown"] = text
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r for r in results["runs"] if str(r.get("error", "")).startswith("DATA MISMATCH")]
    return 1 if bad or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
