#!/usr/bin/python3
"""Multi-epoch training reads and random access with each peer's data cache (issue 10).

    /usr/bin/python3 tools/bench/epochs.py [--quick] [--peers objmount,s3fs,rclone]
        [--files N] [--file-kib K] [--big-mib M] [--readers R] [--latency MS]
        [--warmup S] [--measure S] [--server KIND] [--out results.json] [--objmount-opts O]

For every peer it starts a private server (--server, default versitygw:
tests/harness/servers.py; fresh directory) with the fault proxy in front of
it, LATENCY ms before the first byte of every request (as bench.py's 10 ms
rows), and seeds with boto3 straight to the server: FILES
objects of FILE-KIB KiB under ds/ and one object big.bin of BIG-MIB MiB.
Then, through the proxy:

  1. mount; epoch 1: list ds/ and read every file whole with READERS
     threads (a DataLoader's workers), timed; page cache dropped;
  2. epoch 2: the same;
  3. unmount, mount again (same cache directory), page cache dropped,
     epoch 3 ("remount");
  3b. the local-disk floor: ds/ copied out of the mount to a directory in
     the work dir (local disk), page cache dropped, the same epoch read
     from there; "remount / local" is epoch 3's time over this one (issue
     23's target: at most 1.5);
  4. random 4 KiB preads on big.bin (one thread, 4 KiB-aligned offsets from
     a seeded generator): WARMUP s, page cache dropped, then MEASURE s
     counted as IOPS;
  5. objmount only: a fresh mount with -o data_cache=2/3 of ds/ (the data
     set is 1.5x the cache) and an empty cache directory, ds/ read twice
     (page cache dropped between); the byte hit ratio of the second scan
     from objmount's dcache_* counters.

Before every epoch, scan and the IOPS measurement the page cache is dropped
(echo 3 > /proc/sys/vm/drop_caches, after a sync) and the server's own files
are read back in, so the server answers from memory as in bench.py: what is
measured is the mount and its cache on local disk, not the server's disk.
GETs are counted by the proxy (GetObject requests).

Every byte read is checked: each file's MD5 against the seeded object's,
and the random reads against the same offsets of a copy of big.bin fetched
straight from the server. A difference fails the peer (and the run, exit 1).

Peers:
  objmount  -o profile=training (turns the data cache on with auto where
            objmount has one) plus --objmount-opts; cache_dir in the work dir
  s3fs      bench.py's settings plus use_cache=DIR (in the work dir)
  rclone    rclone mount --vfs-cache-mode full --read-only, cache dir in the
            work dir

objmount's data cache figures (dcache_hit_bytes, ... in `objmountctl stats
--json`) are read when the binary has them and shown as "-" otherwise.

Prints a Markdown table; --out writes everything as JSON. Everything started
(servers, proxies, mounts) is stopped on exit, errors, Ctrl-C and
SIGTERM/SIGHUP. Must run as root (FUSE mounts, drop_caches).
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as benchmod  # noqa: E402
import cases as casemod  # noqa: E402
import peers as peermod  # noqa: E402

REPO_ROOT = peermod.REPO_ROOT
BUCKET = peermod.BUCKET
MiB = 1 << 20
KiB = 1 << 10
BLOCK = 4 * KiB
PEERS = ["objmount", "s3fs", "rclone"]
DS_PREFIX = "ds/"
BIG_KEY = "big.bin"
QUICK = dict(files=40, big_mib=32, warmup=5.0)
FULL = dict(files=400, big_mib=256, warmup=20.0)
# gauges among the data cache counters: the value now, not a difference
DCACHE_GAUGES = {"dcache_size_bytes", "dcache_limit_bytes", "dcache_blocks"}

log = benchmod.log


class DataMismatch(RuntimeError):
    """What a mount returned differs from what was seeded."""


# -- data ----------------------------------------------------------------------------
def datasets(args):
    return {
        "ds": casemod.Dataset("ds", DS_PREFIX, args.files, args.file_kib * KiB,
                              args.file_kib * KiB, lambda i: "f-%05d.bin" % i),
        # prefix "": big.bin sits at the bucket's root (warming it reads the whole bucket)
        "big": casemod.Dataset("big", "", 1, args.big_mib * MiB, args.big_mib * MiB,
                               lambda i: BIG_KEY),
    }


def seed_data(srv, dsets, args, work):
    """Seed both data sets (bench.py's seeding); returns ({key: md5} of ds/,
    path of a local copy of big.bin, its md5), all read back from the server."""
    for ds in dsets.values():
        ds.plan(args.seed)
    benchmod.seed(srv, dsets, args.seed, work)
    s3 = srv.client()
    want = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=DS_PREFIX):
        for o in page.get("Contents", []):
            etag = o["ETag"].strip('"')
            want[o["Key"]] = etag if "-" not in etag else casemod.stored_md5(s3, o["Key"])
    keys = {k for k, _ in dsets["ds"].objects}
    if set(want) != keys:
        raise RuntimeError("seeding: %d objects under ds/ in the bucket, %d planned"
                           % (len(want), len(keys)))
    big_copy = os.path.join(work, "big.expected")
    h = hashlib.md5()
    body = s3.get_object(Bucket=BUCKET, Key=BIG_KEY)["Body"]
    with open(big_copy, "wb") as f:
        for chunk in iter(lambda: body.read(8 * MiB), b""):
            h.update(chunk)
            f.write(chunk)
    if os.path.getsize(big_copy) != args.big_mib * MiB:
        raise RuntimeError("seeding: big.bin has %d bytes" % os.path.getsize(big_copy))
    return want, big_copy, h.hexdigest()


def start_proxy(srv, tries=5):
    """bench.py's proxy with its HEAD-stall check; on a loaded machine the
    check (300 HEADs in 3 s) can fail now and then: try again before giving up."""
    for i in range(tries):
        try:
            return benchmod.start_proxy(srv)[0]
        except RuntimeError as e:
            if i == tries - 1:
                raise
            log("  %s (load %.1f): starting it again" % (e, os.getloadavg()[0]))
            time.sleep(2)


# -- bounded work on a mount -------------------------------------------------------------
def bounded(fn, timeout, m, what):
    """Run fn() in a thread; past timeout kill the mount (blocked readers
    then fail with ENOTCONN) and raise CaseTimeout."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        log("  %s: no result within %.0f s: killing the mount" % (what, timeout))
        peermod.kill_mount(m)
        t.join(10)
        raise casemod.CaseTimeout("%s: no result within %.0f s" % (what, timeout))
    if "error" in box:
        raise box["error"]
    return box["value"]


