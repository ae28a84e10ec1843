#!/usr/bin/python3
"""Many readers of one object: N processes each reading its own share of one
large object (issue 23).

    /usr/bin/python3 tools/bench/shared.py [--quick] [--size-mib M] [--readers 1,2,4]
        [--peers objmount,objmount-training,s3fs,rclone] [--phases loopback,s3-like,s3-scaled]
        [--server KIND] [--timeout S] [--out results.json] [--objmount-opts O] [--keep-work]

One private server (--server, default versitygw: tests/harness/servers.py)
with the fault proxy in front of it, seeded (boto3 straight to the server, as
epochs.py's big.bin) with ONE object big.bin of SIZE-MIB MiB (default 512,
--quick 128). It is read back once from the server and the MD5 of every
1 MiB block is kept: every block any reader gets is checked against it.

Phases (the proxy's `latency` mode, on every request):

  loopback  first_byte_ms=10: 10 ms before the first byte, then as fast as
            the server and the proxy go on this machine;
  s3-like   first_byte_ms=20 and per_mib_ms=15.625: each response body is
            paced to 64 MiB/s (1000/64 ms per MiB; the proxy takes a float,
            so no rounding). A connection carries one response at a time,
            so this is 64 MiB/s per connection, as one S3 connection gives;
            a client only goes faster with parallel GETs.
  s3-scaled first_byte_ms=20 and per_mib_ms=62.5: 16 MiB/s per connection.
            On two cores the s3-like phase is bound by the CPU (the server,
            the proxy and the readers' MD5s share the cores with the
            mounts: every peer ends near 300 MiB/s, under five connections'
            worth), which a node reading from S3 is not: its store's CPU is
            elsewhere and its NIC carries 15-40 connections' worth. Scaled
            to this machine (about 300 MiB/s, so about 19 connections'
            worth), the per-connection rate binds again, as on such a node:
            how many GETs a client keeps in flight for its readers decides.

For every phase, every peer and every number of readers N (--readers), the
peers in an order that rotates from row to row (as bench.py's runs: no peer
always runs first, on a server that just answered the limit, or last):

  peer      the peer is mounted fresh (an empty cache directory for each run,
            as files.py), big.bin is stat'ed (the lookup), the page cache is
            dropped and the server's files read back in (so it answers from
            memory, as epochs.py). Then N reader PROCESSES (a DataLoader's
            workers, say) start together: reader k opens big.bin and read()s
            blocks [k*B/N, (k+1)*B/N) of its B 1 MiB blocks, in order, with
            1 MiB reads, checking the MD5 of every block (a hashing thread in
            each reader, so hashing overlaps the next read). A block that
            differs fails the run (DATA MISMATCH; exit status 1 at the end).
            MiB/s = the object's size / the time from the start signal to
            the end of the slowest reader.
  limit     no mount: N parallel curl processes, each one ranged GET of its
            share through the same proxy (presigned URLs): what this server
            and proxy can give to N connections.

Also recorded for every peer run: the proxy's GETs and the bytes it sent
(their ratio to the object's size is the GET amplification seen from the
store); for objmount peers also `objmountctl stats MNT --json`:
reads.get_bytes / size (objmount's own count of the bytes its GETs asked
for) and memory.read_buffer_peak_bytes (the peak of its read buffers).

Peers:
  objmount           its defaults (plus --objmount-opts)
  objmount-training  -o profile=training (data cache on, auto)
  s3fs, rclone       bench.py's settings (no disk cache; rclone
                     --vfs-cache-mode off)
A peer that is not installed / not built is skipped (as files.py).

The readers' MD5 check costs CPU (about 400-700 MiB/s per core): on a machine
with few cores it can cap the loopback figures of every peer alike; the limit
row does not hash.

Prints a Markdown table (MiB/s per phase and number of readers, with the
ratios objmount/s3fs and objmount/rclone) and a second one with the GET
amplification and objmount's read-buffer peak; --out writes JSON. Everything
started (server, proxy, mounts, readers) is stopped on exit, errors, Ctrl-C
and SIGTERM/SIGHUP. Must run as root (FUSE mounts, drop_caches).
"""

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as benchmod  # noqa: E402
import cases as casemod  # noqa: E402
import peers as peermod  # noqa: E402

