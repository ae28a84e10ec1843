#!/usr/bin/python3
"""objmount against the loader libraries users pick instead of a mount (issue
35), and on AIStore against its own SDK and aisloader (issue 34).

    tools/bench/setup_peers.sh            # once: the libraries' cached venv
    /usr/bin/python3 tools/bench/loaders.py [--server versitygw|aistore]
        [--quick] [--phases lat0,lat20,s3like] [--clients LIST] [--datasets LIST]
        [--workers 4] [--npz-scale F] [--h5-mib M] [--out results.json]

One server of tests/harness (versitygw, or an AIStore cluster of 1 proxy and
2 targets whose S3 API answers with 307 redirects) behind the fault proxy
(tools/faultproxy, --hop-redirects for AIStore so that its targets get the
latency too), seeded once with boto3 straight to the server:

  images  2,000 files of 80-140 KB (mean ~110 KB, ResNet-50-like), read once
          each, shuffled, batches of 32
  npz     16 npz files of 32-140 MiB (3D U-Net-like; --npz-scale shrinks
          them), each np.load()ed whole
  h5      one 512 MiB HDF5 file (dataset "x", contiguous), 256 windows of
          1 MiB at random offsets read through h5py
  big     the same 512 MiB object read whole, sequentially

Phases (the fault proxy's latency mode on every request):
  lat0    no added latency
  lat20   20 ms before the first byte of every response
  s3like  20 ms and each response paced to 64 MiB/s (per connection, as one
          S3 connection gives; tools/bench/shared.py's s3-like phase)

Clients, every one with the same --workers (DataLoader worker processes, or
the library's own concurrency where it recommends num_workers=0: s3dlio):
  objmount         objmount (defaults, -o ro) + plain torch DataLoader over files
  objmount-cached  objmount -o ro,profile=training: an unmeasured first epoch
                   fills its data cache, the page cache is dropped, epoch 2 measured
  s3torch          s3torchconnector 1.5.0 (S3MapDataset; range-based S3Reader under h5py)
  s3dlio           s3dlio 0.10.0 (ObjectStoreIterableDataset; get_range under h5py)
  dali-s3          DALI 2.4.0 fn.readers.file over s3:// (CPU pipeline)
  dali-mount       the same over objmount's mount
  local            plain DataLoader over the files on local disk (the floor)
  s3fs, rclone     the mount peers (tools/bench/peers.py settings, read-only)
                   + the same DataLoader over files
  and on AIStore (--server aistore):
  objmount-ais     objmount over ais://bench (AIStore's native API)
  ais-map          AIStore SDK 2.0.0 AISMapDataset in a DataLoader
  ais-get          AIStore SDK plain object gets from --workers threads
  aisloader        aisloader v1.5.0 (-pctput 0 -epochs 1 -numworkers W; the big
                   object: -filelist naming it twice, as its epochs need two
                   objects, and -numworkers 1: two whole GETs one after the
                   other), its own GET count, bytes and run duration

Every row starts cold: a fresh mount with an empty cache directory, the page
cache dropped (echo 3 > drop_caches). The order of the clients rotates from
phase to phase. Each client runs as its own process (loader_clients.py in
the peers venv, with Debian's torch for all): the epoch's seconds and CPU
are counted from after its imports and less its set-up (a dataset's
listing, a DALI pipeline's build); its CPU covers the process and the
DataLoader workers it reaped; peak RSS from wait4() (the largest process of
the client's tree). For objmount rows the daemon's CPU during the row
(/proc/PID/stat) is added into CPU-s/GiB and its peak RSS shown apart. A
row that delivers other samples or bytes than were stored (npz: the arrays'
bytes) is an error ("wrong data"), as is a library that fails; neither
stops the run. The objmount rows also record objmountctl stats (requests,
redirects, connections).

--write-check (once per run, before the phases, without added latency): each
mount (objmount, objmount-ais on AIStore, s3fs, rclone; their write
settings) takes a 40 MiB file by cp, straight to the server and through
the fault proxy (which relays AIStore's 307s through its own ports); the
object is looked for up to 30 s after cp returned (rclone uploads after
close), the mount is unmounted and the object read back with boto3
straight from the server: "stored and equal", "stored, other bytes", or
what failed (cp's error, the object missing). The question it answers on
AIStore: whose writes get through the proxy's 307s, and whose close()
says so when they do not.

Must run as root (FUSE mounts, drop_caches). Everything started is stopped
on exit, errors, Ctrl-C and SIGTERM.
"""

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers as peermod  # noqa: E402  (puts tests/ on sys.path)
from harness import servers  # noqa: E402
from harness.faultproxy import FaultProxy  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
BUCKET = peermod.BUCKET
REGION = "us-east-1"
AISLOADER = os.path.expanduser("~/.cache/objmount/go/aisloader-v1.5.0/aisloader")
CLIENT_PY = os.path.join(HERE, "loader_clients.py")
PHASES = {
    "lat0": None,
    "lat20": {"first_byte_ms": 20},
    "s3like": {"first_byte_ms": 20, "per_mib_ms": 1000 / 64},
}
S3_CLIENTS = ["objmount", "objmount-cached", "s3torch", "s3dlio", "dali-s3", "dali-mount",
              "local"]