def read_files(paths, readers):
    """Read every path whole with `readers` threads: [(md5, size) or OSError]."""
    out = [None] * len(paths)
    lock = threading.Lock()
    it = iter(range(len(paths)))

    def worker():
        while True:
            with lock:
                i = next(it, None)
            if i is None:
                return
            try:
                with open(paths[i], "rb") as f:
                    data = f.read()
                out[i] = (hashlib.md5(data).hexdigest(), len(data))
            except OSError as e:
                out[i] = e

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


# -- objmount's data cache counters ------------------------------------------------------
def dcache_counters(peer, m):
    """{dcache_*: value} from `objmountctl stats MNT --json` (at any depth;
    objmount's "data_cache" object counts as the prefix), {} when it has none,
    None for peers without objmountctl."""
    ctl = getattr(peer, "ctl", None)
    if not ctl:
        return None
    try:
        p = subprocess.run([ctl, "stats", m.mountpoint, "--json"], capture_output=True,
                           text=True, timeout=20)
        doc = json.loads(p.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        log("  objmountctl stats --json: %s" % e)
        return {}
    found = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                name = prefix + k if prefix and not k.startswith("dcache_") else k
                if isinstance(v, (int, float)) and not isinstance(v, bool) \
                        and name.startswith("dcache_"):
                    found[name] = v
                else:
                    walk(v, "dcache_" if k in ("dcache", "data_cache") else prefix)
        elif isinstance(node, list):
            for v in node:
                walk(v, prefix)

    walk(doc, "")
    return found


def dcache_delta(before, after):
    """Counters: after - before; gauges: after. None when there are none."""
    if not after:
        return None
    return {k: (v if k in DCACHE_GAUGES else v - (before or {}).get(k, 0))
            for k, v in after.items()}


def hit_ratio(delta):
    """Byte hit ratio of a dcache delta, or None."""
    if not delta or "dcache_hit_bytes" not in delta or "dcache_miss_bytes" not in delta:
        return None
    total = delta["dcache_hit_bytes"] + delta["dcache_miss_bytes"]
    return delta["dcache_hit_bytes"] / total if total else None


# -- measurements ------------------------------------------------------------------------
def epoch(run, label):
    """List ds/ and read every file whole; times it, counts the proxy's
    requests, checks every MD5 (DataMismatch on a difference)."""
    ctx, fp, m, args, want = run.ctx, run.fp, run.m, run.args, run.want
    ctx.drop_caches()
    ctx.warm("ds")
    before = dcache_counters(run.peer, m)
    fp.reset_stats()
    root = os.path.join(m.mountpoint, DS_PREFIX.rstrip("/"))

    def go():
        t0 = time.monotonic()
        names = sorted(os.listdir(root))
        got = read_files([os.path.join(root, n) for n in names], args.readers)
        return names, got, time.monotonic() - t0

    names, got, secs = bounded(go, args.timeout, m, label)
    st = fp.stats()
    if m.proc.poll() is not None:
        raise casemod.CaseError("%s: the daemon exited with %s" % (label, m.proc.returncode))
    after = dcache_counters(run.peer, m)
    keys = [DS_PREFIX + n for n in names]
    if set(keys) != set(want):
        raise DataMismatch("%s: ds/ lists %d names, %d seeded (missing %s, extra %s)" % (
            label, len(keys), len(want), sorted(set(want) - set(keys))[:3],
            sorted(set(keys) - set(want))[:3]))
    errors = [(k, g) for k, g in zip(keys, got) if isinstance(g, OSError)]
    if errors:
        raise casemod.CaseError("%s: %d reads failed, first %s: %s"
                                % (label, len(errors), errors[0][0], errors[0][1]))
    bad = [(k, g) for k, g in zip(keys, got) if g[0] != want[k]]
    if bad:
        k, g = bad[0]
        raise DataMismatch("%s: %d of %d files differ from the seeded objects; first %s: "
                           "md5 %s (%d bytes read), seeded %s"
                           % (label, len(bad), len(keys), k, g[0], g[1], want[k]))
    kinds = st["requests"]["by_kind"]
    delta = dcache_delta(before, after)
    res = {"seconds": round(secs, 3), "files": len(keys),
           "mib": round(sum(g[1] for g in got) / MiB, 1),
           "gets": kinds.get("GetObject", 0), "heads": kinds.get("HeadObject", 0),
           "lists": sum(n for k, n in kinds.items() if k.startswith("ListObjects")),
           "requests": kinds, "mib_from_store": round(st["bytes"]["to_clients"] / MiB, 1),
           "dcache": delta, "dcache_hit_ratio": hit_ratio(delta)}
    log("  %-8s %-17s %7.2f s  %4d GETs %3d HEADs %2d LISTs%s" % (
        run.name, label, secs, res["gets"], res["heads"], res["lists"],
        "" if res["dcache_hit_ratio"] is None
        else "  data cache hits %.0f%%" % (100 * res["dcache_hit_ratio"])))
    return res


def local_floor(run):
    """The same epoch from local disk: ds/ copied out of the mount (once per
    run, in listing order), page cache dropped, read with the same readers
    and checked the same way. What a data cache on that disk could reach."""
    src = os.path.join(run.m.mountpoint, DS_PREFIX.rstrip("/"))
    dst = os.path.join(run.work, "local-ds")
    if not os.path.isdir(dst):
        os.makedirs(dst)
        for n in sorted(os.listdir(src)):
            shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))
    run.ctx.drop_caches()
    t0 = time.monotonic()
    names = sorted(os.listdir(dst))
    got = read_files([os.path.join(dst, n) for n in names], run.args.readers)
    secs = time.monotonic() - t0
    bad = [n for n, g in zip(names, got)
           if isinstance(g, OSError) or g[0] != run.want.get(DS_PREFIX + n)]
    if bad or len(names) != len(run.want):
        raise DataMismatch("local copy: %d of %d files differ, first %s"
                           % (len(bad), len(names), bad[:1]))
    log("  %-8s %-17s %7.2f s" % (run.name, "local disk", secs))
    return {"seconds": round(secs, 3)}


