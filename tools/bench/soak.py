#!/usr/bin/python3
"""A long mixed run against one objmount mount, and what its memory does
(issue 23: "a one-hour soak's RSS stays flat after warm-up").

    /usr/bin/python3 tools/bench/soak.py [--minutes M] [--workers W] [--latency MS]
        [--sample S] [--seed SEED] [--server KIND] [--out results.json] [--objmount-opts O]

One private server (--server, default versitygw: tests/harness/servers.py)
with the fault proxy in front of it (LATENCY ms before the
first byte of every request, default 2), one objmount mount with its
defaults (plus --objmount-opts). WORKERS threads (default 4) each own a
directory wK/ and, for MINUTES minutes (default 60), pick one operation at a
time:

  write   a new file of 0.1-20 MB (random bytes), written and closed;
  read    a file of its own read whole, its MD5 checked against what was
          written;
  list    its directory listed, the names checked against its own record;
  rename  a file of its own renamed to a new name;
  delete  a file of its own removed (also whenever it holds 20 files).

Every SAMPLE seconds (default 60) the daemon's VmRSS and `objmountctl stats
--json` (open readers and writers, read buffers in use, the namespace's
bytes) are recorded. At the end the workers stop, the mount is left idle
for 15 s with no file open, and the same is recorded once more, with the
resident bytes split into the heap, other anonymous memory and files.

Prints a Markdown table of the samples and a summary: RSS after mount, at
the end of the warm-up (the first WARMUP minutes, default 5 or a tenth of
the run), at the end, the highest, the growth from the end of the warm-up
to the end (a least-squares line through the samples, MiB per hour), and
what the idle mount still held. A read that
differs, an operation that fails, or a listing that differs from the
record fails the run (exit 1). Everything started is stopped on exit,
errors, Ctrl-C and SIGTERM/SIGHUP. Must run as root (FUSE mount).
"""

import argparse
import hashlib
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
import peers as peermod  # noqa: E402
import shared as sharedmod  # noqa: E402

MiB = 1 << 20
MAX_FILES = 20
OPS = [("write", 30), ("read", 30), ("list", 15), ("rename", 10), ("delete", 15)]
log = benchmod.log


class Worker:
    """One thread's files and counts; its own directory under the mount."""

    def __init__(self, k, root, seed):
        self.dir = os.path.join(root, "w%d" % k)
        os.makedirs(self.dir, exist_ok=True)
        self.rng = random.Random("%s-%d" % (seed, k))
        self.files = {}  # name: md5
        self.serial = 0
        self.counts = {op: 0 for op, _ in OPS}
        self.bytes_written = self.bytes_read = 0
        self.errors = []

    def step(self):
        op = self.rng.choices([o for o, _ in OPS], [w for _, w in OPS])[0]
        if len(self.files) >= MAX_FILES:
            op = "delete"
        if not self.files and op != "list":
            op = "write"
        getattr(self, op)()
        self.counts[op] += 1

    def pick(self):
        return self.rng.choice(sorted(self.files))

    def write(self):
        self.serial += 1
        name = "f%06d.bin" % self.serial
        data = self.rng.randbytes(self.rng.randint(100_000, 20_000_000))
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(data)
        self.files[name] = hashlib.md5(data).hexdigest()
        self.bytes_written += len(data)

    def read(self):
        name = self.pick()
        with open(os.path.join(self.dir, name), "rb") as f:
            data = f.read()
        self.bytes_read += len(data)
        if hashlib.md5(data).hexdigest() != self.files[name]:
            raise sharedmod.DataMismatch("%s/%s: %d bytes read differ from what was written"
                                         % (os.path.basename(self.dir), name, len(data)))

    def list(self):
        got = sorted(os.listdir(self.dir))
        if got != sorted(self.files):
            raise sharedmod.DataMismatch("%s lists %s, written %s" % (
                os.path.basename(self.dir), got[:5], sorted(self.files)[:5]))

    def rename(self):
        name = self.pick()
        self.serial += 1
        new = "r%06d.bin" % self.serial
        os.rename(os.path.join(self.dir, name), os.path.join(self.dir, new))
        self.files[new] = self.files.pop(name)

    def delete(self):
        name = self.pick()
        os.unlink(os.path.join(self.dir, name))
        del self.files[name]


def run_worker(w, stop):
    while not stop.is_set() and not w.errors:
        try:
            w.step()
        except (OSError, sharedmod.DataMismatch) as e:
            w.errors.append("%s: %s" % (type(e).__name__, e))