BUCKET = peermod.BUCKET
MiB = 1 << 20
BIG_KEY = "big.bin"
PEERS = ["objmount", "objmount-training", "s3fs", "rclone"]
PHASES = {
    "loopback": {"first_byte_ms": 10},
    # 64 MiB/s per response (= per connection): 1000/64 ms per MiB; the proxy
    # takes Number(per_mib_ms), a float is fine
    "s3-like": {"first_byte_ms": 20, "per_mib_ms": 1000 / 64},
    # the same scaled to a 2-core machine's ~300 MiB/s: 16 MiB/s per connection
    "s3-scaled": {"first_byte_ms": 20, "per_mib_ms": 1000 / 16},
}
log = benchmod.log

# One reader: says "ready", waits for a line on stdin (the start signal), then
# reads its blocks with 1 MiB read()s; a thread hashes the previous block
# while the next one is read (hashlib releases the GIL).
WORKER = r"""
import hashlib, json, os, queue, sys, threading, time
spec = json.load(open(sys.argv[1]))
path, first, want, size = spec["path"], spec["first_block"], spec["md5"], spec["size"]
B = 1 << 20
free = queue.Queue()
for _ in range(4):
    free.put(bytearray(B))
full = queue.Queue()
bad = []

def hasher():
    while True:
        item = full.get()
        if item is None:
            return
        i, buf, n, blen = item
        if n != blen or hashlib.md5(memoryview(buf)[:n]).hexdigest() != want[i]:
            bad.append(first + i)
        free.put(buf)

th = threading.Thread(target=hasher, daemon=True)
th.start()
print("ready", flush=True)
sys.stdin.readline()
t0 = time.monotonic()
nbytes = 0
read_s = 0.0
fd = os.open(path, os.O_RDONLY)
try:
    os.lseek(fd, first * B, os.SEEK_SET)
    for i in range(len(want)):
        blen = min(B, size - (first + i) * B)
        buf = free.get()
        mv = memoryview(buf)
        n = 0
        while n < blen:
            r0 = time.monotonic()
            got = os.readv(fd, [mv[n:blen]])
            read_s += time.monotonic() - r0
            if got == 0:
                break
            n += got
        nbytes += n
        full.put((i, buf, n, blen))
finally:
    os.close(fd)
    full.put(None)
th.join()
print(json.dumps({"end": time.monotonic(), "seconds": time.monotonic() - t0, "bytes": nbytes,
                  "read_s": read_s, "bad": bad}), flush=True)
"""


class DataMismatch(RuntimeError):
    """What a mount returned differs from what was seeded."""


# -- data ----------------------------------------------------------------------------
def seed_big(srv, args, work):
    """Seed big.bin (bench.py's seeding, straight to the server); returns the
    MD5 of each of its 1 MiB blocks, read back from the server."""
    size = args.size_mib * MiB
    ds = casemod.Dataset("big", "", 1, size, size, lambda i: BIG_KEY)
    ds.plan(args.seed)
    dsets = {"big": ds}
    benchmod.seed(srv, dsets, args.seed, work)
    body = srv.client().get_object(Bucket=BUCKET, Key=BIG_KEY)["Body"]
    blocks, total, whole = [], 0, hashlib.md5()
    buf = b""
    for chunk in iter(lambda: body.read(MiB), b""):
        buf += chunk
        while len(buf) >= MiB:
            blocks.append(hashlib.md5(buf[:MiB]).hexdigest())
            whole.update(buf[:MiB])
            total += MiB
            buf = buf[MiB:]
    if buf:
        blocks.append(hashlib.md5(buf).hexdigest())
        whole.update(buf)
        total += len(buf)
    if total != size:
        raise RuntimeError("seeding: big.bin has %d bytes, %d planned" % (total, size))
    return dsets, blocks, whole.hexdigest()