def random_offsets(seed, nblocks):
    rng = random.Random("%s-rand4k" % seed)
    while True:
        yield rng.randrange(nblocks) * BLOCK


def pread_for(fd, offsets, seconds, h):
    """4 KiB preads at the next offsets for `seconds`; (count, secs); every
    read goes into the hash h."""
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while True:
        for _ in range(64):
            b = os.pread(fd, BLOCK, next(offsets))
            if len(b) != BLOCK:
                raise casemod.CaseError("short pread: %d of %d bytes" % (len(b), BLOCK))
            h.update(b)
        n += 64
        now = time.monotonic()
        if now >= end:
            return n, now - t0


def random_reads(run):
    """WARMUP s of random 4 KiB preads on big.bin, page cache dropped,
    MEASURE s counted; then every read checked against big.bin's copy."""
    ctx, fp, m, args = run.ctx, run.fp, run.m, run.args
    nblocks = args.big_mib * MiB // BLOCK
    path = os.path.join(m.mountpoint, BIG_KEY)
    hashes = [hashlib.md5(), hashlib.md5()]

    def go():
        offsets = random_offsets(args.seed, nblocks)
        fd = os.open(path, os.O_RDONLY)
        try:
            fp.reset_stats()
            warm_n, warm_s = pread_for(fd, offsets, args.warmup, hashes[0])
            warm_gets = fp.stats()["requests"]["by_kind"].get("GetObject", 0)
            ctx.drop_caches()
            ctx.warm("big")
            fp.reset_stats()
            n, secs = pread_for(fd, offsets, args.measure, hashes[1])
            gets = fp.stats()["requests"]["by_kind"].get("GetObject", 0)
        finally:
            os.close(fd)
        return warm_n, warm_s, warm_gets, n, secs, gets

    warm_n, warm_s, warm_gets, n, secs, gets = bounded(
        go, args.warmup + args.measure + args.timeout, m, "random 4 KiB")
    # the same offsets on the copy fetched straight from the server
    offsets = random_offsets(args.seed, nblocks)
    with open(run.big_copy, "rb") as f:
        fd = f.fileno()
        for count, got in ((warm_n, hashes[0]), (n, hashes[1])):
            h = hashlib.md5()
            for _ in range(count):
                h.update(os.pread(fd, BLOCK, next(offsets)))
            if h.hexdigest() != got.hexdigest():
                raise DataMismatch("random 4 KiB: the %d preads of the %s differ from big.bin"
                                   % (count, "warm-up" if got is hashes[0] else "measurement"))
        # the same loop on that local, page-cached copy: what one Python thread can do
        local_n, local_s = pread_for(fd, random_offsets(args.seed, nblocks),
                                     min(args.measure, 2.0), hashlib.md5())
    res = {"iops": round(n / secs), "reads": n, "seconds": round(secs, 2), "gets": gets,
           "warmup_iops": round(warm_n / warm_s), "warmup_reads": warm_n,
           "warmup_gets": warm_gets, "local_iops": round(local_n / local_s)}
    log("  %-8s random 4 KiB        %7d IOPS after %.0f s warm-up (%d IOPS, %d GETs); "
        "%d GETs while measured" % (run.name, res["iops"], args.warmup, res["warmup_iops"],
                                     warm_gets, gets))
    return res