AIS_CLIENTS = ["objmount-ais", "ais-map", "ais-get", "aisloader"]
MOUNT_PEERS = {"s3fs": peermod.S3fs, "rclone": peermod.Rclone}
DATASETS = ["images", "npz", "h5", "big"]


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# -- data -------------------------------------------------------------------------
def make_data(local, args):
    """Write the datasets under local/ (the local-disk row reads them there);
    returns the layout: names per dataset, the h5 key, size, offset, windows."""
    import h5py
    import numpy as np

    rnd = random.Random(args.seed)
    lay = {"images": [], "npz": [], "h5_key": "h5/data.h5"}
    os.makedirs(os.path.join(local, "images"), exist_ok=True)
    for i in range(args.images):
        name = "img_%05d.jpg" % i
        size = rnd.randint(80_000, 140_000)
        with open(os.path.join(local, "images", name), "wb") as f:
            f.write(os.urandom(size))
        lay["images"].append(name)
    os.makedirs(os.path.join(local, "npz"), exist_ok=True)
    n = args.npz_files if "npz" in args.datasets else 0
    for i in range(n):
        mib = 32 + (140 - 32) * i / max(1, n - 1)
        nbytes = int(mib * MiB * args.npz_scale)
        name = "vol_%02d.npz" % i
        arr = np.frombuffer(os.urandom(nbytes), dtype=np.uint8)
        np.savez(os.path.join(local, "npz", name), x=arr)
        lay["npz"].append(name)
        npz_arrays = lay.get("npz_arrays", 0) + nbytes
        lay["npz_arrays"] = npz_arrays
    os.makedirs(os.path.join(local, "h5"), exist_ok=True)
    h5path = os.path.join(local, lay["h5_key"])
    total = args.h5_mib * MiB
    with h5py.File(h5path, "w") as h:
        d = h.create_dataset("x", shape=(total,), dtype="u1")  # contiguous
        for off in range(0, total, 64 * MiB):
            m = min(64 * MiB, total - off)
            d[off:off + m] = np.frombuffer(os.urandom(m), dtype=np.uint8)
        lay["h5_offset"] = d.id.get_offset()
    lay["h5_size"] = os.path.getsize(h5path)
    win = args.window_mib * MiB
    lay["windows"] = [[rnd.randrange(0, total - win), win] for _ in range(args.windows)]
    lay["bytes"] = {
        "images": sum(os.path.getsize(os.path.join(local, "images", x)) for x in lay["images"]),
        "npz": sum(os.path.getsize(os.path.join(local, "npz", x)) for x in lay["npz"]),
        "h5": args.windows * win,
        "big": lay["h5_size"],
    }
    # what a client must deliver: samples and bytes (npz: the arrays' bytes)
    lay["expect"] = {"images": (len(lay["images"]), lay["bytes"]["images"]),
                     "npz": (len(lay["npz"]), lay.get("npz_arrays", 0)),
                     "h5": (args.windows, lay["bytes"]["h5"]), "big": (1, lay["h5_size"])}
    return lay