def shares(nblocks, readers):
    """[(first block, block count)] of each reader: contiguous 1/N shares."""
    return [(k * nblocks // readers, (k + 1) * nblocks // readers - k * nblocks // readers)
            for k in range(readers)]


def start_proxy(srv, tries=5):
    """bench.py's proxy with its HEAD-stall check, tried again on a loaded
    machine (as epochs.py)."""
    for i in range(tries):
        try:
            return benchmod.start_proxy(srv)[0]
        except RuntimeError as e:
            if i == tries - 1:
                raise
            log("  %s (load %.1f): starting it again" % (e, os.getloadavg()[0]))
            time.sleep(2)


# -- readers --------------------------------------------------------------------------
def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def run_readers(path, blocks, size, readers, timeout, work):
    """N reader processes over their shares of path, started together:
    MiB/s of the object by the slowest reader."""
    procs = []
    try:
        for k, (first, count) in enumerate(shares(len(blocks), readers)):
            spec = os.path.join(work, "reader-%d.json" % k)
            with open(spec, "w") as f:
                json.dump({"path": path, "first_block": first, "size": size,
                           "md5": blocks[first:first + count]}, f)
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER, spec],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for p in procs:  # every reader up, its hashing thread started
            if p.stdout.readline().strip() != "ready":
                raise casemod.CaseError("a reader did not start: %s" % p.stderr.read()[-300:])
        t0 = time.monotonic()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        deadline = t0 + timeout
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise casemod.CaseTimeout("the readers took more than %.0f s" % timeout)
            if p.returncode != 0:
                raise casemod.CaseError("a reader failed (exit %d): %s"
                                        % (p.returncode, err.strip()[-300:]))
            outs.append(json.loads(out))
    finally:
        kill_all(procs)
    bad = sorted(sum((o["bad"] for o in outs), []))
    if bad:
        raise DataMismatch("%d of %d blocks of 1 MiB differ from big.bin's, first block %d"
                           % (len(bad), len(blocks), bad[0]))
    got = sum(o["bytes"] for o in outs)
    if got != size:
        raise DataMismatch("the readers got %d bytes of %d" % (got, size))
    wall = max(o["end"] for o in outs) - t0
    return {"seconds": round(wall, 3), "mib_s": round(size / MiB / wall, 1),
            "reader_seconds": [round(o["seconds"], 3) for o in outs],
            "reader_read_seconds": [round(o["read_s"], 3) for o in outs]}