def scan(run):
    """objmount: data_cache = 2/3 of ds/, an empty cache_dir, ds/ read twice."""
    peer, work = run.peer, run.work
    size = run.ds_bytes * 2 // 3
    saved = (peer.cache_dir, peer.extra)
    peer.cache_dir = os.path.join(work, "objmount-scan-cache")
    os.makedirs(peer.cache_dir, exist_ok=True)
    peer.extra = list(peer.extra) + ["data_cache=%d" % size]
    res = {"data_cache_bytes": size, "ds_bytes": run.ds_bytes}
    try:
        try:
            run.mount()
        except peermod.MountError as e:
            res["error"] = "mount with data_cache=%d: %s" % (size, str(e)[-300:])
            log("  %-8s scan: %s" % (run.name, res["error"]))
            return res
        res["scan1"] = epoch(run, "scan 1 (1.5x)")
        res["scan2"] = epoch(run, "scan 2 (1.5x)")
        res["hit_ratio"] = res["scan2"]["dcache_hit_ratio"]
        run.unmount()
    finally:
        peer.cache_dir, peer.extra = saved
    return res


# -- one peer ----------------------------------------------------------------------------
def make_peer(name, args, work):
    if name == "objmount":
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = ["profile=training"] + [o for o in args.objmount_opts.split(",") if o]
    elif name == "s3fs":
        p = peermod.S3fs()
        cache = os.path.join(work, "s3fs-cache")
        os.makedirs(cache, exist_ok=True)
        p.extra = ["use_cache=" + cache] + [o for o in args.s3fs_opts.split(",") if o]
    else:
        p = peermod.Rclone()
        p.flags = list(p.flags)
        p.flags[p.flags.index("--vfs-cache-mode") + 1] = "full"
        p.extra = args.rclone_flags.split()
    return p


