#!/usr/bin/python3
"""objmount beside s3fs-fuse and rclone mount, on one private S3 server, in one run.

    /usr/bin/python3 tools/bench/bench.py [--server versitygw|swift|aistore|aistore-proxy]
        [--quick] [--runs N] [--latency 0,10]
        [--peers objmount,s3fs,rclone] [--cases seq1,seq4,cat,rand,small,loader,meta,ckpt]
        [--out results/DIR] [--update-doc] [--timeout S] [--max-minutes M]

Starts its own server (tests/harness/servers.py: versitygw by default; Swift;
an AIStore cluster, whose 307s the proxy sends back through itself to the
targets) in a fresh directory and the fault proxy in front of it,
seeds the data once with boto3, then for every latency (set on the proxy at
run time), run, case and peer: mounts the peer through the proxy (a fresh
mount: nothing cached by the kernel or the filesystem survives from another
run), re-reads the server's own files for the case (so the server serves from
memory), measures, unmounts and empties every peer's local cache. The limit
(curl straight at the proxy) is measured the same way. Peers rotate order
from run to run.

Writes results.md, results.json, chart.png and logs/ to --out (default
results/<timestamp>/) and prints the Markdown table. --update-doc rewrites the
"Latest results" section of doc/benchmarks.md ("Swift quick run" with
--server swift: OpenStack Swift with s3api). Everything it started is
stopped on exit, on errors, on Ctrl-C/SIGTERM and when --max-minutes runs
out (the figures measured so far are still written). Must run as root (FUSE
mounts of s3fs and rclone, --drop-caches); see doc/benchmarks.md.
"""

import argparse
import concurrent.futures
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases as casemod  # noqa: E402
import peers as peermod  # noqa: E402
import report  # noqa: E402
from harness.faultproxy import FaultProxy  # noqa: E402  (path set up by peers)

REPO_ROOT = peermod.REPO_ROOT
DISPLAY_ORDER = ["objmount", "s3fs", "rclone", "curl", "curl-direct"]
# curl-direct (no proxy, 0 ms) only where it is quick and tells something
DIRECT_CASES = {"seq1", "small1", "small8", "ls", "find"}
BUCKET = peermod.BUCKET
MiB = 1 << 20


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class OutOfTime(Exception):
    pass