def limit(srv, fp, blocks, size, readers, timeout):
    """N curl processes, each one ranged GET of its share through the proxy."""
    url = "%s/%s/%s" % (fp.endpoint, BUCKET, BIG_KEY)
    if peermod.refuses_unsigned(srv):
        url = peermod.presigner(srv)(url)
    parts = []
    for first, count in shares(len(blocks), readers):
        lo, hi = first * MiB, min(size, (first + count) * MiB) - 1
        parts.append((lo, hi))
    procs = []
    fp.reset_stats()
    t0 = time.monotonic()
    try:
        for lo, hi in parts:
            procs.append(subprocess.Popen(
                ["curl", "-sSL", "-o", "/dev/null", "-r", "%d-%d" % (lo, hi),
                 "-w", "%{http_code} %{size_download}", url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, t0 + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise casemod.CaseTimeout("curl took more than %.0f s" % timeout)
            outs.append((p.returncode, out.split(), err.strip()))
        wall = time.monotonic() - t0
    finally:
        kill_all(procs)
    for (lo, hi), (rc, out, err) in zip(parts, outs):
        if rc != 0 or len(out) != 2 or out[0] != "206" or int(out[1]) != hi - lo + 1:
            raise casemod.CaseError("curl of bytes %d-%d: exit %d, %s %s"
                                    % (lo, hi, rc, " ".join(out), err[-200:]))
    st = fp.stats()
    return {"seconds": round(wall, 3), "mib_s": round(size / MiB / wall, 1),
            "gets": st["requests"]["by_kind"].get("GetObject", 0),
            "proxy_amplification": round(st["bytes"]["to_clients"] / size, 3)}


# -- peers ----------------------------------------------------------------------------
def make_peer(name, args):
    if name.startswith("objmount"):
        p = peermod.Objmount(args.objmount, args.objmountctl)
        p.extra = (["profile=training"] if name == "objmount-training" else []) \
            + [o for o in args.objmount_opts.split(",") if o]
    elif name == "s3fs":
        p = peermod.S3fs()
        p.extra = [o for o in args.s3fs_opts.split(",") if o]
    else:
        p = peermod.Rclone()
        p.extra = args.rclone_flags.split()
    p.name = name
    return p


def objmount_stats(p, mnt):
    """{get_amplification, gets, read_buffer_peak_bytes, ...} from
    `objmountctl stats MNT --json`, {} when it cannot be had."""
    if not getattr(p, "ctl", None):
        return {}
    try:
        out = subprocess.run([p.ctl, "stats", mnt, "--json"], capture_output=True, text=True,
                             timeout=20)
        st = json.loads(out.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        log("  objmountctl stats --json: %s" % e)
        return {}
    st = st[0] if isinstance(st, list) else st
    rd, mem = st.get("reads") or {}, st.get("memory") or {}
    return {"om_get_bytes": rd.get("get_bytes"), "om_gets": rd.get("gets"),
            "om_prefetch_gets": rd.get("prefetch_gets"), "om_hits": rd.get("hits"),
            "om_memory_waits": rd.get("memory_waits"), "om_evictions": rd.get("evictions"),
            "read_buffer_peak_bytes": mem.get("read_buffer_peak_bytes"),
            "read_buffer_limit_bytes": mem.get("read_buffer_limit_bytes")}


@contextlib.contextmanager
def fresh_mount(p, pw, fp):
    """Mount peer p on a new directory (and, where it has one, an empty cache
    directory: nothing read before); yields (mount, mount point, run
    directory) and unmounts on the way out."""
    run_dir = tempfile.mkdtemp(dir=pw)
    if hasattr(p, "cache_dir"):
        p.cache_dir = os.path.join(run_dir, "cache")
        os.makedirs(p.cache_dir)
    mnt = os.path.join(run_dir, "mnt")
    m = p.mount(fp.endpoint, mnt, run_dir, os.path.join(pw, "daemon.log"), timeout=60)
    try:
        yield m, mnt, run_dir
    finally:
        problems = peermod.unmount(m, timeout=30)
        if problems:
            log("  %s unmount: %s" % (p.name, "; ".join(problems)))
        p.after_unmount()


def run_on(m, fn):
    """fn() against mount m: a run that times out kills the mount; a daemon
    that died during the run fails it."""
    try:
        row = fn()
    except casemod.CaseTimeout:
        peermod.kill_mount(m)
        raise
    if m.proc.poll() is not None:
        raise casemod.CaseError("the daemon exited with %s" % m.proc.returncode)
    return row


def one_run(p, pw, fp, ctx, blocks, size, readers, args):
    with fresh_mount(p, pw, fp) as (m, mnt, run_dir):
        path = os.path.join(mnt, BIG_KEY)
        st = os.stat(path)  # the lookup, before the clock
        if st.st_size != size:
            raise DataMismatch("big.bin is %d bytes in the mount, %d seeded" % (st.st_size, size))
        ctx.drop_caches()
        ctx.warm("big")
        fp.reset_stats()
        row = run_on(m, lambda: run_readers(path, blocks, size, readers, args.timeout, run_dir))
        pst = fp.stats()
        row["gets"] = pst["requests"]["by_kind"].get("GetObject", 0)
        row["proxy_amplification"] = round(pst["bytes"]["to_clients"] / size, 3)
        if p.name.startswith("objmount"):
            om = objmount_stats(p, mnt)
            row.update(om)
            if om.get("om_get_bytes") is not None:
                row["get_amplification"] = round(om["om_get_bytes"] / size, 3)
        return row


def prepare_peers(args, work, fp, results):
    """{name: (peer, its work directory)} of the peers that are installed;
    the others are recorded as skipped."""
    peers = {}
    for name in args.peers:
        p = make_peer(name, args)
        why = p.available()
        if why:
            log("%s: skipped (%s)" % (name, why))
            results["skipped"][name] = why
            continue
        pw = os.path.join(work, name)
        os.makedirs(pw)
        p.prepare(fp.endpoint, pw)
        peers[name] = (p, pw)
        results["peers"][name] = {"version": p.version(), "settings": p.settings()}
    return peers


def try_run(row, name, fn):
    """row.update(fn()); a failed run is recorded in row (a DATA MISMATCH
    marked so) and logged. True when the run succeeded."""
    try:
        row.update(fn())
        return True
    except DataMismatch as e:
        row["error"] = "DATA MISMATCH: %s" % e
    except (peermod.MountError, casemod.CaseError, casemod.CaseTimeout,
            subprocess.SubprocessError, OSError, ValueError) as e:
        row["error"] = str(e)[:300]
    log("%s: %s" % (name, row["error"]))
    return False


def rotated(names, k):
    """names rotated left by k (mod their number)."""
    if not names:
        return []
    k %= len(names)
    return names[k:] + names[:k]


def measure(args, work, results):
    srv = peermod.start_server(args.server, work)
    results["meta"]["server"] = srv.kind
    fp = None
    try:
        fp = start_proxy(srv)
        t0 = time.monotonic()
        dsets, blocks, md5 = seed_big(srv, args, work)
        size = args.size_mib * MiB
        results["meta"].update(big_md5=md5, seed_s=round(time.monotonic() - t0, 1))
        ctx = benchmod.Context(work, srv, dsets, drop=True)
        peers = prepare_peers(args, work, fp, results)
        row_index = 0
        for phase in args.phases:
            fp.set_faults(latency=dict(PHASES[phase]))
            for n in args.readers:
                row = {"phase": phase, "readers": n, "peer": "limit"}
                results["runs"].append(row)
                ctx.drop_caches()
                ctx.warm("big")
                try:
                    row.update(limit(srv, fp, blocks, size, n, args.timeout))
                    log("%-8s %d readers  %-17s %8.1f MiB/s" % (phase, n, "limit", row["mib_s"]))
                except (casemod.CaseError, casemod.CaseTimeout, OSError) as e:
                    row["error"] = str(e)[:300]
                    log("%s %d limit: %s" % (phase, n, row["error"]))
                order = rotated(list(peers), row_index)
                row_index += 1
                for name in order:
                    p, pw = peers[name]
                    row = {"phase": phase, "readers": n, "peer": name}
                    results["runs"].append(row)
                    if not try_run(row, name, lambda: one_run(p, pw, fp, ctx, blocks, size,
                                                              n, args)):
                        continue
                    extra = ""
                    if row.get("get_amplification") is not None:
                        extra = "  GET bytes %.2fx, read buffers peak %.0f MiB" % (
                            row["get_amplification"], (row["read_buffer_peak_bytes"] or 0) / MiB)
                    log("%-8s %d readers  %-17s %8.1f MiB/s  %4d GETs, %.2fx from the proxy%s"
                        % (phase, n, name, row["mib_s"], row["gets"],
                           row["proxy_amplification"], extra))
    finally:
        if fp is not None:
            fp.stop()
        srv.stop()


# -- report ---------------------------------------------------------------------------
def cell(row, key="mib_s", spec="%.0f"):
    if row is None:
        return "-"
    if row.get("error"):
        return "**MISMATCH**" if "MISMATCH" in row["error"] else "error"
    v = row.get(key)
    return "-" if v is None else spec % v


def ratio(a, b):
    if not a or not b or a.get("error") or b.get("error") or not b.get("mib_s"):
        return "-"
    return "%.2fx" % (a["mib_s"] / b["mib_s"])


def markdown(results):
    runs, meta = results["runs"], results["meta"]
    peers = [p for p in PEERS if p in results["peers"]]
    cols = peers + ["limit"]
    ratios = [b for b in ("s3fs", "rclone") if "objmount" in peers and b in peers]
    keys = []
    for r in runs:
        if (r["phase"], r["readers"]) not in keys:
            keys.append((r["phase"], r["readers"]))

    def find(k, peer):
        return next((r for r in runs if (r["phase"], r["readers"]) == k and r["peer"] == peer),
                    None)

    lines = ["big.bin %d MiB, readers read 1 MiB blocks of their own 1/N share; MiB/s of the "
             "object by the slowest reader. loopback: 10 ms to the first byte; s3-like: 20 ms "
             "and 64 MiB/s per connection; s3-scaled: 20 ms and 16 MiB/s per connection. "
             "%s (%s)" % (meta["size_mib"], meta["date"], meta["commit"]), "",
             "| phase | readers | " + " | ".join(cols)
             + "".join(" | objmount/%s" % b for b in ratios) + " |",
             "|---|---|" + "---|" * (len(cols) + len(ratios))]
    for k in keys:
        cells = [cell(find(k, c)) for c in cols]
        cells += [ratio(find(k, "objmount"), find(k, b)) for b in ratios]
        lines.append("| %s | %d | %s |" % (k[0], k[1], " | ".join(cells)))
    lines += ["", "| phase | readers | peer | GETs | bytes from the proxy / size "
              "| objmount get_bytes / size | read buffers peak |", "|---|---|---|---|---|---|---|"]
    for k in keys:
        for c in cols:
            r = find(k, c)
            if r is None or r.get("error"):
                continue
            peak = r.get("read_buffer_peak_bytes")
            lines.append("| %s | %d | %s | %s | %s | %s | %s |" % (
                k[0], k[1], c, cell(r, "gets", "%d"), cell(r, "proxy_amplification", "%.2fx"),
                cell(r, "get_amplification", "%.2fx"),
                "-" if peak is None else "%.0f MiB" % (peak / MiB)))
    errors = ["%s %d readers %s: %s" % (r["phase"], r["readers"], r["peer"], r["error"])
              for r in runs if r.get("error")]
    skipped = ["%s: skipped (%s)" % kv for kv in results["skipped"].items()]
    if errors or skipped:
        lines += [""] + ["- " + e for e in skipped + errors]
    return "\n".join(lines) + "\n"


# -- main -----------------------------------------------------------------------------
def csv_list(text, allowed=None):
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names or (allowed and any(x not in allowed for x in names)):
        raise argparse.ArgumentTypeError("%r: choose from %s" % (text, ", ".join(allowed or [])))
    return names


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="big.bin of 128 MiB")
    ap.add_argument("--size-mib", type=int, default=None, help="size of big.bin (default 512)")
    ap.add_argument("--readers", default="1,2,4", help="numbers of reader processes")
    ap.add_argument("--peers", type=lambda s: csv_list(s, PEERS), default=list(PEERS),
                    help="comma-separated: %s (default all)" % ", ".join(PEERS))
    ap.add_argument("--phases", type=lambda s: csv_list(s, list(PHASES)), default=list(PHASES),
                    help="comma-separated: %s (default both)" % ", ".join(PHASES))
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="s one run's readers may take before the mount is killed")
    ap.add_argument("--seed", default="objmount-shared", help="seed of the data")
    ap.add_argument("--out", help="write the results as JSON to this file")
    peermod.add_server_arg(ap)
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    if args.size_mib is None:
        args.size_mib = 128 if args.quick else 512
    try:
        args.readers = [int(x) for x in args.readers.split(",") if x]
    except ValueError:
        ap.error("--readers: a comma-separated list of numbers")
    if args.size_mib < 1 or not args.readers or min(args.readers) < 1:
        ap.error("--size-mib and --readers must be at least 1")
    if max(args.readers) > args.size_mib:
        ap.error("more readers than 1 MiB blocks")
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, "the mounts and drop_caches")
    results = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "commit": benchmod.git_commit(), "size_mib": args.size_mib,
                        "readers": args.readers, "phases": {p: PHASES[p] for p in args.phases},
                        "command": " ".join(["/usr/bin/python3"] + sys.argv),
                        "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
               "peers": {}, "skipped": {}, "runs": []}
    work = tempfile.mkdtemp(prefix="objmount-shared-bench-")
    interrupted = False
    t0 = time.monotonic()
    try:
        measure(args, work, results)
    except (KeyboardInterrupt, peermod.Interrupted) as e:
        interrupted = True
        log("interrupted (%s): cleaning up" % (str(e) or "Ctrl-C"))
    finally:
        peermod.hold_signals()
        peermod.unmount_all(log)
        peermod.remove_work(work, args.keep_work, log)
    results["meta"].update(duration_s=round(time.monotonic() - t0, 1),
                           loadavg_after=os.getloadavg(), interrupted=interrupted)
    md = markdown(results)
    print(md)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(dict(results, markdown=md), f, indent=1, default=str)
    if interrupted:
        return 130
    if any("MISMATCH" in r.get("error", "") for r in results["runs"]):
        log("DATA MISMATCH: a mount returned bytes that differ from big.bin")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
