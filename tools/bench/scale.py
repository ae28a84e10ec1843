#!/usr/bin/python3
"""Namespaces at scale: find over N keys, memory per key, ls -l of 5,000 keys (issue 16).

    /usr/bin/python3 tools/bench/scale.py [--keys 50000,1000000]
        [--peers objmount,s3fs,rclone] [--s3fs-max-keys 50000] [--timeout 600]
        [--fanout 32] [--per-dir 1000] [--size 1024] [--ls-keys 5000]
        [--ls-latency 10] [--no-ls] [--no-manifest] [--out DIR] [--keep-work]
        [--metadata-memory SIZE] [--objmount-opts O] [--s3fs-opts O] [--rclone-flags F]

The bucket is tools/synthbucket.py (nothing stored: keys are a formula, so
a million keys cost no seeding), a tree of FANOUT directories per level and
PER-DIR files per leaf (1,000,000 keys: 1,000 leaves of 1,000 under two
levels, d0000/d0000/f000000.jpg ...), no injected latency. For every key
count, one server; then each peer alone:

  1. mount (objmount -o profile=training,ro; s3fs and rclone read-only with
     tools/bench/peers.py's settings); RSS of the daemon once the root answers;
  2. `find MNT -type f | wc -l`, timed; the count must equal N;
  3. the daemon's peak RSS (VmHWM), CPU seconds (user + system, whole life
     of the mount), requests by kind counted by the server during the find;
     bytes/key = (VmHWM - RSS after mount) / N;
  4. objmount: `objmountctl stats` saved in logs/ (its inode count); with
     --metadata-memory SIZE, the mount's budget (-o metadata_memory), what
     the namespace holds after the find, listings dropped, entries told
     without an inode, names the kernel was asked to forget, and the kernel's
     fuse_inode and dentry slab objects before and after the find.

s3fs is skipped above --s3fs-max-keys (it HEADs every file: ~27 s per 50,000
here). A find that passes --timeout kills that mount and is reported as such.

Then `ls -l` of one directory of LS-KEYS keys with LS-LATENCY ms before every
answer, a fresh mount per peer (the path is resolved first, not timed),
against the listing limit: the same LIST pages (1,000 keys each) fetched one
after the other with urllib over one keep-alive connection, best of 3.

For each key count, objmount also on a manifest: `objmountctl manifest build`
(time, requests, manifest bytes per key), then a mount with -o manifest=FILE:
the start (daemon started until mounted, and what it sent) and `find` over
it (time, requests: none expected, peak RSS). --no-manifest skips it.

Results: DIR (default results/scale-<timestamp>/) gets scale.json, scale.md
and logs/ (daemon logs, server logs, objmount stats). Everything started
(servers, mounts) is stopped on exit, errors, Ctrl-C and SIGTERM/SIGHUP.
Must run as root (FUSE mounts of s3fs and rclone).
"""

import argparse
import http.client
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as benchmod  # noqa: E402
import peers as peermod  # noqa: E402
from harness.synthserver import SynthServer  # noqa: E402  (path set up by peers)

REPO_ROOT = peermod.REPO_ROOT
BUCKET = peermod.BUCKET
PEERS = ["objmount", "s3fs", "rclone"]
MiB = 1 << 20
log = benchmod.log