class PeerRun:
    """One peer's run: its server, proxy, mount and data."""

    def __init__(self, name, args, work_root):
        self.name = name
        self.args = args
        self.work = os.path.join(work_root, name)
        os.makedirs(self.work)
        self.peer = make_peer(name, args, self.work)
        self.mnt = os.path.join(self.work, "mnt")
        self.logp = os.path.join(self.work, "daemon.log")
        self.srv = self.fp = self.m = self.ctx = None

    def mount(self):
        self.m = self.peer.mount(self.fp.endpoint, self.mnt, self.work, self.logp, timeout=60)
        return self.m

    def unmount(self, timeout=60.0):
        m, self.m = self.m, None
        problems = peermod.unmount(m, timeout=timeout)
        if problems:
            log("  %s unmount: %s" % (self.name, "; ".join(problems)))

    def stop(self):
        if self.m is not None:
            self.unmount(timeout=10.0)
        if self.fp is not None:
            self.fp.stop()
        if self.srv is not None:
            self.srv.stop()

    def run(self, res):
        args = self.args
        self.srv = peermod.start_server(args.server, self.work)
        self.fp = start_proxy(self.srv)
        self.fp.set_faults(latency={"first_byte_ms": args.latency} if args.latency else None)
        dsets = datasets(args)
        t0 = time.monotonic()
        self.want, self.big_copy, res["big_md5"] = seed_data(self.srv, dsets, args, self.work)
        self.ds_bytes = dsets["ds"].total_bytes
        res["seed_s"] = round(time.monotonic() - t0, 1)
        self.ctx = benchmod.Context(self.work, self.srv, dsets, drop=True)
        self.peer.prepare(self.fp.endpoint, self.work)
        res["version"] = self.peer.version()
        res["settings"] = peermod.settings_of(self.name, self.peer)
        self.mount()
        log("%s: mounted (pid %d) through %s, %d ms per request"
            % (self.name, self.m.pid, self.fp.endpoint, args.latency))
        res["epoch1"] = epoch(self, "epoch 1")
        res["epoch2"] = epoch(self, "epoch 2")
        e1, e2 = res["epoch1"]["seconds"], res["epoch2"]["seconds"]
        res["speedup"] = round(e1 / e2, 2) if e2 > 0 else None
        self.unmount()
        self.mount()
        res["epoch3"] = epoch(self, "epoch 3 (remount)")
        res["local"] = local_floor(self)
        e3, floor = res["epoch3"]["seconds"], res["local"]["seconds"]
        res["remount_vs_local"] = round(e3 / floor, 2) if floor > 0 else None
        res["random"] = random_reads(self)
        self.unmount()
        if self.ctx.drop_ok is False:
            res["note"] = "the page cache could not be dropped"
        if self.name == "objmount":
            res["scan"] = scan(self)
        res["passed"] = True