# -- servers ----------------------------------------------------------------------------
def proxy_stalls_on_head(fp, n=300, limit=3.0):
    """True when n keep-alive HEADs (of a missing key) through the proxy take
    longer than limit seconds (they take ~0.5 s when the proxy is healthy)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", fp.port, timeout=limit)
    t0 = time.monotonic()
    try:
        for i in range(n):
            conn.request("HEAD", "%s/%s/bench-probe-%d" % (fp.path, BUCKET, i))
            conn.getresponse().read()
            if time.monotonic() - t0 > limit:
                return True
    except OSError:
        return True
    finally:
        conn.close()
    return False


def start_proxy(srv):
    """The fault proxy in front of srv; (proxy, note or None). A proxy that
    stalls on HEAD requests would measure itself, not the peers: refuse it."""
    fp = FaultProxy(srv).start()
    if proxy_stalls_on_head(fp):
        fp.stop()
        raise RuntimeError("the fault proxy stalls on HEAD requests; fix tools/faultproxy first")
    return fp, None


# -- sizes ------------------------------------------------------------------------
class Sizes:
    """Data set sizes of a full run and of --quick (each overridable)."""

    FULL = dict(large_mib=1024, small_count=2000, image_count=1000, image_classes=10,
                ls_count=5000, tree_fanout=10, tree_per_dir=10, ckpt_mib=1024, rand_runtime=4,
                small_seconds=30)
    QUICK = dict(large_mib=256, small_count=500, image_count=320, image_classes=8,
                 ls_count=2000, tree_fanout=5, tree_per_dir=16, ckpt_mib=256, rand_runtime=3,
                 small_seconds=15)

    def __init__(self, quick, **over):
        self.__dict__.update(self.QUICK if quick else self.FULL)
        self.__dict__.update({k: v for k, v in over.items() if v is not None})

    def as_dict(self):
        return dict(self.__dict__)


# -- data ---------------------------------------------------------------------------
def jpeg_pool(seed_value, n=48):
    """n distinct 500x375 JPEGs of ~100-120 KB (a gradient under noise,
    quality 87), as bytes: the images of the DataLoader case."""
    import io

    import numpy as np
    from PIL import Image

    import hashlib

    rng = np.random.default_rng(int.from_bytes(
        hashlib.sha256(("%s-jpeg" % seed_value).encode()).digest()[:8], "little"))
    out = []
    for i in range(n):
        ramp = np.linspace(0, 255, 500)[None, :, None] * np.ones((375, 1, 3))
        tint = rng.uniform(0.5, 1.0, size=3)[None, None, :]
        img = np.clip(ramp * tint + rng.normal(0, 36 + i % 8, (375, 500, 3)), 0, 255)
        b = io.BytesIO()
        Image.fromarray(img.astype(np.uint8)).save(b, "JPEG", quality=87)
        out.append(b.getvalue())
    return out


def seed(srv, dsets, seed_value, work):
    """Store every data set in the bucket (straight to the server, not the proxy)."""
    from boto3.s3.transfer import TransferConfig

    t0 = time.monotonic()
    rng = random.Random(seed_value)
    pool = rng.randbytes(8 * MiB)  # small objects are slices of this pool
    s3 = srv.client()
    for ds in dsets.values():
        if ds.kind == "random" and (ds.count == 1 or ds.max_size > len(pool) // 2):
            for key, size in ds.objects:  # large objects: streamed from a file
                path = os.path.join(work, "large.bin")
                with open(path, "wb") as f:
                    left = size
                    while left:
                        n = min(left, 8 * MiB)
                        f.write(rng.randbytes(n))
                        left -= n
                s3.upload_file(path, BUCKET, key, Config=TransferConfig(
                    multipart_threshold=64 * MiB, multipart_chunksize=64 * MiB,
                    max_concurrency=4))
                os.unlink(path)
            continue
        if ds.kind == "jpeg":
            jpegs = jpeg_pool(seed_value)
            bodies = [jpegs[i % len(jpegs)] for i in range(ds.count)]
            ds.objects = [(key, len(b)) for (key, _), b in zip(ds.objects, bodies)]
            ds.min_size = min(len(b) for b in jpegs)
            ds.max_size = max(len(b) for b in jpegs)
        else:
            offsets = [rng.randrange(0, len(pool) - size) for _, size in ds.objects]
            bodies = None

        def put(i, ds=ds, offsets=None if ds.kind == "jpeg" else offsets, bodies=bodies):
            key, size = ds.objects[i]
            body = bodies[i] if bodies else pool[offsets[i]:offsets[i] + size]
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            for _ in ex.map(put, range(ds.count)):
                pass
    log("seeded %s in %.1f s" % (", ".join("%s (%d)" % (d.name, d.count) for d in dsets.values()),
                                 time.monotonic() - t0))


class Context:
    """What cases need from the run: work dir, server, cache control."""

    def __init__(self, work, srv, dsets, drop):
        self.work = work
        self.srv = srv
        self.dsets = dsets
        self.drop = drop
        self.drop_ok = None
        self.cleanup_keys = []  # objects a case wrote: deleted after the run
        self._s3 = None

    def srv_client(self):
        """boto3 straight to the server (not counted by the proxy, no latency)."""
        if self._s3 is None:
            self._s3 = self.srv.client()
        return self._s3

    def cleanup(self):
        while self.cleanup_keys:
            key = self.cleanup_keys.pop()
            try:
                self.srv_client().delete_object(Bucket=BUCKET, Key=key)
            except Exception as e:  # noqa: BLE001 - best effort
                log("cannot delete %s: %s" % (key, e))

    def drop_caches(self):
        os.sync()  # earlier write runs must not be flushed during this one
        if not self.drop:
            return
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            self.drop_ok = True
        except OSError as e:
            if self.drop_ok is None:
                log("cannot drop the page cache (%s)" % e)
            self.drop_ok = False

    def warm(self, dataset):
        """Read the server's files of a data set so it answers from memory
        (Swift's and AIStore's files are not named by key: all of them)."""
        if dataset is None:
            return
        ds = self.dsets[dataset]
        root = os.path.join(self.srv.data_dir, BUCKET, ds.prefix)
        if self.srv.kind != "versitygw":
            root = self.srv.data_dir
        buf = bytearray(MiB)
        for dirpath, _, files in os.walk(root):
            for name in files:
                with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass


# -- one measured run -------------------------------------------------------------------
def measure_mount(peer, case, ctx, fp, logdir, timeout, label):
    mnt = os.path.join(ctx.work, "mnt", peer.name)
    logp = os.path.join(logdir, "%s.log" % peer.name)
    ctx.drop_caches()
    ctx.warm(case.dataset)
    try:
        m = peer.mount(fp.endpoint, mnt, ctx.work, logp, write=case.writes)
    except peermod.MountError as e:
        return {"error": "mount: %s" % e}
    try:
        fp.reset_stats()
        cpu0 = peermod.cpu_seconds(m.pid)
        try:
            res = case.run_mount(ctx, mnt, timeout)
        except casemod.CaseTimeout as e:
            log("  %s timed out: killing the mount" % peer.name)
            peermod.kill_mount(m)
            casemod.reap_children()
            return {"error": "timeout: %s" % e}
        except casemod.CaseError as e:
            return {"error": str(e)}
        cpu1 = peermod.cpu_seconds(m.pid)
        hwm = peermod.peak_rss_kib(m.pid)
        if m.proc.poll() is not None:
            return {"error": "daemon exited with %s during the run" % m.proc.returncode}
        st = fp.stats()
        res["requests"] = st["requests"]["by_kind"]
        res["mib_to_fs"] = st["bytes"]["to_clients"] / MiB
        res["mib_from_fs"] = st["bytes"]["from_clients"] / MiB
        res.update(peer.collect(m, logdir, label))
        res["cpu_s"] = cpu1 - cpu0
        moved_gib = (res["mib_to_fs"] + res["mib_from_fs"]) / 1024.0
        if moved_gib >= 0.05:  # CPU per GiB only where data moved (not ls, find)
            res["cpu_s_per_gib"] = res["cpu_s"] / moved_gib
        res["peak_rss_mib"] = hwm / 1024.0
        return res
    finally:
        casemod.reap_children()  # nothing may hold the mount open (Ctrl-C mid-run)
        problems = peermod.unmount(m)
        if problems:
            log("  unmount %s: %s" % (peer.name, "; ".join(problems)))
        peer.after_unmount(case.writes)
        ctx.cleanup()


def measure_reference(peer, case, ctx, fp, srv, timeout):
    endpoint = srv.endpoint if peer.direct else fp.endpoint
    ctx.drop_caches()
    ctx.warm(case.dataset)
    fp.reset_stats()
    try:
        res = case.run_reference(ctx, endpoint, timeout)
    except casemod.CaseTimeout as e:
        casemod.reap_children()
        return {"error": "timeout: %s" % e}
    except casemod.CaseError as e:
        return {"error": str(e)}
    finally:
        casemod.reap_children()
    if not peer.direct:
        st = fp.stats()
        res["requests"] = st["requests"]["by_kind"]
        res["mib_to_fs"] = st["bytes"]["to_clients"] / MiB
    return res


# -- main -----------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    peermod.add_server_arg(ap)
    ap.add_argument("--quick", action="store_true",
                    help="1 run per figure (default 3) and smaller data sets: a smoke test")
    ap.add_argument("--runs", type=int, default=None, help="runs per figure (median)")
    ap.add_argument("--latency", default="0,10",
                    help="comma-separated first-byte latencies in ms (default 0,10)")
    ap.add_argument("--peers", default="objmount,s3fs,rclone",
                    help="mount peers to compare (objmount, s3fs, rclone)")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the curl reference rows (the limit)")
    ap.add_argument("--cases", default="all",
                    help="cases to run: seq1, seq4, cat, rand4k, rand64k, rand1m, small1, "
                         "small8, loader, ls, find, ckpt; groups: seq (= seq1), rand, small, "
                         "meta, write; default all")
    ap.add_argument("--out", default=None, help="output folder (default results/<timestamp>)")
    ap.add_argument("--update-doc", action="store_true",
                    help="rewrite the Latest results section of doc/benchmarks.md")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds one measured run may take before it counts as failed")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop measuring after this long and report what was measured "
                         "(default 75; 20 with --quick)")
    for k in Sizes.FULL:
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=None,
                        help="data size: %s (full %s, quick %s)"
                             % (k, Sizes.FULL[k], Sizes.QUICK[k]))
    ap.add_argument("--seed", default="objmount-bench", help="seed of the data generator")
    ap.add_argument("--drop-caches", action="store_true",
                    help="echo 3 > /proc/sys/vm/drop_caches before every run (not needed: every "
                         "run is a fresh mount; disturbs other work on the machine)")
    ap.add_argument("--objmount", default=None, help="objmount binary (default build/objmount)")
    ap.add_argument("--objmount-opts", default="", help="extra -o options for objmount")
    ap.add_argument("--s3fs-opts", default="", help="extra -o options for s3fs")
    ap.add_argument("--rclone-flags", default="", help="extra flags for rclone mount")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory")
    ap.add_argument("--report", metavar="DIR", default=None,
                    help="measure nothing: re-render DIR/results.json (with --update-doc: "
                         "put it into doc/benchmarks.md)")
    args = ap.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.max_minutes is None:
        args.max_minutes = 20 if args.quick else 75
    args.sizes = Sizes(args.quick, **{k: getattr(args, k) for k in Sizes.FULL})
    args.latencies = [int(x) for x in args.latency.split(",") if x.strip()]
    args.peer_names = [p.strip() for p in args.peers.split(",") if p.strip()]
    for p in args.peer_names:
        if p not in peermod.MOUNT_PEERS:
            ap.error("unknown peer %r (choose from %s)" % (p, ", ".join(peermod.MOUNT_PEERS)))
    names = []
    for c in args.cases.split(","):
        c = c.strip()
        if c:
            names += casemod.ALIASES.get(c, c).split(",")
    args.case_names = names
    return args


def build_peers(args):
    peers, skipped = [], {}
    for name in args.peer_names:
        if name == "objmount":
            p = peermod.Objmount(args.objmount)
            p.extra = [o for o in args.objmount_opts.split(",") if o]
        elif name == "s3fs":
            p = peermod.S3fs()
            p.extra = [o for o in args.s3fs_opts.split(",") if o]
        else:
            p = peermod.Rclone()
            p.extra = args.rclone_flags.split()
        why = p.available()
        if why:
            log("skipping %s: %s" % (name, why))
            skipped[name] = why
            continue
        peers.append(p)
    if not args.no_reference:
        peers += [peermod.Curl(direct=False), peermod.Curl(direct=True)]
    return peers, skipped


def git_commit():
    try:
        out = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--", "src",
                                "include", "meson.build"], capture_output=True,
                               text=True).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except OSError:
        return "?"


def rerender(args):
    import json

    with open(os.path.join(args.report, "results.json")) as f:
        result = json.load(f)
    result["ratios"] = report.ratios(result["summary"], result["meta"]["cases"])
    result["targets"] = report.targets(result)
    md, chart = report.write_outputs(result, args.report)
    print(md)
    if args.update_doc:
        update_doc(result, chart)
    return 0


def update_doc(result, chart):
    doc = os.path.join(REPO_ROOT, "doc", "benchmarks.md")
    body = report.markdown(result) + "\nPeers:\n\n" + report.settings_markdown(result["meta"])
    if result["meta"].get("server") == "swift":
        report.update_doc(doc, body, chart, chart_name="benchmarks-swift.png",
                          markers=report.DOC_MARKERS_SWIFT)
        return
    report.update_doc(doc, body, chart)
    log("updated %s" % doc)


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        return rerender(args)
    if os.geteuid() != 0:
        log("warning: not root: s3fs and rclone may not mount (FUSE needs root here)")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    commit = git_commit()  # now: others may commit while this runs
    load_before = os.getloadavg()
    if load_before[0] > (os.cpu_count() or 1):
        log("warning: load average %.1f on %d CPUs before the run: other work will skew "
            "the figures" % (load_before[0], os.cpu_count()))
    out_dir = args.out or os.path.join(REPO_ROOT, "results", time.strftime("%Y%m%d-%H%M%S"))
    logdir = os.path.join(out_dir, "logs")
    os.makedirs(logdir, exist_ok=True)

    peermod.catch_signals()

    sz = args.sizes
    dsets = casemod.datasets(sz)
    for ds in dsets.values():
        ds.plan(args.seed)
    all_cases = casemod.make_cases(dsets, sz, args.seed)
    if args.case_names == ["all"]:
        args.case_names = list(all_cases)
    for c in args.case_names:
        if c not in all_cases:
            log("unknown case %r (choose from %s)" % (c, ", ".join(all_cases)))
            return 2
    cases = {c: all_cases[c] for c in all_cases if c in args.case_names}  # canonical order
    needed = {c.dataset for c in cases.values() if c.dataset}
    dsets_needed = {k: v for k, v in dsets.items() if k in needed}

    peers, skipped = build_peers(args)
    work = tempfile.mkdtemp(prefix="objmount-bench-")
    srv = fp = ctx = proxy_fix = None
    versions = {}
    runs = []
    t_start = time.monotonic()
    deadline = t_start + 60 * args.max_minutes
    interrupted = out_of_time = False
    try:
        srv = peermod.start_server(args.server, work)  # the peers' credentials follow
        if peermod.refuses_unsigned(srv):  # curl gets presigned URLs
            casemod.PRESIGN = peermod.presigner(srv)
        fp, proxy_fix = start_proxy(srv)
        log("%s %s, proxy %s, work %s" % (srv.kind, srv.endpoint, fp.endpoint, work))
        seed(srv, dsets_needed, args.seed, work)
        if "ckpt" in cases:
            cases["ckpt"].expected_md5()
        for p in peers:
            if p.kind == "mount":
                p.prepare(fp.endpoint, work)
        versions = {p.name: p.version() for p in peers}
        ctx = Context(work, srv, dsets, drop=args.drop_caches)
        failed = set()  # (latency, case, peer) that timed out: not retried
        for lat in args.latencies:
            fp.set_faults(latency={"first_byte_ms": lat} if lat else None)
            for run in range(args.runs):
                for cname, case in cases.items():
                    k = run % len(peers) if peers else 0
                    for peer in peers[k:] + peers[:k]:
                        if peer.kind == "reference":
                            if not case.reference:
                                continue
                            if peer.direct and (lat != args.latencies[0]
                                                or cname not in DIRECT_CASES):
                                continue
                        key = (lat, cname, peer.name)
                        if key in failed:
                            continue
                        if time.monotonic() > deadline:
                            raise OutOfTime()
                        t0 = time.monotonic()
                        label = "%d ms run %d %s" % (lat, run + 1, cname)
                        if peer.kind == "mount":
                            res = measure_mount(peer, case, ctx, fp, logdir,
                                                min(args.timeout, deadline - t0 + 30), label)
                        else:
                            res = measure_reference(peer, case, ctx, fp, srv, args.timeout)
                        res.update({"latency_ms": lat, "case": cname, "peer": peer.name,
                                    "run": run + 1, "wall_s": time.monotonic() - t0,
                                    "load1": os.getloadavg()[0]})
                        runs.append(res)
                        if "error" in res:
                            log("%3d ms run %d %-7s %-12s FAILED: %s"
                                % (lat, run + 1, cname, peer.name, res["error"][:200]))
                            if res["error"].startswith("timeout"):
                                failed.add(key)
                        else:
                            extra = ""
                            if "cpu_s" in res:
                                extra = "  cpu %.2f s  rss %.0f MiB" % (res["cpu_s"],
                                                                      res["peak_rss_mib"])
                            log("%3d ms run %d %-7s %-12s %10.2f %s%s"
                                % (lat, run + 1, cname, peer.name, res["value"], case.unit,
                                   extra))
    except OutOfTime:
        out_of_time = True
        log("--max-minutes %.0f reached: stopping, reporting what was measured"
            % args.max_minutes)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    finally:
        # a second Ctrl-C or a SIGTERM must not cut the cleanup short
        peermod.hold_signals()
        casemod.reap_children(wait=False)
        peermod.unmount_all(log)
        casemod.reap_children()
        if fp is not None:
            fp.stop()
        if srv is not None:
            srv.stop()
        peermod.remove_work(work, args.keep_work, log)
        peermod.catch_signals()

    if not runs:
        return 130 if interrupted else 1
    meta = {
        "started": started, "server": args.server, "host": platform.node(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(), "commit": commit, "runs": args.runs,
        "quick": args.quick, "latencies_ms": args.latencies, "interrupted": interrupted,
        "out_of_time": out_of_time, "drop_caches": bool(ctx and ctx.drop_ok),
        "duration_s": round(time.monotonic() - t_start, 1),
        "peers_run": sorted((p.name for p in peers if any(r["peer"] == p.name for r in runs)),
                            key=DISPLAY_ORDER.index),
        "peer_kind": {p.name: p.kind for p in peers},
        "versions": versions,
        "settings": {p.name: p.settings() for p in peers},
        "skipped_peers": skipped,
        "sizes": sz.as_dict(),
        "datasets": {d.name: d.describe() for d in dsets_needed.values()},
        "cases": {c.name: c.info() for c in cases.values()},
        "command": " ".join(["/usr/bin/python3"] + sys.argv),
        "proxy_workaround": proxy_fix,
        "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
    }
    summary = report.summarize(runs)
    result = {"meta": meta, "runs": runs, "summary": summary,
              "ratios": report.ratios(summary, meta["cases"])}
    result["targets"] = report.targets(result)
    md, chart = report.write_outputs(result, out_dir)
    print(md)
    log("results in %s (%.0f s)" % (out_dir, meta["duration_s"]))
    if args.update_doc and not interrupted:
        update_doc(result, chart)
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
