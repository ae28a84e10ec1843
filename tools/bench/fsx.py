#!/usr/bin/python3
"""The benchmark's correctness section: omfsx on every peer, fresh mounts, one server each.

    /usr/bin/python3 tools/bench/fsx.py [--ops N] [--files F] [--seed S]
        [--peers objmount,objmount-training,objmount-faults,s3fs,rclone]
        [--server KIND] [--out results.json] [--max-size BYTES] [--timeout S]

For every peer (variant) it starts a private server (--server, default
versitygw: tests/harness/servers.py; a fresh directory, on 127.0.0.1, free
ports), for objmount-faults the fault proxy in front of it,
mounts the peer read-write, and runs tools/omfsx (tools/omfsx.c: FILES
threads, each applying OPS random writes, reads, truncates, mmap reads and
writes, fsyncs, reopens and second-process reads to its own file, each
checked against an in-memory model) with -m MODELDIR. It reports, per peer,
how many operations each file survived and omfsx's first failure message.

After omfsx and the unmount, every file that survived all its operations is
compared with its model as stored in the bucket (boto3, straight to the
server); for the objmount variants it is also read back through a fresh
objmount mount (no faults), and leftover multipart uploads and recovery
entries are counted.

Variants:
  objmount           -o rw,part_size=5M (a 12 MiB file is 3 parts: multipart
                     commits happen), defaults otherwise
  objmount-training  the same plus profile=training (day-long attribute and
                     entry caching, keep_cache)
  objmount-faults    the same as objmount, through tools/faultproxy, which every
                     --fault-every seconds re-arms: a burst of 3 x 5xx (503
                     SlowDown and 500 InternalError in turn) on the next
                     requests of any kind, one silently shortened PutObject or
                     UploadPart body (half of it stored, 200 answered) and one
                     truncated GetObject body (Content-Length announces more)
  s3fs               s3fs-fuse with bench.py's settings (no use_cache)
  rclone             rclone mount --vfs-cache-mode writes (--rclone-cache-mode;
                     without a VFS cache rclone cannot do random writes at all)

Prints a Markdown table; --out writes everything as JSON. When an objmount
variant fails, its omfsx output, daemon log, models, proxy stats and server
log are kept in --fail-dir PREFIX-<variant>/ (default /tmp/fsx-fail-<variant>).
Everything started (servers, proxy, mounts, omfsx) is stopped on exit, on
errors, on Ctrl-C and on SIGTERM/SIGHUP. Must run as root (FUSE mounts).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers as peermod  # noqa: E402
from harness.faultproxy import FaultProxy  # noqa: E402  (path set up by peers)
from harness.recovery import entries  # noqa: E402
from harness.procs import kill_group, set_pdeathsig as _set_pdeathsig  # noqa: E402

REPO_ROOT = peermod.REPO_ROOT
BUCKET = peermod.BUCKET
MiB = 1 << 20

OBJMOUNT_OPTS = ["rw", "part_size=5M"]
VARIANTS = {
    "objmount": {"peer": "objmount", "opts": OBJMOUNT_OPTS, "faults": False},
    "objmount-training": {"peer": "objmount", "opts": OBJMOUNT_OPTS + ["profile=training"],
                          "faults": False},
    "objmount-faults": {"peer": "objmount", "opts": OBJMOUNT_OPTS, "faults": True},
    "s3fs": {"peer": "s3fs", "faults": False},
    "rclone": {"peer": "rclone", "faults": False},
}
ALIASES = {"all": ",".join(VARIANTS),
           "objmount-all": "objmount,objmount-training,objmount-faults"}

LAST_LINE = re.compile(r"^omfsx: seed (\d+), (\d+) files, survived:([\d ]+) of (\d+) operations")
FAILED_LINE = re.compile(r"^omfsx: (\S+): operation (\d+) failed: (.*)$")


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# -- faults ------------------------------------------------------------------------------
class Faulter(threading.Thread):
    """Re-arms the proxy's faults every `every` seconds (nth=1 counts from the
    moment a mode is set): a burst of 3 x 5xx on any request, one shortened
    PUT body, one truncated GET body. A burst is at most 3 failures in a row,
    fewer than objmount's retries (5), so none of it may ever reach omfsx."""

    def __init__(self, fp, every):
        super().__init__(daemon=True)
        self.fp = fp
        self.every = every
        self.stop_event = threading.Event()
        self.rounds = 0
        self.error = None

    def run(self):
        statuses = [(503, "SlowDown"), (500, "InternalError")]
        while not self.stop_event.is_set():
            status, code = statuses[self.rounds % 2]
            try:
                self.fp.set_faults(
                    errors={"status": status, "code": code, "nth": 1, "count": 3},
                    short_put={"fraction": 0.5, "kind": ["PutObject", "UploadPart"], "nth": 1},
                    truncate={"fraction": 0.5, "kind": "GetObject", "nth": 1})
                self.rounds += 1
            except Exception as e:  # noqa: BLE001 - report, keep going
                self.error = str(e)
            self.stop_event.wait(self.every)

    def stop(self):
        self.stop_event.set()
        self.join(timeout=15)
        try:
            self.fp.set_faults(errors=None, short_put=None, truncate=None)
        except Exception:  # noqa: BLE001
            pass