def run_peer(name, args, work_root, results):
    """Run one peer; its result goes into results (also when interrupted)."""
    res = {"peer": name}
    results.append(res)
    r = PeerRun(name, args, work_root)
    why = r.peer.available()
    if why:
        res["error"] = "skipped: " + why
        return res
    try:
        r.run(res)
    except DataMismatch as e:
        res["passed"] = False
        res["data_mismatch"] = True
        res["error"] = "DATA MISMATCH: %s" % e
    except (peermod.MountError, casemod.CaseError, casemod.CaseTimeout) as e:
        res["passed"] = False
        res["error"] = str(e)[:500]
        if r.m is not None:
            res["daemon_log_tail"] = r.m.log_tail(2000)
    except Exception as e:  # noqa: BLE001 - seeding, proxy, boto3: report, go on
        res["passed"] = False
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
    except (KeyboardInterrupt, peermod.Interrupted):
        peermod.hold_signals()  # the cleanup below must not be cut short
        res["passed"] = False
        res["interrupted"] = True
        raise
    finally:
        r.stop()
    if res.get("error"):
        log("%s: %s" % (name, res["error"]))
    return res



# -- report ------------------------------------------------------------------------------
def fmt(v, spec="%s", dash="-"):
    return dash if v is None else spec % v


def pct(v):
    return fmt(None if v is None else 100 * v, "%.0f%%")