def upload(srv, local, lay):
    from concurrent.futures import ThreadPoolExecutor
    from boto3.s3.transfer import TransferConfig

    cli = srv.client()
    cfg = TransferConfig(multipart_threshold=64 * MiB, multipart_chunksize=64 * MiB)
    keys = (["images/" + x for x in lay["images"]] + ["npz/" + x for x in lay["npz"]]
            + [lay["h5_key"]])

    def put(k):
        cli.upload_file(os.path.join(local, k), BUCKET, k, Config=cfg)
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(put, keys))
    for k in ["npz/" + x for x in lay["npz"][:1]] + [lay["h5_key"]]:
        got = cli.head_object(Bucket=BUCKET, Key=k)["ContentLength"]
        if got != os.path.getsize(os.path.join(local, k)):
            raise RuntimeError("seeding: %s stored with %d bytes" % (k, got))


# -- measuring ---------------------------------------------------------------------
def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run_measured(argv, env, timeout, work):
    """Run argv (killed after timeout s); returns (stdout, stderr, wall s, exit
    status, CPU s, peak RSS KiB). wait4() gives the CPU of the process and of
    the children it reaped (DataLoader workers, threads) and the largest
    peak RSS among them."""
    import threading

    t0 = time.monotonic()
    outp, errp = os.path.join(work, "client.out"), os.path.join(work, "client.err")
    with open(outp, "wb") as o, open(errp, "wb") as e:
        p = subprocess.Popen(argv, stdout=o, stderr=e, env=env, start_new_session=True)
    timer = threading.Timer(timeout, lambda: os.killpg(p.pid, 9))
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(OSError):
        os.killpg(p.pid, 9)  # nothing of the row outlives it
    with open(outp, errors="replace") as o, open(errp, errors="replace") as e:
        out, err = o.read(), e.read()
    return (out, err, time.monotonic() - t0, p.returncode, ru.ru_utime + ru.ru_stime,
            ru.ru_maxrss)


class Mounted(peermod.Objmount):
    """objmount on source (bucket or ais://bucket) with opts."""

    def __init__(self, source, opts, **kw):
        super().__init__(**kw)
        self.source, self.extra = source, opts

    def command(self, endpoint, mountpoint, work, write=False):
        argv, env = super().command(endpoint, mountpoint, work, write)
        argv[1] = self.source
        return argv, env


def ctl_stats(ctl, mnt):
    try:
        p = subprocess.run([ctl, "stats", mnt, "--json"], capture_output=True, text=True,
                           timeout=10)
        return json.loads(p.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}


def http_counts(st):
    """(requests, redirects, connections) from objmountctl stats --json."""
    def find(d, key):
        if isinstance(d, dict):
            if key in d and not isinstance(d[key], (dict, list)):
                return d[key]
            for v in d.values():
                r = find(v, key)
                if r is not None:
                    return r
        return None
    req = st.get("requests", {}) if isinstance(st, dict) else {}
    total = req.get("total") if isinstance(req, dict) else None
    return (total if total is not None else find(st, "total"), find(st, "redirects"),
            find(st, "connections_opened"))