# -- omfsx -------------------------------------------------------------------------------
def parse_omfsx(text, files):
    """{survived: [n per file] or None, failures: [first failure line per file]}"""
    survived = None
    for line in text.splitlines():
        m = LAST_LINE.match(line)
        if m:
            survived = [int(x) for x in m.group(3).split()]
    failures = {}
    for line in text.splitlines():
        m = FAILED_LINE.match(line)
        if m:
            name = os.path.basename(m.group(1))
            failures.setdefault(name, "%s: operation %s failed: %s"
                                % (name, m.group(2), m.group(3)))
    first = None
    for line in text.splitlines():
        m = FAILED_LINE.match(line)
        if m:
            first = "%s: operation %s failed: %s" % (os.path.basename(m.group(1)), m.group(2),
                                                     m.group(3))
            break
        if line.startswith("omfsx: saving the model"):
            first = line.split("omfsx: ", 1)[1]
            break
    if first is None and survived is None:
        tail = [ln for ln in text.splitlines() if ln.strip()][-3:]
        first = " / ".join(tail) if tail else "no output"
    return {"survived": survived, "failures": failures, "first_failure": first}


def failure_excerpt(text, limit=80):
    """The first failure with its op log and repeat line."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if FAILED_LINE.match(line):
            out = [line]
            for ln in lines[i + 1:i + limit]:
                out.append(ln)
                if ln.startswith("omfsx: repeat with:"):
                    break
            return "\n".join(out)
    return ""


def run_omfsx(omfsx, args, mnt, model_dir, out_path, timeout):
    argv = [omfsx, "-s", str(args.seed), "-n", str(args.ops), "-f", str(args.files),
            "-S", str(args.max_size), "-m", model_dir]
    if args.max_write:
        argv += ["-w", str(args.max_write)]
    if args.no_mmap:
        argv.append("-N")
    argv.append(mnt)
    t0 = time.monotonic()
    with open(out_path, "wb") as out:
        out.write(("$ %s\n" % " ".join(argv)).encode())
        out.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, preexec_fn=_set_pdeathsig)
        run_omfsx.live = proc
        try:
            rc = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        finally:
            if proc.poll() is None:
                kill_group(proc.pid, timeout=3)
            run_omfsx.live = None
    with open(out_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return {"argv": argv, "rc": rc, "timed_out": timed_out,
            "seconds": round(time.monotonic() - t0, 1), "text": text}


run_omfsx.live = None


# -- checks ------------------------------------------------------------------------------
def describe_diff(got, want):
    if got == want:
        return None
    n = min(len(got), len(want))
    i = next((k for k in range(n) if got[k] != want[k]), n)
    return "differs at byte %d (stored %d bytes, model %d)" % (i, len(got), len(want))


def compare_with_models(files, model_dir, ok_files, read, what):
    """{file: "match" | problem} for the files that survived; read(name)
    gives the bytes to compare (an exception is the problem: what + it)."""
    out = {}
    for name in files:
        if name not in ok_files:
            out[name] = "not checked (the file failed)"
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            want = f.read()
        try:
            got = read(name)
        except Exception as e:  # noqa: BLE001
            out[name] = "%s: %s" % (what, e)
            continue
        out[name] = describe_diff(got, want) or "match"
    return out


def compare_stored(s3, files, model_dir, ok_files):
    """The objects in the bucket against the models."""
    return compare_with_models(
        files, model_dir, ok_files,
        lambda name: s3.get_object(Bucket=BUCKET, Key=name)["Body"].read(), "missing")


def wait_stored_sizes(s3, files, model_dir, ok_files, timeout):
    """For peers that upload after close (rclone): wait until each object has
    its model's size (or timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = 0
        for name in ok_files:
            want = os.path.getsize(os.path.join(model_dir, name))
            try:
                if s3.head_object(Bucket=BUCKET, Key=name)["ContentLength"] != want:
                    pending += 1
            except Exception:  # noqa: BLE001
                pending += 1
        if not pending:
            return True
        time.sleep(1)
    return False