def status_kib(pid, field):
    """A /proc/PID/status field in KiB (VmRSS, VmHWM, RssAnon), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def slab():
    """Active objects of the kernel's fuse_inode and dentry caches
    (/proc/slabinfo: root only, and shared with every other mount), or {}."""
    out = {}
    try:
        with open("/proc/slabinfo") as f:
            for line in f:
                name = line.split(" ", 1)[0]
                if name in ("fuse_inode", "dentry"):
                    out[name] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def load():
    return round(os.getloadavg()[0], 2)


# -- peers -------------------------------------------------------------------------------
def make_peer(name, args):
    if name == "objmount":
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = ["profile=training", "ro"] + [o for o in args.objmount_opts.split(",") if o]
        if getattr(args, "metadata_memory", None):
            p.extra.append("metadata_memory=" + args.metadata_memory)
    elif name == "s3fs":
        p = peermod.S3fs()
        p.extra = ["ro"] + [o for o in args.s3fs_opts.split(",") if o]
    else:
        p = peermod.Rclone()
        p.extra = args.rclone_flags.split()
    return p


class Mounted:
    """One peer mounted on srv in its own work directory; a context manager
    that always unmounts."""

    def __init__(self, name, args, srv, work, logdir, label):
        self.name, self.args, self.srv, self.label = name, args, srv, label
        self.work = os.path.join(work, "%s-%s" % (label, name))
        os.makedirs(self.work)
        self.logp = os.path.join(logdir, "%s-%s.log" % (label, name))
        self.peer = make_peer(name, args)
        self.m = None

    def __enter__(self):
        self.peer.prepare(self.srv.endpoint, self.work)
        self.m = self.peer.mount(self.srv.endpoint, os.path.join(self.work, "mnt"), self.work,
                                 self.logp, timeout=60)
        return self

    def __exit__(self, *exc):
        problems = peermod.unmount(self.m, timeout=60.0)
        if problems:
            log("  %s unmount: %s" % (self.name, "; ".join(problems)))
        return False

    @property
    def path(self):
        return self.m.mountpoint

    def run(self, shell_cmd, timeout):
        """(seconds, stdout, rc) of `sh -c shell_cmd`; past timeout the mount is
        killed and (None, "", None) returned."""
        t0 = time.monotonic()
        try:
            p = subprocess.run(["sh", "-c", shell_cmd], capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            log("  %s: no result within %.0f s: killing the mount" % (self.name, timeout))
            peermod.kill_mount(self.m)
            return None, "", None
        return time.monotonic() - t0, p.stdout, p.returncode

    def ctl_stats(self, logdir):
        """objmountctl stats: saved in logdir; {"inodes": n} when it says."""
        ctl = getattr(self.peer, "ctl", None)
        if not ctl:
            return {}
        try:
            txt = subprocess.run([ctl, "stats", self.path], capture_output=True, text=True,
                                 timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"stats_error": str(e)}
        with open(os.path.join(logdir, "%s-objmount-stats.txt" % self.label), "w") as f:
            f.write(txt)
        out = {}
        m = re.search(r"metadata: (\d+) inodes", txt)
        if m:
            out["inodes"] = int(m.group(1))
        m = re.search(r"listing pages (\d+)", txt)
        if m:
            out["listing_pages"] = int(m.group(1))
        m = re.search(r"metadata memory: ([\d.]+) MiB \(peak ([\d.]+)\) of "
                      r"(?:\(no bound\) )?([\d.]+) MiB; "
                      r"listings dropped (\d+), entries without inode (\d+), names the kernel "
                      r"was asked to forget (\d+)", txt)
        if m:
            out["budget"] = {"bytes_mib": float(m.group(1)), "peak_mib": float(m.group(2)),
                             "budget_mib": float(m.group(3)),
                             "listings_evicted": int(m.group(4)),
                             "entries_without_inode": int(m.group(5)),
                             "invalidations": int(m.group(6))}
        return out


# -- find over N keys --------------------------------------------------------------------
def find_case(name, args, srv, nkeys, work, logdir):
    res = {"peer": name, "keys": nkeys}
    label = "find%d" % nkeys
    try:
        with Mounted(name, args, srv, work, logdir, label) as mt:
            pid = mt.m.pid
            res["version"] = mt.peer.version()
            res["settings"] = peermod.settings_of(name, mt.peer)
            time.sleep(0.5)  # the mount's own start-up requests settle
            res["rss_after_mount_kib"] = status_kib(pid, "VmRSS")
            srv.stats(reset=True)
            srv_cpu0 = peermod.cpu_seconds(srv.pid)
            res["slab_before"] = slab()
            res["load_before"] = load()
            secs, out, rc = mt.run("find %s -type f | wc -l" % mt.path, args.timeout)
            res["load_after"] = load()
            res["slab_after"] = slab()
            res["server_cpu_s"] = round(peermod.cpu_seconds(srv.pid) - srv_cpu0, 2)
            st = srv.stats()
            res["requests"] = st["requests"]["by_kind"]
            if secs is None:
                res["error"] = "timeout: find took more than %.0f s" % args.timeout
                return res
            res["find_s"] = round(secs, 2)
            res["count"] = int(out.strip() or -1)
            res["count_ok"] = res["count"] == nkeys
            res["peak_rss_kib"] = status_kib(pid, "VmHWM")
            res["rss_after_find_kib"] = status_kib(pid, "VmRSS")
            res["cpu_s"] = round(peermod.cpu_seconds(pid), 2)
            res["bytes_per_key"] = round(
                (res["peak_rss_kib"] - res["rss_after_mount_kib"]) * 1024 / nkeys)
            res["layout"] = {k: srv.layout[k] for k in ("fanout", "per_dir", "depth", "ext")}
            if name == "objmount":
                res.update(mt.ctl_stats(logdir))
                if args.metadata_memory:
                    res["metadata_memory"] = args.metadata_memory
                else:  # the model is of a namespace that keeps everything
                    res["breakdown"] = breakdown(args, work, res)
            if not res["count_ok"]:
                res["error"] = "find counted %d files, the bucket has %d" % (res["count"], nkeys)
    except peermod.MountError as e:
        res["error"] = str(e)[:500]
    log("  %-8s %9d keys: %s" % (name, nkeys, summary(res)))
    return res


def summary(r):
    if r.get("find_s") is None:
        return r.get("error", "?")
    return ("find %.2f s, %s files, peak RSS %.1f MiB, %s bytes/key, CPU %.2f s, %s"
            % (r["find_s"], r["count"], r["peak_rss_kib"] / 1024, r["bytes_per_key"],
               r["cpu_s"], fmt_kinds(r["requests"])))


def fmt_kinds(k):
    return ", ".join("%s %d" % (n, k[n]) for n in sorted(k)) or "none"


# -- ls -l of one directory against the listing limit -----------------------------------
def listing_limit(srv, prefix, runs=3):
    """Seconds to fetch every LIST page of prefix (delimiter /) in sequence,
    as a client that does nothing else would: best of runs."""
    best = None
    for _ in range(runs):
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        t0 = time.monotonic()
        token, pages, keys = None, 0, 0
        while True:
            q = {"list-type": "2", "prefix": prefix, "delimiter": "/"}
            if token:
                q["continuation-token"] = token
            conn.request("GET", "/%s?%s" % (BUCKET, urllib.parse.urlencode(q)))
            body = conn.getresponse().read().decode()
            pages += 1
            keys += body.count("<Key>")
            m = re.search(r"<NextContinuationToken>([^<]*)<", body)
            token = m and m.group(1)
            if not token:
                break
        secs = time.monotonic() - t0
        conn.close()
        best = secs if best is None else min(best, secs)
    return {"seconds": round(best, 3), "pages": pages, "keys": keys, "runs": runs}


def ls_once(name, args, srv, work, logdir, run):
    """One fresh mount: the path resolved (not timed), then ls -l timed, then
    ls -l again on the same mount (what is left without the network)."""
    r = {}
    with Mounted(name, args, srv, work, logdir, "ls%d" % run) as mt:
        d = os.path.join(mt.path, "d0000")
        os.stat(d)
        srv.stats(reset=True)
        r["load_before"] = load()
        secs, text, rc = mt.run("ls -l %s" % d, args.timeout)
        r["requests"] = srv.stats()["requests"]["by_kind"]
        if secs is None:
            r["error"] = "timeout: ls -l took more than %.0f s" % args.timeout
            return r
        r["seconds"] = round(secs, 3)
        r["lines"] = len(text.splitlines())
        if r["lines"] != args.ls_keys + 1:
            r["error"] = "ls -l printed %d lines, want %d" % (r["lines"], args.ls_keys + 1)
            return r
        warm, _, _ = mt.run("ls -l %s" % d, args.timeout)
        r["warm_seconds"] = None if warm is None else round(warm, 3)
    return r


def ls_case(args, work, logdir, results):
    n = args.ls_keys
    srv = SynthServer(n, log_path=os.path.join(logdir, "synth-ls.log"), bucket=BUCKET,
                      fanout=1, depth=1, per_dir=n, size=args.size,
                      latency_ms=args.ls_latency).start()
    out = {"keys": n, "latency_ms": args.ls_latency, "peers": []}
    results["ls"] = out
    try:
        out["limit"] = listing_limit(srv, "d0000/")
        log("ls -l of %d keys at %g ms: the limit (%d LIST pages in sequence) %.3f s"
            % (n, args.ls_latency, out["limit"]["pages"], out["limit"]["seconds"]))
        for name in args.peers:
            r = {"peer": name, "runs": []}
            out["peers"].append(r)
            why = make_peer(name, args).available()
            if why:
                r["error"] = "skipped: " + why
                continue
            for run in range(max(1, args.ls_runs)):
                try:
                    one = ls_once(name, args, srv, work, logdir, run)
                except peermod.MountError as e:
                    one = {"error": str(e)[:500]}
                r["runs"].append(one)
                if one.get("error"):
                    r["error"] = one["error"]
                    break
            if not r.get("error"):
                secs = sorted(x["seconds"] for x in r["runs"])
                r["seconds"] = secs[len(secs) // 2]
                r["vs_limit"] = round(r["seconds"] / out["limit"]["seconds"], 2)
                r["warm_seconds"] = r["runs"][-1]["warm_seconds"]
                r["requests"] = r["runs"][-1]["requests"]
            log("  %-8s ls -l: %s" % (name, r.get("error") or (
                "median %.3f s of %d fresh mounts (%.2fx the limit; %s), again on the same "
                "mount %s s; %s" % (r["seconds"], len(secs), r["vs_limit"],
                                    " ".join("%.3f" % x for x in secs),
                                    fmt(r["warm_seconds"], "%.3f"),
                                      fmt_kinds(r["requests"])))))
    finally:
        srv.stop()


# -- where objmount's bytes per key go -------------------------------------------------
def pow2_at_least(n, initial):
    """Capacity of a doubling array after n inserts (from initial)."""
    c = initial
    while c < n:
        c *= 2
    return c


def pow2_load(n, initial):
    """Slots of an open-addressing table after n inserts: it doubles from
    initial to stay at most 3/4 full (src/ns/meta_table.c, the listing's index
    in src/ns/listing.c)."""
    c = initial
    while n * 4 > c * 3:
        c *= 2
    return c


def meta_sizes(args, work, name_len, key_len, etag_len=32):
    """Run tools/bench/meta_sizes.c, compiled with the flags the build used
    for src/ns/meta.c (compile_commands.json): sizeof and glibc chunk sizes."""
    build = os.path.dirname(os.path.abspath(args.objmount))
    with open(os.path.join(build, "compile_commands.json")) as f:
        entry = [e for e in json.load(f) if e["file"].endswith("src/ns/meta.c")][0]
    words = entry.get("arguments") or shlex.split(entry["command"])
    flags = [w for w in words if w.startswith(("-I", "-D", "-std="))]
    flags = ["-I" + os.path.join(entry["directory"], w[2:]) if w.startswith("-I") else w
             for w in flags]
    flags.append("-I" + os.path.join(REPO_ROOT, "src", "ns"))  # meta_int.h sits beside meta.c
    exe = os.path.join(work, "meta_sizes")
    cc = subprocess.run([words[0], "-O0"] + flags + [os.path.join(HERE, "meta_sizes.c"), "-o",
                                                     exe], capture_output=True, text=True,
                        timeout=120)
    if cc.returncode:
        raise ValueError("does not compile: %s" % cc.stderr.strip()[-400:])
    out = subprocess.run([exe, str(name_len), str(key_len), str(etag_len)], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return json.loads(out)


def breakdown(args, work, r):
    """objmount's bytes per listed file after the find, from the record sizes
    (one inode and one listing entry per file: readdirplus makes both),
    beside the measured (peak - after mount) / keys."""
    lay = r["layout"]
    n, per_dir = r["keys"], lay["per_dir"]
    name_len = len("f%0*d%s" % (max(6, len(str(per_dir - 1))), 0, lay["ext"]))
    key_len = lay["depth"] * (max(4, len(str(lay["fanout"] - 1))) + 2) + name_len
    try:
        z = meta_sizes(args, work, name_len, key_len)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError) as e:
        return {"error": "meta_sizes.c: %s" % e}
    inodes = r.get("inodes") or n
    rows = [
        ("struct inode with its name inline (%d B + %d B)"
         % (z["inode_name_offset"], name_len + 1), z["chunk_inode"]),
        ("listing entry in the listing's arena (%d B + name, ETag as 16 bytes)"
         % z["dentry_name_offset"], z["arena_dentry"]),
        ("listing's array of entries (8 B, trimmed when installed)", 8),
        ("listing's name index (4 B slots, at most 3/4 full, from 16)",
         4 * pow2_load(per_dir, 16) / per_dir),
        ("directory's children (8 B slots, at most 3/4 full, from 16)",
         8 * pow2_load(per_dir, 16) / per_dir),
        ("the mount's inode table (8 B slots, at most 3/4 full, from 1024; %d inodes)" % inodes,
         8 * pow2_load(inodes, 1024) / n),
    ]
    model = sum(v for _, v in rows)
    return {"sizes": z, "rows": [[k, round(v, 1)] for k, v in rows], "model": round(model, 1),
            "measured": r["bytes_per_key"], "rest": round(r["bytes_per_key"] - model, 1)}


# -- manifest mounts ---------------------------------------------------------------------
def manifest_case(args, srv, nkeys, work, logdir):
    """Build a manifest of the N keys with objmountctl (its time, size and
    requests), then mount with -o manifest=FILE: the start (daemon started to
    mounted, and the requests it sent), and `find` over it (time, requests,
    peak RSS)."""
    res = {"keys": nkeys}
    path = os.path.join(work, "manifest-%d.om" % nkeys)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=peermod.servers.access_key(),
               AWS_SECRET_ACCESS_KEY=peermod.servers.secret_key())
    srv.stats(reset=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run([args.objmountctl, "-o", "endpoint=" + srv.endpoint, "manifest",
                            "build", BUCKET, "--output", path], capture_output=True, text=True,
                           timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        res["error"] = "manifest build took more than %.0f s" % args.timeout
        return res
    res["build_s"] = round(time.monotonic() - t0, 2)
    res["build_requests"] = srv.stats()["requests"]["by_kind"]
    if p.returncode != 0:
        res["error"] = "manifest build: " + (p.stderr.strip().splitlines() or ["?"])[-1][:300]
        return res
    res["manifest_bytes"] = os.path.getsize(path)
    res["manifest_bytes_per_key"] = round(res["manifest_bytes"] / nkeys, 1)
    margs = argparse.Namespace(**vars(args))
    margs.objmount_opts = ",".join(o for o in [args.objmount_opts, "manifest=" + path] if o)
    label = "manifest%d" % nkeys
    try:
        srv.stats(reset=True)
        t0 = time.monotonic()
        with Mounted("objmount", margs, srv, work, logdir, label) as mt:
            res["start_s"] = round(time.monotonic() - t0, 3)
            pid = mt.m.pid
            res["start_requests"] = srv.stats(reset=True)["requests"]["by_kind"]
            res["rss_after_mount_kib"] = status_kib(pid, "VmRSS")
            secs, out, rc = mt.run("ls %s | wc -l" % mt.path, args.timeout)
            res["first_ls_s"] = round(secs, 3) if secs is not None else None
            if args.no_manifest_find:
                res["cpu_s"] = round(peermod.cpu_seconds(pid), 2)
                res["find_requests"] = srv.stats()["requests"]["by_kind"]
                return res
            secs, out, rc = mt.run("find %s -type f | wc -l" % mt.path, args.timeout)
            res["find_requests"] = srv.stats()["requests"]["by_kind"]
            if secs is None:
                res["error"] = "timeout: find took more than %.0f s" % args.timeout
                return res
            res["find_s"] = round(secs, 2)
            res["count"] = int(out.strip() or -1)
            res["peak_rss_kib"] = status_kib(pid, "VmHWM")
            res["cpu_s"] = round(peermod.cpu_seconds(pid), 2)
            if res["count"] != nkeys:
                res["error"] = "find counted %d files, the manifest has %d" % (res["count"],
                                                                               nkeys)
    except peermod.MountError as e:
        res["error"] = str(e)[:500]
    if res.get("find_s") is None and not res.get("error"):
        log("  manifest %9d keys: build %.1f s, %.1f bytes/key; start %.3f s (%s), first ls "
            "%.3f s" % (nkeys, res["build_s"], res["manifest_bytes_per_key"], res["start_s"],
                        fmt_kinds(res["start_requests"]) or "no request", res["first_ls_s"]))
        return res
    log("  manifest %9d keys: %s" % (nkeys, res.get("error") or (
        "build %.1f s (%s), %.1f bytes/key; start %.3f s (%s); find %.2f s (%s), peak RSS "
        "%.1f MiB" % (res["build_s"], fmt_kinds(res["build_requests"]),
                      res["manifest_bytes_per_key"], res["start_s"],
                      fmt_kinds(res["start_requests"]) or "no request", res["find_s"],
                      fmt_kinds(res["find_requests"]) or "no request",
                      res["peak_rss_kib"] / 1024))))
    return res


# -- report ------------------------------------------------------------------------------
def fmt(v, spec="%s"):
    return "-" if v is None else spec % v


def markdown(results, meta):
    lines = ["Synthetic bucket (tools/synthbucket.py): %s keys, %d directories per level, "
             "%d files per leaf directory, %d bytes per object, no injected latency; "
             "%s, commit %s, %d CPUs, load %s before / %s after." % (
                 " and ".join("{:,}".format(k) for k in meta["keys"]), meta["fanout"],
                 meta["per_dir"], meta["size"], meta["date"], meta["commit"], meta["cpus"],
                 meta["load_before"], meta["load_after"]), "",
             "| keys | peer | find -type f | files | peak RSS | RSS after mount | bytes/key "
             "| CPU s | LISTs | HEADs | GETs | server CPU s | load 1 min |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["find"]:
        k = r.get("requests") or {}
        lists = sum(v for n, v in k.items() if n.startswith("ListObjects"))
        gets = sum(v for n, v in k.items() if n.startswith("GetObject"))
        if r.get("find_s") is None:
            lines.append("| {:,} | {} | {} | | | | | | | | | | {} |".format(
                r["keys"], r["peer"], r.get("error", "?").split(":")[0],
                fmt(r.get("load_before"))))
            continue
        lines.append("| {:,} | {} | {:.2f} s | {:,}{} | {:.1f} MiB | {:.1f} MiB | {:,} | {:.2f} "
                     "| {:,} | {:,} | {:,} | {} | {} |".format(
                         r["keys"], r["peer"], r["find_s"], r["count"],
                         "" if r["count_ok"] else " **wrong**", r["peak_rss_kib"] / 1024,
                         r["rss_after_mount_kib"] / 1024, r["bytes_per_key"], r["cpu_s"],
                         lists, k.get("HeadObject", 0), gets, fmt(r.get("server_cpu_s")),
                         r.get("load_before")))
    budgeted = [r for r in results["find"] if r.get("budget") and r.get("find_s") is not None]
    if budgeted:
        lines += ["", "objmount with `-o metadata_memory=%s`: the namespace after the find, "
                  "and the kernel's FUSE inodes and dentries (active slab objects, all mounts "
                  "of the machine) before and after it." % budgeted[0]["metadata_memory"], "",
                  "| keys | peak RSS | namespace after (its peak) | listings dropped | entries "
                  "without inode | names forgotten | fuse_inode before / after | dentry before / "
                  "after |", "|---|---|---|---|---|---|---|---|"]
        for r in budgeted:
            b, s0, s1 = r["budget"], r.get("slab_before") or {}, r.get("slab_after") or {}
            lines.append("| {:,} | {:.1f} MiB | {:.1f} ({:.1f}) of {:.0f} MiB | {:,} | {:,} | {:,} "
                         "| {} / {} | {} / {} |".format(
                             r["keys"], r["peak_rss_kib"] / 1024, b["bytes_mib"], b["peak_mib"],
                             b["budget_mib"], b["listings_evicted"], b["entries_without_inode"],
                             b["invalidations"], fmt(s0.get("fuse_inode")),
                             fmt(s1.get("fuse_inode")), fmt(s0.get("dentry")),
                             fmt(s1.get("dentry"))))
    for r in results["find"]:
        b = r.get("breakdown")
        if not b:
            continue
        if b.get("error"):
            lines += ["", "objmount at {:,} keys, bytes/key breakdown: {}".format(
                r["keys"], b["error"])]
            continue
        lines += ["", "objmount at {:,} keys ({:,} inodes): where the bytes per key go "
                  "(glibc chunks, from tools/bench/meta_sizes.c)".format(
                      r["keys"], r.get("inodes") or 0), "",
                  "| record | bytes/key |", "|---|---|"]
        lines += ["| %s | %.1f |" % (k, v) for k, v in b["rows"]]
        lines += ["| **sum of the records** | **%.1f** |" % b["model"],
                  "| measured (peak RSS - RSS after mount) / keys | %d |" % b["measured"],
                  "| rest (directories, allocator slack, buffers) | %.1f |" % b["rest"]]
    ls = results.get("ls")
    if ls and ls.get("limit"):
        lines += ["", "`ls -l` of one directory of {:,} keys, {:g} ms before every answer, "
                  "fresh mount (path resolved first); the limit: the {} LIST pages fetched in "
                  "sequence, {:.3f} s.".format(ls["keys"], ls["latency_ms"],
                                                 ls["limit"]["pages"], ls["limit"]["seconds"]),
                  "", "| peer | ls -l (median of fresh mounts) | x the limit | runs | again, same "
                  "mount | requests |", "|---|---|---|---|---|---|"]
        for r in ls["peers"]:
            if r.get("seconds") is None:
                lines.append("| %s | %s | | | | |" % (r["peer"], r.get("error", "?")))
            else:
                lines.append("| %s | %.3f s | %.2f | %s | %s | %s |" % (
                    r["peer"], r["seconds"], r["vs_limit"],
                    " ".join("%.3f" % x["seconds"] for x in r["runs"]),
                    fmt(r["warm_seconds"], "%.3f s"), fmt_kinds(r["requests"])))
    if results.get("manifest"):
        lines += ["", "Manifest mounts (`objmountctl manifest build`, then `-o manifest=FILE`):",
                  "", "| keys | build | build requests | manifest | bytes/key | start (mounted) "
                  "| start requests | first ls | find -type f | find requests | peak RSS |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["manifest"]:
            if r.get("error"):
                lines.append("| {:,} | {} | | | | | | | | | |".format(r["keys"], r["error"]))
                continue
            lines.append("| {:,} | {:.1f} s | {} | {:.1f} MiB | {} | {:.3f} s | {} | {} | {} "
                         "| {} | {} |".format(
                             r["keys"], r["build_s"], fmt_kinds(r["build_requests"]),
                             r["manifest_bytes"] / MiB, r["manifest_bytes_per_key"],
                             r["start_s"], fmt_kinds(r["start_requests"]) or "none",
                             fmt(r.get("first_ls_s"), "%.3f s"),
                             fmt(r.get("find_s"), "%.2f s"),
                             fmt_kinds(r["find_requests"]) or "none",
                             fmt(r.get("peak_rss_kib") and r["peak_rss_kib"] / 1024, "%.1f MiB")))
    errors = ["%s %s keys: %s" % (r["peer"], r["keys"], r["error"]) for r in results["find"]
              if r.get("error") and not r["error"].startswith("skipped")]
    if errors:
        lines += [""] + ["- " + e for e in errors]
    return "\n".join(lines) + "\n"


# -- main --------------------------------------------------------------------------------
def int_list(text):
    try:
        v = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected numbers separated by commas: %r" % text)
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError("expected positive numbers: %r" % text)
    return v


def peer_list(text):
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names or any(p not in PEERS for p in names):
        raise argparse.ArgumentTypeError("peers among %s: %r" % (", ".join(PEERS), text))
    return names


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--keys", type=int_list, default=[50000, 1000000],
                    help="key counts, comma-separated (default 50000,1000000)")
    ap.add_argument("--peers", type=peer_list, default=PEERS,
                    help="comma-separated: %s (default all)" % ", ".join(PEERS))
    ap.add_argument("--s3fs-max-keys", type=int, default=50000,
                    help="skip s3fs above this many keys (default 50000)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="s a find or ls -l may take before the mount is killed (default 600)")
    ap.add_argument("--fanout", type=int, default=32, help="directories per level (default 32)")
    ap.add_argument("--per-dir", type=int, default=1000,
                    help="files per leaf directory (default 1000)")
    ap.add_argument("--size", type=int, default=1024, help="bytes per object (default 1024)")
    ap.add_argument("--ls-keys", type=int, default=5000,
                    help="keys in the ls -l directory (default 5000)")
    ap.add_argument("--ls-latency", type=float, default=10.0,
                    help="ms before every answer in the ls -l case (default 10)")
    ap.add_argument("--ls-runs", type=int, default=3,
                    help="fresh mounts per peer in the ls -l case; the median counts (default 3)")
    ap.add_argument("--no-ls", action="store_true", help="skip the ls -l case")
    ap.add_argument("--metadata-memory", default=None, metavar="SIZE",
                    help="objmount -o metadata_memory=SIZE (default: objmount's, RAM/8)")
    ap.add_argument("--no-manifest", action="store_true",
                    help="skip the manifest mounts (build, start, find)")
    ap.add_argument("--no-manifest-find", action="store_true",
                    help="manifest mounts: build and start (and one ls) only, no find")
    ap.add_argument("--manifest-only", action="store_true",
                    help="skip the find of every peer: only the manifest case (and ls -l "
                    "unless --no-ls)")
    ap.add_argument("--out", default=None,
                    help="results directory (default results/scale-<timestamp>/)")
    peermod.add_peer_args(ap)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the FUSE mounts")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = args.out or os.path.join(REPO_ROOT, "results", "scale-" + stamp)
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": benchmod.git_commit(),
            "keys": args.keys, "fanout": args.fanout, "per_dir": args.per_dir,
            "size": args.size, "cpus": os.cpu_count(), "load_before": load(),
            "command": " ".join(["/usr/bin/python3"] + sys.argv)}
    results = {"find": [], "manifest": []}
    work = tempfile.mkdtemp(prefix="objmount-scale-")
    t0 = time.monotonic()
    interrupted = False
    srv = None
    try:
        for n in args.keys:
            srv = SynthServer(n, log_path=os.path.join(logdir, "synth-%d.log" % n),
                              bucket=BUCKET, fanout=args.fanout, per_dir=args.per_dir,
                              size=args.size).start()
            log("%d keys: synthbucket on %s (depth %d)" % (n, srv.endpoint, srv.layout["depth"]))
            for name in ([] if args.manifest_only else args.peers):
                why = make_peer(name, args).available()
                if not why and name == "s3fs" and n > args.s3fs_max_keys:
                    why = "above --s3fs-max-keys %d" % args.s3fs_max_keys
                if why:
                    results["find"].append({"peer": name, "keys": n, "error": "skipped: " + why})
                    log("  %-8s %9d keys: skipped: %s" % (name, n, why))
                    continue
                results["find"].append(find_case(name, args, srv, n, work, logdir))
            if ("objmount" in args.peers or args.manifest_only) and not args.no_manifest:
                results["manifest"].append(manifest_case(args, srv, n, work, logdir))
            srv.stop()
            srv = None
        if not args.no_ls:
            ls_case(args, work, logdir, results)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    finally:
        peermod.hold_signals()
        peermod.unmount_all(log)
        if srv is not None:
            srv.stop()
        peermod.remove_work(work, args.keep_work, log)
    meta.update(duration_s=round(time.monotonic() - t0, 1), load_after=load(),
                interrupted=interrupted)
    md = markdown(results, meta)
    print(md)
    with open(os.path.join(outdir, "scale.md"), "w") as f:
        f.write(md)
    with open(os.path.join(outdir, "scale.json"), "w") as f:
        json.dump({"meta": meta, "results": results, "markdown": md}, f, indent=1)
    log("results in %s" % outdir)
    if interrupted:
        return 130
    ran = [r for r in results["find"] if not r.get("error", "").startswith("skipped")]
    bad = [r for r in ran if r.get("error")] + [r for r in results["manifest"]
                                                 if r.get("error")] + [
        r for r in results.get("ls", {}).get("peers", []) if r.get("error")
        and not r["error"].startswith("skipped")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