# -- the bench ------------------------------------------------------------------------
class Bench:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.venv_py = subprocess.run([os.path.join(HERE, "setup_peers.sh"), "--check"],
                                      capture_output=True, text=True).stdout.strip()
        self.local = os.path.join(work, "local")
        self.writes = []

    def env(self, ep):
        env = peermod.clean_env()
        env.update({"AWS_ACCESS_KEY_ID": servers.access_key(),
                    "AWS_SECRET_ACCESS_KEY": servers.secret_key(),
                    "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                    "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": ep,
                    "S3_ENDPOINT": ep, "S3DLIO_FOLLOW_REDIRECTS": "1",
                    "AIS_ENDPOINT": self.native_ep, "PYTHONWARNINGS": "ignore"})
        return env

    def spec(self, client, dataset, root, endpoint):
        lay, a = self.lay, self.args
        s = {"client": client, "dataset": dataset, "workers": a.workers, "seed": a.seed,
             "root": root, "endpoint": endpoint, "region": REGION, "bucket": BUCKET,
             "key": lay["h5_key"], "size": lay["h5_size"], "windows": lay["windows"],
             "h5_offset": lay["h5_offset"]}
        if dataset in ("images", "npz"):
            s["names"] = lay[dataset]
            s["prefix"] = dataset + "/"
            if root.startswith("s3://"):
                s["root"] = root + dataset + "/"
            else:
                s["root"] = os.path.join(root, dataset)
        elif root.startswith("s3://"):
            s["root"] = root
        return s

    def run_client(self, spec, ep):
        path = os.path.join(self.work, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out, err, wall, rc, cpu, rss = run_measured([self.venv_py, CLIENT_PY, path],
                                                    self.env(ep), self.args.timeout, self.work)
        res = {"cpu_s": cpu, "rss_kib": rss, "wall": wall}
        try:
            res.update(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            res["error"] = "exit %s: %s" % (rc, (err or out).strip()[-400:])
        return res

    def aisloader(self, dataset):
        a = self.args
        if dataset not in ("images", "big"):
            return {"error": "n/a: aisloader reads whole objects (no npz decode, no h5py)"}
        port = self.native_ep.rsplit(":", 1)[1]
        argv = [AISLOADER, "-ip=127.0.0.1", "-port=" + port, "-bucket=ais://" + BUCKET,
                "-pctput=0", "-epochs=1", "-duration=0", "-numworkers=%d" % a.workers,
                "-cleanup=false", "-quiet", "-statsinterval=0", "-seed=%d" % a.seed,
                "-subdir=images/"]
        if dataset == "big":
            # its epochs need two objects at least: the one object twice
            lst = os.path.join(self.work, "aisloader.list")
            with open(lst, "w") as f:
                f.write((self.lay["h5_key"] + "\n") * 2)
            # (with -pctmpdstream=100 it printed no GET line: plain GETs)
            argv = argv[:-1] + ["-filelist=" + lst, "-numworkers=1"]
        out, err, wall, rc, cpu, rss = run_measured(argv, peermod.clean_env(), a.timeout,
                                                    self.work)
        res = {"cpu_s": cpu, "rss_kib": rss, "seconds": wall, "wall": wall,
               "samples": len(self.lay["images"]) if dataset == "images" else 1,
               "bytes": self.lay["bytes"][dataset], "bytes_assumed": True}
        if rc != 0:
            res["error"] = "exit %s: %s" % (rc, (err or out).strip()[-400:])
        res["output_tail"] = (out + err)[-1500:]
        res["own_count"] = True
        # its own figures: the GET count and bytes of its last stats line and
        # the run's duration (after its listing, as the libraries' epochs)
        import re
        gets = re.findall(r"GET\s+(\d+)\s+([\d.]+)([KMGT]i?B|B)\s", out)
        dur = re.search(r"Actual run duration: ([\d.]+)(ms|s|m)", out)
        if gets and dur:
            count, num, unit = gets[-1]
            mult = {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": GiB, "TiB": 1 << 40}
            res["samples"] = int(count)
            res["bytes"] = int(float(num) * mult.get(unit, 1))
            res["seconds"] = float(dur.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[dur.group(2)]
            res["setup_seconds"] = wall - res["seconds"]
        return res

    @contextlib.contextmanager
    def mounted(self, peer, ep, name, write=False):
        """peer mounted on a new directory of the work directory; at the end
        unmounted, its caches emptied (after_unmount) and the directory gone."""
        mnt = tempfile.mkdtemp(prefix="mnt-%s-" % name, dir=self.work)
        m = peer.mount(ep, mnt, self.work, os.path.join(self.work, name + ".log"), write=write)
        try:
            yield m
        finally:
            problems = peermod.unmount(m)
            if problems:
                log("unmount %s: %s" % (mnt, "; ".join(problems)))
            peer.after_unmount(write=write)
            with contextlib.suppress(OSError):
                os.rmdir(mnt)

    def mount(self, source, ep, opts):
        """objmount on source (a bucket or ais://bucket) with opts."""
        peer = Mounted(source, opts, binary=self.objmount_bin, ctl=self.ctl_bin)
        peer.cache_dir = tempfile.mkdtemp(prefix="cache-", dir=self.work)
        return self.mounted(peer, ep, "objmount")

    def peer_mount(self, client, write=False, ep=None):
        """s3fs-fuse or rclone on the bucket (through the fault proxy
        unless ep is given)."""
        peer = MOUNT_PEERS[client]()
        ep = ep or self.s3_ep
        peer.prepare(ep, self.work)
        return self.mounted(peer, ep, client, write=write)

    def write_check(self, srv, clients, routes):
        """Whose writes get through: a 40 MiB file by cp through each mount,
        on each route (name, S3 endpoint, native endpoint); the object
        looked for up to 30 s after cp returned (rclone uploads after
        close), then read back with boto3 after the unmount."""
        import hashlib
        src = os.path.join(self.work, "write-check.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(40 * MiB))
        with open(src, "rb") as f:
            want = hashlib.md5(f.read()).hexdigest()
        cli = srv.client()
        results = []
        for route, s3_ep, native_ep in routes:
            for client in clients:
                key = "written-by-%s-%s.bin" % (client, route.replace(" ", "-"))
                results.append(self.write_one(cli, src, want, client, key, route, s3_ep,
                                              native_ep))
        return results

    def write_one(self, cli, src, want, client, key, route, s3_ep, native_ep):
        import hashlib
        res = {"client": client, "route": route, "key": key}
        log_tail = ""
        try:
            if client in MOUNT_PEERS:
                cm = self.peer_mount(client, write=True, ep=s3_ep)
            elif client == "objmount-ais":
                cm = self.mount("ais://" + BUCKET, native_ep, [])
            else:
                cm = self.mount(BUCKET, s3_ep, [])
            with cm as m:
                t = time.monotonic()
                p = subprocess.run(["cp", src, os.path.join(m.mountpoint, key)],
                                   capture_output=True, text=True, timeout=300)
                res["cp_seconds"] = time.monotonic() - t
                res["cp"] = "ok" if p.returncode == 0 else (p.stderr.strip()[-300:]
                                                            or "exit %d" % p.returncode)
                for _ in range(300):
                    with contextlib.suppress(Exception):
                        cli.head_object(Bucket=BUCKET, Key=key)
                        res["listed_after_s"] = time.monotonic() - t
                        break
                    time.sleep(0.1)
                log_tail = m.log_tail(600) if hasattr(m, "log_tail") else ""
        except (peermod.MountError, subprocess.TimeoutExpired) as e:
            res["cp"] = "mount or cp: %s" % e
        try:
            body = cli.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            res["stored"] = ("stored and equal" if hashlib.md5(body).hexdigest() == want else
                             "stored, other bytes (%d of %d)" % (len(body), 40 * MiB))
        except Exception as e:  # noqa: BLE001 (any client error is the finding)
            res["stored"] = "not stored after 30 s: %s" % str(e)[:200]
        if res["cp"] != "ok" or not res["stored"].startswith("stored and"):
            res["log_tail"] = log_tail
        log("  write  %-12s %-15s cp: %s; %s" % (route, client, res["cp"][:120],
                                                res["stored"][:120]))
        return res

    def row(self, client, dataset):
        """One measured row; returns its result dict."""
        s3 = "s3://%s/" % BUCKET
        drop_caches()
        if client in ("s3torch", "s3dlio", "dali-s3"):
            name = {"dali-s3": "dali"}.get(client, client)
            return self.run_client(self.spec(name, dataset, s3, self.s3_ep), self.s3_ep)
        if client in ("ais-map", "ais-get"):
            return self.run_client(self.spec(client, dataset, s3, self.native_ep), self.s3_ep)
        if client == "aisloader":
            return self.aisloader(dataset)
        if client == "local":
            return self.run_client(self.spec("files", dataset, self.local, ""), self.s3_ep)
        if client in MOUNT_PEERS:
            with self.peer_mount(client) as m:
                cpu0 = peermod.cpu_seconds(m.pid) or 0.0
                res = self.run_client(self.spec("files", dataset, m.mountpoint, self.s3_ep),
                                      self.s3_ep)
                res["daemon_cpu_s"] = (peermod.cpu_seconds(m.pid) or 0.0) - cpu0
                res["daemon_rss_kib"] = peermod.peak_rss_kib(m.pid)
            return res
        source, ep, opts = BUCKET, self.s3_ep, ["ro"]
        if client == "objmount-ais":
            source, ep = "ais://" + BUCKET, self.native_ep
        if client == "objmount-cached":
            opts = ["ro", "profile=training"]
        name = "dali" if client == "dali-mount" else "files"
        with self.mount(source, ep, opts) as m:
            spec = self.spec(name, dataset, m.mountpoint, ep)
            if client == "objmount-cached":
                first = self.run_client(spec, ep)
                if "error" in first:
                    return first
                drop_caches()
            cpu0 = peermod.cpu_seconds(m.pid) or 0.0
            self.fp.reset_stats()
            st0 = ctl_stats(self.ctl_bin, m.mountpoint)
            res = self.run_client(spec, ep)
            st1 = ctl_stats(self.ctl_bin, m.mountpoint)
            res["daemon_cpu_s"] = (peermod.cpu_seconds(m.pid) or 0.0) - cpu0
            res["daemon_rss_kib"] = peermod.peak_rss_kib(m.pid)
            res["ctl_stats"] = {"before": st0, "after": st1}
            c0, c1 = http_counts(st0), http_counts(st1)
            res["http"] = {k: (b - a if a is not None and b is not None else None)
                           for k, a, b in zip(("requests", "redirects", "connections"), c0, c1)}
            with contextlib.suppress(Exception):
                res["proxy_requests"] = self.fp.stats()["requests"]["total"]
            with open(os.path.join(self.work, "stats.jsonl"), "a") as f:
                f.write(json.dumps({"client": client, "dataset": dataset, "stats": st1}) + "\n")
        return res

    def run(self):
        a = self.args
        kind = a.server
        servers.select(kind)
        ais = kind in servers.AISTORE_KINDS
        clients = a.clients or (S3_CLIENTS + (AIS_CLIENTS if ais else []))
        work = self.work
        self.objmount_bin = os.path.join(work, "objmount")
        self.ctl_bin = os.path.join(work, "objmountctl")
        import shutil
        shutil.copy2(os.path.join(peermod.REPO_ROOT, "build", "objmount"), self.objmount_bin)
        shutil.copy2(os.path.join(peermod.REPO_ROOT, "build", "tools", "objmountctl"),
                     self.ctl_bin)
        log("making the datasets in %s" % self.local)
        self.lay = make_data(self.local, a)
        srv = servers.server_class(kind)(buckets=[BUCKET])
        with srv:
            log("%s at %s; uploading" % (kind, srv.endpoint))
            t0 = time.monotonic()
            upload(srv, self.local, self.lay)
            log("uploaded in %.0f s" % (time.monotonic() - t0))
            with FaultProxy(upstream=srv) as fp:
                self.fp = fp
                self.s3_ep = fp.endpoint
                self.native_ep = "http://127.0.0.1:%d" % fp.port
                results = []
                if a.write_check:
                    fp.set_faults(latency=None)
                    writers = ["objmount"] + (["objmount-ais"] if ais else []) + \
                        [c for c in clients if c in MOUNT_PEERS]
                    routes = [("direct", srv.endpoint, getattr(srv, "proxy_url", None)),
                              ("fault proxy", self.s3_ep, self.native_ep)]
                    self.writes = self.write_check(srv, writers, routes)
                    if a.out:
                        self.save(results)
                for pi, phase in enumerate(a.phases):
                    fp.set_faults(latency=PHASES[phase])
                    k = pi % len(clients)
                    order = clients[k:] + clients[:k]
                    log("phase %s: %s" % (phase, ", ".join(order)))
                    for ds in a.datasets:
                        for client in order:
                            t = time.monotonic()
                            try:
                                res = self.row(client, ds)
                            except peermod.MountError as e:
                                res = {"error": "mount: %s" % e}
                            want = self.lay["expect"][ds]
                            if "error" not in res and not res.get("own_count") \
                                    and (res.get("samples"), res.get("bytes")) \
                                    != tuple(want):
                                res["error"] = ("wrong data: %s samples, %s bytes delivered; "
                                                "%d samples, %d bytes stored" % (
                                                    res.get("samples"), res.get("bytes"),
                                                    want[0], want[1]))
                            res.update({"phase": phase, "client": client, "dataset": ds,
                                        "dataset_bytes": self.lay["bytes"][ds]})
                            results.append(res)
                            log("  %-6s %-15s %s (%.0f s)" % (ds, client, brief(res),
                                                              time.monotonic() - t))
                            if a.out:
                                self.save(results)
        return results

    def save(self, results):
        meta = {"args": vars(self.args), "layout_bytes": self.lay["bytes"],
                "writes": getattr(self, "writes", []),
                "images": len(self.lay["images"]), "npz": len(self.lay["npz"]),
                "loadavg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                   time.gmtime())}
        with open(self.args.out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


def mibs(r):
    return r["bytes"] / MiB / r["seconds"] if r.get("seconds") else 0.0


def brief(r):
    if "error" in r:
        return "ERROR %s" % r["error"][:160]
    cpu = r.get("epoch_cpu_s", r["cpu_s"]) + r.get("daemon_cpu_s", 0.0)
    return "%.1f samples/s, %.1f MiB/s, %.1f CPU-s/GiB" % (
        r["samples"] / r["seconds"], mibs(r), cpu / (r["bytes"] / GiB) if r["bytes"] else 0)


def table(results):
    """Markdown: one table per dataset, rows = clients, columns per phase."""
    lines = []
    phases = list(dict.fromkeys(r["phase"] for r in results))
    for ds in dict.fromkeys(r["dataset"] for r in results):
        lines += ["", "**%s**" % ds, "",
                  "| client | phase | samples/s | MiB/s | CPU-s/GiB | peak RSS MiB (client / objmount) | vs objmount |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        rows = [r for r in results if r["dataset"] == ds]
        for ph in phases:
            base = next((r for r in rows if r["phase"] == ph and r["client"] == "objmount"
                         and "error" not in r), None)
            for r in (x for x in rows if x["phase"] == ph):
                if "error" in r:
                    lines.append("| %s | %s | fails: %s | | | | |" % (
                        r["client"], ph, r["error"].replace("|", "/")[:220]))
                    continue
                cpu = r.get("epoch_cpu_s", r["cpu_s"]) + r.get("daemon_cpu_s", 0.0)
                rss = "%.0f" % (r["rss_kib"] / 1024)
                if r.get("daemon_rss_kib"):
                    rss += " / %.0f" % (r["daemon_rss_kib"] / 1024)
                ratio = "%.2f" % (mibs(base) / mibs(r)) if base and mibs(r) else ""
                lines.append("| %s | %s | %.1f | %.1f | %.1f | %s | %s |" % (
                    r["client"], ph, r["samples"] / r["seconds"], mibs(r),
                    cpu / (r["bytes"] / GiB), rss, ratio))
    return "\n".join(lines)


def http_table(results):
    """objmount's own requests, redirects and connections per GiB delivered
    (objmountctl stats before and after each row)."""
    lines = ["", "| dataset | phase | client | requests/GiB | redirects/GiB | connections/GiB |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for r in results:
        h = r.get("http")
        if not h or "error" in r or not r.get("bytes"):
            continue
        gib = r["bytes"] / GiB
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            r["dataset"], r["phase"], r["client"],
            *("%.0f" % (h[k] / gib) if h.get(k) is not None else "?"
              for k in ("requests", "redirects", "connections"))))
    return "\n".join(lines)


def write_table(writes):
    """--write-check: one line per mount."""
    if not writes:
        return ""
    lines = ["", "| mount | route | cp of 40 MiB | in the bucket after | the object, read back |",
             "| --- | --- | --- | ---: | --- |"]
    for w in writes:
        cp = w["cp"] if w["cp"] != "ok" else "ok (%.1f s)" % w.get("cp_seconds", 0)
        after = "%.1f s" % w["listed_after_s"] if "listed_after_s" in w else "—"
        lines.append("| %s | %s | %s | %s | %s |" % (
            w["client"], w.get("route", ""), cp.replace("|", "/").replace("\n", " "), after,
            w["stored"].replace("|", "/").replace("\n", " ")))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="versitygw", choices=["versitygw", "aistore"])
    ap.add_argument("--quick", action="store_true",
                    help="200 images, npz at 1/16 size, a 64 MiB h5 with 32 windows")
    ap.add_argument("--phases", default="lat0,lat20,s3like")
    ap.add_argument("--clients", default="", help="comma list (default: all for the server)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--npz-files", type=int, default=16)
    ap.add_argument("--npz-scale", type=float, default=1.0, help="npz sizes times F")
    ap.add_argument("--h5-mib", type=int, default=512)
    ap.add_argument("--windows", type=int, default=256)
    ap.add_argument("--window-mib", type=int, default=1)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per row")
    ap.add_argument("--out", default="")
    ap.add_argument("--md", default="", help="write the Markdown tables here")
    ap.add_argument("--write-check", action="store_true",
                    help="first, a 40 MiB cp through each mount, read back with boto3")
    ap.add_argument("--keep-work", action="store_true")
    ap.add_argument("--report", default="", help="only print the tables of a saved --out JSON "
                    "(also of a run that was stopped: rows are saved as they finish)")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            saved = json.load(f)
        print(table(saved["results"]) + "\n" + http_table(saved["results"])
              + "\n" + write_table(saved["meta"].get("writes", [])))
        return
    if a.quick:
        a.images, a.npz_scale, a.h5_mib, a.windows = 200, a.npz_scale / 16, 64, 32
    a.phases = [p for p in a.phases.split(",") if p]
    a.clients = [c for c in a.clients.split(",") if c]
    a.datasets = [d for d in a.datasets.split(",") if d]
    for p in a.phases:
        if p not in PHASES:
            ap.error("unknown phase %s" % p)
    known = S3_CLIENTS + AIS_CLIENTS + list(MOUNT_PEERS)
    for c in a.clients:
        if c not in known:
            ap.error("unknown client %s (known: %s)" % (c, ", ".join(known)))
    peermod.start_run(log, "FUSE mounts and drop_caches")
    work = tempfile.mkdtemp(prefix="objmount-loaders-", dir="/var/tmp")
    b = Bench(a, work)
    if not b.venv_py:
        sys.exit("the peers venv is not built: run tools/bench/setup_peers.sh")
    try:
        results = b.run()
        md = table(results) + "\n" + http_table(results) + "\n" + write_table(b.writes)
        print(md)
        if a.md:
            with open(a.md, "w") as f:
                f.write(md + "\n")
    finally:
        peermod.end_run(work, a.keep_work, log)


if __name__ == "__main__":
    main()