def read_back(peer, endpoint, mnt, work, logp, files, model_dir, ok_files):
    """The files read through a fresh mount against the models."""
    m = peer.mount(endpoint, mnt, work, logp, write=True, timeout=60)

    def read(name):
        with open(os.path.join(mnt, name), "rb") as f:
            return f.read()
    try:
        return compare_with_models(files, model_dir, ok_files, read, "read failed")
    finally:
        problems = peermod.unmount(m)
        if problems:
            log("  read-back unmount: %s" % "; ".join(problems))


def summarize_checks(checks):
    if checks is None:
        return "-"
    vals = list(checks.values())
    checked = [v for v in vals if not v.startswith("not checked")]
    if not checked:
        return "n/a (no file survived)"
    bad = [v for v in checked if v != "match"]
    if bad:
        return "**%d of %d differ**" % (len(bad), len(checked))
    return "%d of %d match" % (len(checked), len(checked)) + \
        (" (%d failed files not checked)" % (len(vals) - len(checked)) if len(vals) > len(checked)
         else "")


# -- one variant -------------------------------------------------------------------------
def make_peer(vname, args):
    v = VARIANTS[vname]
    if v["peer"] == "objmount":
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = list(v["opts"]) + [o for o in args.objmount_opts.split(",") if o]
    elif v["peer"] == "s3fs":
        p = peermod.S3fs()
        p.extra = [o for o in args.s3fs_opts.split(",") if o]
    else:
        p = peermod.Rclone()
        p.write_flags = list(p.write_flags)
        i = p.write_flags.index("--vfs-cache-mode")
        p.write_flags[i + 1] = args.rclone_cache_mode
        p.extra = args.rclone_flags.split()
    return p


def settings_of(vname, peer, args):
    v = VARIANTS[vname]
    if v["peer"] == "objmount":
        s = "-o " + ",".join(peer.extra)
        if v["faults"]:
            s += "; fault proxy every %g s: 3 x 5xx, 1 short PUT/part, 1 truncated GET" \
                 % args.fault_every
        return s
    if v["peer"] == "s3fs":
        return "-o " + ",".join(peer.options + peer.extra)
    return " ".join(peer.write_flags + peer.extra)