def markdown(results, meta):
    lines = ["%d files of %d KiB under ds/ (%d readers), big.bin %d MiB, %g ms per request, "
             "random 4 KiB: %g s warm-up, %g s measured; %s (%s)" % (
                 meta["files"], meta["file_kib"], meta["readers"], meta["big_mib"],
                 meta["latency_ms"], meta["warmup_s"], meta["measure_s"], meta["date"],
                 meta["commit"]), "",
             "| peer | epoch 1 | epoch 2 | epoch-2 speedup | GETs epoch 1 / 2 | remount epoch "
             "| remount GETs | local disk | remount / local | random 4 KiB IOPS | data cache hits epoch 2 / remount "
             "| 1.5x scan hit ratio | data |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        e1, e2, e3 = r.get("epoch1"), r.get("epoch2"), r.get("epoch3")
        rnd, sc = r.get("random"), r.get("scan")
        if r.get("error", "").startswith("skipped"):
            verdict = "skipped"
        elif r.get("data_mismatch"):
            verdict = "**MISMATCH**"
        elif r.get("interrupted"):
            verdict = "interrupted"
        elif not r.get("passed"):
            verdict = "**error**"
        else:
            verdict = "verified"
        if sc is None:
            scan_cell = "-"
        elif sc.get("error"):
            scan_cell = "- (no data_cache option)" if "data_cache" in sc["error"] else "- (error)"
        else:
            scan_cell = pct(sc.get("hit_ratio"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["peer"],
            fmt(e1 and e1["seconds"], "%.2f s"), fmt(e2 and e2["seconds"], "%.2f s"),
            fmt(r.get("speedup"), "%.2fx"),
            "%s / %s" % (fmt(e1 and e1["gets"]), fmt(e2 and e2["gets"])),
            fmt(e3 and e3["seconds"], "%.2f s"), fmt(e3 and e3["gets"]),
            fmt(r.get("local") and r["local"]["seconds"], "%.2f s"),
            fmt(r.get("remount_vs_local"), "%.2fx"),
            "-" if rnd is None else "{:,}".format(rnd["iops"]),
            "%s / %s" % (pct(e2 and e2.get("dcache_hit_ratio")),
                         pct(e3 and e3.get("dcache_hit_ratio"))),
            scan_cell, verdict))
    local = [r["random"]["local_iops"] for r in results if r.get("random")]
    if local:
        lines += ["", "Random 4 KiB IOPS are one Python thread's `os.pread` calls; the same loop "
                  "on a page-cached local copy of big.bin did %s IOPS (the ceiling of a cache "
                  "here)." % " / ".join("{:,}".format(x) for x in local)]
    errors = ["%s: %s" % (r["peer"], r["error"].replace("\n", " ")) for r in results
              if r.get("error")]
    if errors:
        lines += [""] + ["- " + e for e in errors]
    return "\n".join(lines) + "\n"


def write_json(path, doc):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


# -- main -------------------------------------------------------------------------------
def peer_list(text):
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in PEERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError("unknown peer %r (choose from %s)"
                                         % (",".join(unknown), ", ".join(PEERS)))
    return names


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--peers", type=peer_list, default=PEERS,
                    help="comma-separated: %s (default all)" % ", ".join(PEERS))
    ap.add_argument("--quick", action="store_true",
                    help="a smoke test: %(files)d files, %(big_mib)d MiB big.bin, "
                         "%(warmup)g s warm-up" % QUICK)
    ap.add_argument("--files", type=int, default=None,
                    help="files under ds/ (default %d)" % FULL["files"])
    ap.add_argument("--file-kib", type=int, default=1024, help="size of each file (default 1024)")
    ap.add_argument("--big-mib", type=int, default=None,
                    help="size of big.bin (default %d)" % FULL["big_mib"])
    ap.add_argument("--readers", type=int, default=4, help="reader threads (default 4)")
    ap.add_argument("--latency", type=int, default=10,
                    help="ms the proxy waits before the first byte of every request "
                         "(default 10)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="s of random reads before the measurement (default %g)" % FULL["warmup"])
    ap.add_argument("--measure", type=float, default=10.0,
                    help="s of random reads measured (default 10)")
    ap.add_argument("--seed", default="objmount-epochs", help="seed of data and offsets")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="s one epoch may take before the mount is killed (default 600)")
    ap.add_argument("--out", default=None, help="write the results as JSON to this file")
    peermod.add_server_arg(ap)
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for k, v in sizes.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.files < 1 or args.big_mib < 1 or args.readers < 1:
        ap.error("--files, --big-mib and --readers must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the mounts and drop_caches")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": benchmod.git_commit(), "files": args.files, "file_kib": args.file_kib,
            "big_mib": args.big_mib, "readers": args.readers, "latency_ms": args.latency,
            "warmup_s": args.warmup, "measure_s": args.measure, "seed": args.seed,
            "quick": args.quick, "server": args.server,
            "command": " ".join(["/usr/bin/python3"] + sys.argv),
            "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()}
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="objmount-epochs-")
    results, interrupted = [], False
    try:
        for name in args.peers:
            log("%s: starting" % name)
            run_peer(name, args, work, results)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    finally:
        peermod.end_run(work, args.keep_work, log)
    meta.update(duration_s=round(time.monotonic() - t0, 1), loadavg_after=os.getloadavg(),
                interrupted=interrupted)
    md = markdown(results, meta)
    print(md)
    if args.out:
        write_json(args.out, {"meta": meta, "results": results, "markdown": md})
    if interrupted:
        return 130
    if any(r.get("data_mismatch") for r in results):
        log("DATA MISMATCH: a mount returned bytes that differ from the seeded objects")
    ran = [r for r in results if not r.get("error", "").startswith("skipped")]
    return 0 if ran and all(r.get("passed") for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