def vm_rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_parts(pid):
    """Resident bytes by kind of mapping (/proc/PID/smaps): the main heap,
    other anonymous memory (threads' malloc arenas, stacks, read buffers),
    and files (the program and its libraries)."""
    parts = {"heap": 0, "anonymous": 0, "files": 0}
    kind = None
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                head = line.split()
                if not head:
                    continue
                if "-" in head[0] and not head[0].endswith(":"):
                    name = head[5] if len(head) > 5 else ""
                    kind = "heap" if name == "[heap]" else \
                        "files" if name.startswith("/") else "anonymous"
                elif head[0] == "Rss:" and kind:
                    parts[kind] += int(head[1]) * 1024
    except OSError:
        pass
    return parts


def sample(p, m, t0, label=None):
    row = {"minute": round((time.monotonic() - t0) / 60, 1), "rss": vm_rss(m.pid)}
    if label:
        row["label"] = label
    try:
        out = subprocess.run([p.ctl, "stats", m.mountpoint, "--json"], capture_output=True,
                             text=True, timeout=20)
        st = json.loads(out.stdout)
        st = st[0] if isinstance(st, list) else st
        row.update(open_readers=st["reads"]["open_readers"],
                   open_writers=(st.get("writes") or {}).get("open_writers"),
                   read_buffers=st["memory"]["read_buffer_bytes"],
                   metadata_bytes=st["metadata"]["bytes"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
        row["stats_error"] = str(e)[:200]
    return row


def soak(args, work, res):
    srv = peermod.start_server(args.server, work)
    fp = m = None
    try:
        fp = sharedmod.start_proxy(srv)
        fp.set_faults(latency={"first_byte_ms": args.latency} if args.latency else None)
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = [o for o in args.objmount_opts.split(",") if o]
        p.name = "objmount"
        why = p.available()
        if why:
            raise RuntimeError("objmount: " + why)
        pw = os.path.join(work, "objmount")
        os.makedirs(pw)
        p.prepare(fp.endpoint, pw)
        res["version"], res["settings"] = p.version(), p.settings()
        with sharedmod.fresh_mount(p, pw, fp) as (m, mnt, _run_dir):
            t0 = time.monotonic()
            res["samples"].append(sample(p, m, t0, "after mount"))
            stop = threading.Event()
            workers = [Worker(k, mnt, args.seed) for k in range(args.workers)]
            threads = [threading.Thread(target=run_worker, args=(w, stop), daemon=True)
                       for w in workers]
            for t in threads:
                t.start()
            end = t0 + args.minutes * 60
            try:
                while time.monotonic() < end and not any(w.errors for w in workers):
                    time.sleep(min(args.sample, max(0.1, end - time.monotonic())))
                    if m.proc.poll() is not None:
                        raise RuntimeError("the daemon exited with %s" % m.proc.returncode)
                    row = sample(p, m, t0)
                    res["samples"].append(row)
                    log("  %5.1f min  RSS %6.1f MiB  open readers %s  read buffers %.1f MiB  "
                        "%d operations" % (row["minute"], (row["rss"] or 0) / MiB,
                                           row.get("open_readers"),
                                           (row.get("read_buffers") or 0) / MiB,
                                           sum(sum(w.counts.values()) for w in workers)))
            finally:
                stop.set()
                for t in threads:
                    t.join(120)
            # idle, nothing open: what the mount gives back (a lookup's
            # unopened whole object goes after 10 s, looked at every 2 s)
            time.sleep(15)
            row = sample(p, m, t0, "idle, nothing open")
            row["rss_parts"] = rss_parts(m.pid)
            res["samples"].append(row)
            log("  idle: RSS %.1f MiB (%s)" % ((row["rss"] or 0) / MiB, ", ".join(
                "%s %.1f" % (k, v / MiB) for k, v in row["rss_parts"].items())))
            res["operations"] = {op: sum(w.counts[op] for w in workers) for op, _ in OPS}
            res["mb_written"] = round(sum(w.bytes_written for w in workers) / 1e6)
            res["mb_read"] = round(sum(w.bytes_read for w in workers) / 1e6)
            res["errors"] = sum((w.errors for w in workers), [])
    finally:
        if fp is not None:
            fp.stop()
        srv.stop()


def summary(res, args):
    s = [x for x in res["samples"] if x.get("rss")]
    if len(s) < 3:
        return {}
    warm = args.warmup if args.warmup is not None else min(5.0, args.minutes / 10)
    running = [x for x in s if "label" not in x]
    after_warm = next((x for x in running if x["minute"] >= warm), running[0])
    last = running[-1]
    # the trend after the warm-up: a least-squares line through the samples
    # (single samples swing with the buffers in flight at that moment)
    fit = [x for x in running if x["minute"] >= after_warm["minute"]]
    slope = None
    if len(fit) >= 3:
        mx = sum(x["minute"] for x in fit) / len(fit)
        my = sum(x["rss"] for x in fit) / len(fit)
        den = sum((x["minute"] - mx) ** 2 for x in fit)
        if den > 0:
            slope = sum((x["minute"] - mx) * (x["rss"] - my) for x in fit) / den * 60 / MiB
    return {"rss_after_mount": s[0]["rss"], "rss_after_warmup": after_warm["rss"],
            "warmup_minute": after_warm["minute"], "rss_end": last["rss"],
            "rss_max": max(x["rss"] for x in running),
            "growth_mib_per_hour": None if slope is None else round(slope, 1),
            "idle": s[-1]}


def markdown(res, sm, meta):
    mib = lambda v: "-" if v is None else "%.1f" % (v / MiB)  # noqa: E731
    lines = ["objmount soak: %d workers, %g min, %g ms per request; %s (%s)" % (
        meta["workers"], meta["minutes"], meta["latency_ms"], meta["date"], meta["commit"]),
        "", "| minute | RSS MiB | open readers | open writers | read buffers MiB "
        "| namespace MiB | |", "|---|---|---|---|---|---|---|"]
    for x in res["samples"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            x["minute"], mib(x.get("rss")), x.get("open_readers", "-"),
            x.get("open_writers", "-"), mib(x.get("read_buffers")),
            mib(x.get("metadata_bytes")), x.get("label", "")))
    if sm:
        lines += ["", "RSS after mount %s MiB, after the warm-up (minute %s) %s MiB, at the "
                  "end %s MiB, highest %s MiB; trend after the warm-up (least squares) %s MiB per hour. Idle with "
                  "nothing open: RSS %s MiB, %s open readers, %s MiB of read buffers." % (
                      mib(sm["rss_after_mount"]), sm["warmup_minute"],
                      mib(sm["rss_after_warmup"]), mib(sm["rss_end"]), mib(sm["rss_max"]),
                      sm["growth_mib_per_hour"], mib(sm["idle"]["rss"]),
                      sm["idle"].get("open_readers"), mib(sm["idle"].get("read_buffers")))]
    if res.get("operations"):
        lines += ["", "Operations: %s; %s MB written, %s MB read, %d errors." % (
            ", ".join("%s %d" % kv for kv in res["operations"].items()), res["mb_written"],
            res["mb_read"], len(res.get("errors", [])))]
    for e in res.get("errors", [])[:5]:
        lines.append("- " + e)
    return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--minutes", type=float, default=60.0, help="length (default 60)")
    ap.add_argument("--workers", type=int, default=4, help="worker threads (default 4)")
    ap.add_argument("--latency", type=int, default=2, help="ms before the first byte (default 2)")
    ap.add_argument("--sample", type=float, default=60.0, help="s between samples (default 60)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="minutes of warm-up (default 5, or a tenth of a shorter run)")
    ap.add_argument("--seed", default="objmount-soak", help="seed of sizes, bytes and choices")
    ap.add_argument("--out", default=None, help="write the results as JSON to this file")
    peermod.add_server_arg(ap)
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.workers < 1 or args.sample <= 0:
        ap.error("--minutes, --workers and --sample must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the mount")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": benchmod.git_commit(), "workers": args.workers, "minutes": args.minutes,
            "latency_ms": args.latency, "command": " ".join(["/usr/bin/python3"] + sys.argv)}
    work = tempfile.mkdtemp(prefix="objmount-soak-")
    res = {"samples": []}
    interrupted = False
    try:
        soak(args, work, res)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    except (RuntimeError, peermod.MountError, OSError) as e:
        res["error"] = str(e)[:500]
        log("error: %s" % res["error"])
    finally:
        peermod.hold_signals()
        peermod.unmount_all(log)
        peermod.remove_work(work, args.keep_work, log)
    sm = summary(res, args)
    md = markdown(res, sm, meta)
    print(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": res, "summary": sm, "markdown": md}, f,
                      indent=1, default=str)
    if interrupted:
        return 130
    return 0 if not res.get("error") and not res.get("errors") else 1


if __name__ == "__main__":
    sys.exit(main())