def run_variant(vname, args, work_root):
    v = VARIANTS[vname]
    res = {"variant": vname, "peer": v["peer"], "faults": v["faults"]}
    peer = make_peer(vname, args)
    why = peer.available()
    if why:
        res["error"] = "skipped: " + why
        return res
    work = os.path.join(work_root, vname)
    os.makedirs(work)
    model_dir = os.path.join(work, "model")
    os.makedirs(model_dir)
    mnt = os.path.join(work, "mnt")
    logp = os.path.join(work, "daemon.log")
    out_path = os.path.join(work, "omfsx.out")
    files = ["fsx%d" % i for i in range(args.files)]
    srv = fp = faulter = m = None
    try:
        srv = peermod.start_server(args.server, work)
        if v["faults"]:
            fp = FaultProxy(srv).start()
        endpoint = fp.endpoint if fp else srv.endpoint
        peer.prepare(endpoint, work)
        res["version"] = peer.version()
        res["settings"] = settings_of(vname, peer, args)
        m = peer.mount(endpoint, mnt, work, logp, write=True, timeout=60)
        log("%s: mounted (pid %d), %s; omfsx -s %d -n %d -f %d -S %d"
            % (vname, m.pid, endpoint, args.seed, args.ops, args.files, args.max_size))
        if fp:
            faulter = Faulter(fp, args.fault_every)
            faulter.start()
        run = run_omfsx(args.omfsx_copy, args, mnt, model_dir, out_path, args.timeout)
        if faulter:
            faulter.stop()
            res["fault_rounds"] = faulter.rounds
            st = fp.stats()
            res["faults_injected"] = st["faults"]
            res["faults_by_kind"] = st.get("faults_by_kind", {})
            res["requests"] = st["requests"]["by_kind"]
            if faulter.error:
                res["fault_control_error"] = faulter.error
        res.update({k: run[k] for k in ("rc", "timed_out", "seconds")})
        res["command"] = " ".join(run["argv"])
        parsed = parse_omfsx(run["text"], args.files)
        res.update(parsed)
        res["output_tail"] = "\n".join(run["text"].splitlines()[-40:])
        res["failure_excerpt"] = failure_excerpt(run["text"])
        if run["timed_out"]:
            res["first_failure"] = "timed out after %.0f s" % args.timeout
        daemon_alive = m.proc.poll() is None
        if not daemon_alive:
            res["daemon_exit"] = m.proc.returncode
        if v["peer"] == "objmount" and daemon_alive:
            res["stats"] = peer.collect(m, work, vname)
        survived = parsed["survived"] or [0] * args.files
        ok_files = {files[i] for i in range(args.files)
                    if i < len(survived) and survived[i] == args.ops
                    and files[i] not in parsed["failures"]}
        res["passed"] = (run["rc"] == 0 and len(ok_files) == args.files)
        s3 = srv.client()
        if v["peer"] != "objmount" and ok_files and daemon_alive:
            res["upload_settled"] = wait_stored_sizes(s3, files, model_dir, ok_files, 120)
        problems = peermod.kill_mount(m) if run["timed_out"] else peermod.unmount(m, timeout=120)
        if problems:
            res["unmount_problems"] = problems
        m = None
        if v["peer"] == "objmount":  # counted before after_unmount empties cache_dir
            res["recovery_entries"] = len(entries(peer.cache_dir, "recovery"))
            res["staging_left"] = len(entries(peer.cache_dir, "staging"))
        peer.after_unmount(True)
        res["stored"] = compare_stored(s3, files, model_dir, ok_files)
        ups = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        res["multipart_uploads_left"] = len(ups)
        if v["peer"] == "objmount":
            # read back through a fresh objmount mount, straight to the server
            res["read_back"] = read_back(peer, srv.endpoint, mnt, work,
                                         os.path.join(work, "readback.log"), files, model_dir,
                                         ok_files)
        res["stored_summary"] = summarize_checks(res["stored"])
        res["read_back_summary"] = summarize_checks(res.get("read_back"))
        bad = [x for x in list(res["stored"].values()) + list(res.get("read_back", {}).values())
               if not x.startswith("not checked") and x != "match"]
        if bad:
            res["passed"] = False
    except peermod.MountError as e:
        res["error"] = "mount: %s" % e
        res["passed"] = False
    except (KeyboardInterrupt, peermod.Interrupted):
        # keep what the run showed so far: omfsx's progress lines
        peermod.hold_signals()  # the cleanup below must not be cut short
        res["passed"] = False
        res["interrupted"] = True
        res["survived_at_least"] = progress(out_path, files)
        res["first_failure"] = "interrupted; no failure seen up to then"
        try:
            with open(out_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            parsed = parse_omfsx(text, args.files)
            if parsed["failures"]:
                res["first_failure"] = parsed["first_failure"]
                res["failure_excerpt"] = failure_excerpt(text)
        except OSError:
            pass
        run_variant.partial = res
        raise
    finally:
        if faulter and faulter.is_alive():
            faulter.stop()
        if run_omfsx.live is not None:
            kill_group(run_omfsx.live.pid, timeout=3)
        if m is not None:
            peermod.unmount(m, timeout=10)
        keep = (v["peer"] == "objmount" and not res.get("passed", False) and args.fail_dir
                and not res.get("interrupted"))
        if keep:
            save_failure(res, args, work, srv, fp, vname)
        if fp is not None:
            fp.stop()
        if srv is not None:
            srv.stop()
    return res


run_variant.partial = None

PROGRESS_LINE = re.compile(r"^omfsx: (\S+): (\d+) operations$")


def progress(out_path, files):
    """Operations each file had passed at its last progress line (omfsx
    prints one every 10,000)."""
    done = {name: 0 for name in files}
    try:
        with open(out_path, "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                m = PROGRESS_LINE.match(line)
                if m and os.path.basename(m.group(1)) in done:
                    done[os.path.basename(m.group(1))] = int(m.group(2))
    except OSError:
        pass
    return [done[name] for name in files]


def save_failure(res, args, work, srv, fp, vname):
    d = "%s-%s" % (args.fail_dir, vname)
    if os.path.exists(d):
        d += time.strftime("-%Y%m%d-%H%M%S")
    os.makedirs(d, exist_ok=True)
    for name in ("omfsx.out", "daemon.log", "readback.log", "objmount-stats.txt"):
        p = os.path.join(work, name)
        if os.path.exists(p):
            shutil.copy2(p, d)
    if os.path.isdir(os.path.join(work, "model")):
        shutil.copytree(os.path.join(work, "model"), os.path.join(d, "model"),
                        dirs_exist_ok=True)
    if srv is not None and srv.log_path and os.path.exists(srv.log_path):
        shutil.copy2(srv.log_path, os.path.join(d, "server.log"))
    if fp is not None:
        try:
            with open(os.path.join(d, "faultproxy-stats.json"), "w") as f:
                json.dump(fp.stats(), f, indent=1)
        except Exception:  # noqa: BLE001
            pass
        if os.path.exists(fp.log_path):
            shutil.copy2(fp.log_path, os.path.join(d, "faultproxy.log"))
    cache = os.path.join(work, "objmount-cache")
    if os.path.isdir(cache):
        shutil.copytree(cache, os.path.join(d, "objmount-cache"), dirs_exist_ok=True,
                        ignore_dangling_symlinks=True)
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    res["saved_to"] = d
    log("%s FAILED: saved to %s" % (vname, d))


# -- report ------------------------------------------------------------------------------
def markdown(results, meta):
    lines = ["omfsx -s %d -n %d -f %d -S %d%s, %s (%s)" % (
        meta["seed"], meta["ops"], meta["files"], meta["max_size"],
        " -N" if meta["no_mmap"] else "", meta["date"], meta["commit"]), "",
        "| peer | settings | operations survived per file (of %d) | result | stored objects = model "
        "| read back via fresh objmount | first failure |" % meta["ops"],
        "|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r and "survived" not in r:
            lines.append("| %s | %s | - | %s | - | - | %s |" % (
                r["variant"], r.get("settings", ""), "skipped" if r["error"].startswith(
                    "skipped") else "**error**", r["error"].replace("|", "\\|")[:300]))
            continue
        surv = " ".join(str(x) for x in (r.get("survived") or [])) or "?"
        verdict = "pass" if r.get("passed") else "**FAIL**"
        if r.get("interrupted"):
            surv = "at least " + " ".join(str(x) for x in r.get("survived_at_least") or [])
            verdict = "interrupted"
        extra = []
        if r.get("faults_injected"):
            fi = r["faults_injected"]
            extra.append("faults injected: %s" % ", ".join(
                "%s %d" % (k, n) for k, n in sorted(fi.items()) if n))
        if r.get("multipart_uploads_left"):
            extra.append("%d multipart uploads left" % r["multipart_uploads_left"])
        if r.get("recovery_entries"):
            extra.append("%d recovery entries" % r["recovery_entries"])
        if "daemon_exit" in r:
            extra.append("daemon exited %s" % r["daemon_exit"])
        first = (r.get("first_failure") or "-").replace("|", "\\|")
        if len(first) > 300:
            first = first[:300] + "..."
        lines.append("| %s | %s | %s | %s%s | %s | %s | %s |" % (
            r["variant"], r.get("settings", "").replace("|", "\\|"), surv, verdict,
            ("; " + "; ".join(extra)) if extra else "", r.get("stored_summary", "-"),
            r.get("read_back_summary", "-"), first))
    return "\n".join(lines) + "\n"


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--ops", type=int, default=2000, help="operations per file (default 2000)")
    ap.add_argument("--files", type=int, default=4, help="files (threads), default 4")
    ap.add_argument("--seed", type=int, default=1, help="omfsx seed (default 1)")
    ap.add_argument("--peers", default="all",
                    help="comma-separated variants: %s; or all, objmount-all (default all)"
                         % ", ".join(VARIANTS))
    ap.add_argument("--out", default=None, help="write the results as JSON to this file")
    peermod.add_server_arg(ap)
    ap.add_argument("--max-size", type=int, default=12582912,
                    help="omfsx -S: largest file size (default 12 MiB: 3 parts of 5 MiB)")
    ap.add_argument("--max-write", type=int, default=None, help="omfsx -w (default its own)")
    ap.add_argument("--no-mmap", action="store_true", help="omfsx -N")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds omfsx may run per peer (default 600 + 0.1 s per operation)")
    ap.add_argument("--fault-every", type=float, default=5.0,
                    help="objmount-faults: seconds between fault rounds (default 5)")
    ap.add_argument("--objmount", default=os.path.join(REPO_ROOT, "build", "objmount"))
    ap.add_argument("--objmountctl", default=os.path.join(REPO_ROOT, "build", "tools",
                                                          "objmountctl"))
    ap.add_argument("--omfsx", default=os.path.join(REPO_ROOT, "build", "tools", "omfsx"))
    ap.add_argument("--objmount-opts", default="", help="extra -o options for objmount")
    ap.add_argument("--s3fs-opts", default="", help="extra -o options for s3fs")
    ap.add_argument("--rclone-flags", default="", help="extra flags for rclone mount")
    ap.add_argument("--rclone-cache-mode", default="writes", choices=["writes", "full"],
                    help="rclone --vfs-cache-mode (default writes)")
    ap.add_argument("--fail-dir", default="/tmp/fsx-fail",
                    help="prefix of the directory a failing objmount variant is saved in "
                         "(PREFIX-<variant>; empty: do not save)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory")
    args = ap.parse_args(argv)
    names = []
    for p in args.peers.split(","):
        p = p.strip()
        if p:
            names += ALIASES.get(p, p).split(",")
    for n in names:
        if n not in VARIANTS:
            ap.error("unknown peer %r (choose from %s)" % (n, ", ".join(VARIANTS)))
    args.variants = names
    if args.timeout is None:
        args.timeout = 600 + 0.1 * args.ops
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the FUSE mounts")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git_commit(),
            "seed": args.seed, "ops": args.ops, "files": args.files, "max_size": args.max_size,
            "max_write": args.max_write, "no_mmap": args.no_mmap,
            "command": " ".join(["/usr/bin/python3"] + sys.argv), "cpus": os.cpu_count(),
            "loadavg_before": os.getloadavg()}
    work = tempfile.mkdtemp(prefix="objmount-fsx-")
    # private copies: a rebuild of build/ during the run changes nothing
    args.omfsx_copy = os.path.join(work, "omfsx")
    shutil.copy2(args.omfsx, args.omfsx_copy)
    results = []
    interrupted = False
    t0 = time.monotonic()
    try:
        for vname in args.variants:
            log("%s: starting" % vname)
            r = run_variant(vname, args, work)
            results.append(r)
            log("%s: %s, survived %s%s" % (
                vname, "pass" if r.get("passed") else "FAIL", r.get("survived"),
                ("; first failure: " + r["first_failure"]) if r.get("first_failure") else
                (("; " + r["error"]) if r.get("error") else "")))
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
        if run_variant.partial is not None:
            results.append(run_variant.partial)
    finally:
        peermod.hold_signals()
        if run_omfsx.live is not None:
            kill_group(run_omfsx.live.pid, timeout=3)
        peermod.unmount_all(log)
        peermod.remove_work(work, args.keep_work, log)
    meta["duration_s"] = round(time.monotonic() - t0, 1)
    meta["loadavg_after"] = os.getloadavg()
    meta["interrupted"] = interrupted
    md = markdown(results, meta)
    print(md)
    for r in results:
        if r.get("failure_excerpt"):
            print("%s, first failure:\n```\n%s\n```\n" % (r["variant"], r["failure_excerpt"]))
    if args.out:
        d = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(d, exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": results, "markdown": md}, f, indent=1,
                      default=str)
    if interrupted:
        return 130
    return 0 if results and all(r.get("passed") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
