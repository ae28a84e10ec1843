#!/usr/bin/python3
"""Shards as directories (issue 37): the same images stored as files and as
tar shards, read through objmount, against a WebDataset-style reader.

    /usr/bin/python3 tools/bench/shards.py [--quick] [--images N] [--image-kib K]
        [--shards S] [--readers R] [--phase s3-like|loopback] [--server KIND]
        [--out results.json]

One server of the harness (versitygw unless --server) behind the fault
proxy in the chosen phase (s3-like: 20 ms before the first byte and 64 MiB/s
per connection, tools/bench/shared.py), seeded with IMAGES objects of
about IMAGE-KIB KiB under files/ and the same bytes as S tar shards (PAX,
WebDataset keys) under shards/. R reader processes, a DataLoader's workers
with batch 1 (worker k takes samples k, k+R, ... of the sample list), each
reading whole files and checking their MD5:

  files-order     objmount (profile=training), files/ in listing order
  files-hinted    the same over a shuffled order, given as an order hint
  shards-order    objmount -o shards=tar, the shards' members in tar order
                  (ImageFolder's order over shards/*.tar/)
  shards-hinted   a shuffled order, each shard's part of it given as an
                  order hint on the shard's directory
  shards-random   the shuffled order, no hint
  shards-*-kept   the same, on a mount whose cache_dir holds the indexes an
                  earlier mount built (a remount, another node sharing
                  cache_dir), with data_cache=off: no pass over the shards,
                  the reads alone fetch them from the store
  wds             no mount: WebDataset's way, Python's tarfile over a
                  streaming boto3 GET of each shard (worker k streams shards
                  k, k+R, ...), every member read

Every objmount run is a fresh mount with an empty cache_dir (the shard
indexes are built by the run, inside its time), page cache dropped; the
time includes listing the data set (what ImageFolder does first, and
where the shards' indexes are built). images/s = images / (listing + the
slowest reader's own time, from its first read: interpreter and boto3
start-up are not counted, for any case); GETs per image from
objmountctl stats (objmount) or the shards streamed (wds).

Prints a Markdown table; --out writes JSON. Must run as root.
"""

import argparse
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers as peermod  # noqa: E402
from harness.hint import hint  # noqa: E402  (the loader's side of OM_IOC_PREFETCH)
from harness import servers  # noqa: E402  (path set up by peers)
from harness.faultproxy import FaultProxy  # noqa: E402

BUCKET = peermod.BUCKET
KiB = 1 << 10
PHASES = {"loopback": None, "s3-like": {"first_byte_ms": 20, "per_mib_ms": 1000 / 64}}


def log(msg):
    sys.stderr.write("[shards] %s\n" % msg)
    sys.stderr.flush()


WORKER = r"""
import hashlib, json, os, sys, time
paths, want = json.load(open(sys.argv[1]))
n, bad = 0, []
t0 = time.monotonic()
for p in paths:
    with open(p, "rb") as f:
        h = hashlib.md5(f.read()).hexdigest()
    if h != want[p]:
        bad.append(p)
    n += 1
print(json.dumps({"images": n, "seconds": time.monotonic() - t0, "bad": bad}))
"""

WDS_WORKER = r"""
import boto3, botocore, hashlib, json, sys, tarfile, time
spec = json.load(open(sys.argv[1]))
s3 = boto3.client("s3", endpoint_url=spec["endpoint"], aws_access_key_id=spec["ak"],
                  aws_secret_access_key=spec["sk"], region_name="us-east-1",
                  config=botocore.config.Config(s3={"addressing_style": "path"}))
n, bad = 0, []
t0 = time.monotonic()
for key in spec["shards"]:
    body = s3.get_object(Bucket=spec["bucket"], Key=key)["Body"]
    with tarfile.open(fileobj=body, mode="r|") as tf:
        for ti in tf:
            if not ti.isfile():
                continue
            h = hashlib.md5(tf.extractfile(ti).read()).hexdigest()
            if h != spec["want"][ti.name]:
                bad.append(ti.name)
            n += 1
print(json.dumps({"images": n, "seconds": time.monotonic() - t0, "bad": bad}))
"""


def image(i, size):
    seed = hashlib.sha256(b"img%d" % i).digest()
    return (seed * (size // len(seed) + 1))[:size]


def build_dataset(args):
    """{name: bytes}, the shards {key: bytes} and each shard's names in tar
    order."""
    rnd = random.Random(args.seed)
    imgs = {}
    for i in range(args.images):
        size = int(args.image_kib * KiB * rnd.uniform(0.8, 1.2))
        imgs["%06d.jpg" % i] = image(i, size)
    names = sorted(imgs)
    per = (len(names) + args.shards - 1) // args.shards
    shards, members = {}, {}
    for s in range(args.shards):
        part = names[s * per:(s + 1) * per]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for n in part:
                ti = tarfile.TarInfo(n)
                ti.size, ti.mtime, ti.mode = len(imgs[n]), 1700000000, 0o644
                tf.addfile(ti, io.BytesIO(imgs[n]))
        key = "shards/train-%03d.tar" % s
        shards[key] = buf.getvalue()
        members[key] = part
    return imgs, shards, members


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def run_workers(script, specs, work):
    procs = []
    for k, spec in enumerate(specs):
        path = os.path.join(work, "worker-%d.json" % k)
        with open(path, "w") as f:
            json.dump(spec, f)
        procs.append(subprocess.Popen([sys.executable, "-c", script, path],
                                      stdout=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError("a reader failed (exit %d)" % p.returncode)
        outs.append(json.loads(out))
    bad = sum((o["bad"] for o in outs), [])
    if bad:
        raise RuntimeError("DATA MISMATCH in %d images, first %s" % (len(bad), bad[0]))
    # each reader's own time: from its first read (after its interpreter
    # and, for wds, boto3 started) to its last
    return sum(o["images"] for o in outs), max(o["seconds"] for o in outs)


def objmount_run(case, args, fp, work, imgs, members, shuffled, md5):
    p = peermod.Objmount(args.objmount, args.objmountctl)
    pw = tempfile.mkdtemp(dir=work)
    p.prepare(fp.endpoint, pw)
    p.extra = ["profile=training"] + (["shards=tar"] if case.startswith("shards") else [])
    if args.objmount_opts:
        p.extra += args.objmount_opts.split(",")
    mnt = os.path.join(pw, "mnt")
    kept = case.endswith("-kept")
    case = case[:-len("-kept")] if kept else case
    if kept:
        # the index kept, the data not: the reads fetch the shards
        p.extra.append("data_cache=off")
        # an earlier mount of the same cache_dir built the indexes
        m = p.mount(fp.endpoint, mnt, pw, os.path.join(pw, "daemon0.log"), timeout=60)
        try:
            for d in os.listdir(os.path.join(mnt, "shards")):
                os.listdir(os.path.join(mnt, "shards", d))
        finally:
            peermod.unmount(m, timeout=30)
    drop_caches()
    m = p.mount(fp.endpoint, mnt, pw, os.path.join(pw, "daemon.log"), timeout=60)
    try:
        t0 = time.monotonic()
        if case.startswith("files"):
            root = os.path.join(mnt, "files")
            listed = sorted(os.listdir(root))
            order = list(listed) if case == "files-order" else list(shuffled)
            if case == "files-hinted":
                hint(root, order)
            paths = [os.path.join(root, n) for n in order]
        else:
            root = os.path.join(mnt, "shards")
            where = {}
            for d in sorted(os.listdir(root)):  # ImageFolder: every directory, then its files
                for n in sorted(os.listdir(os.path.join(root, d))):
                    where[n] = os.path.join(root, d, n)
            if case == "shards-order":
                paths = [where[n] for n in sorted(where)]
            else:
                paths = [where[n] for n in shuffled]
            if case == "shards-hinted":
                for key, part in members.items():
                    d = os.path.join(mnt, key)
                    inpart = set(part)
                    hint(d, [n for n in shuffled if n in inpart])
        want = {pp: md5[os.path.basename(pp)] for pp in paths}
        specs = [[paths[k::args.readers], want] for k in range(args.readers)]
        listing = time.monotonic() - t0
        n, reading = run_workers(WORKER, specs, pw)
        elapsed = listing + reading
        st = json.loads(subprocess.run([p.ctl, "stats", "--json", mnt], capture_output=True,
                                       text=True).stdout)
        st = st[0] if isinstance(st, list) else st
        gets = st["reads"]["gets"] + st["reads"].get("lookup_whole_gets", 0)
        row = {"images": n, "seconds": round(elapsed, 2), "listing_s": round(listing, 2),
               "images_per_s": round(n / elapsed, 1), "gets": gets, "gets_per_image": round(gets / n, 4),
               "peak_buffers_mib": round(st["memory"]["read_buffer_peak_bytes"] / 2**20, 1)}
        if st.get("shards"):
            row["shards"] = st["shards"]
        row["reads"] = st["reads"]
        return row
    finally:
        peermod.unmount(m, timeout=30)


def wds_run(args, fp, work, shards, md5):
    keys = sorted(shards)
    specs = [{"endpoint": fp.endpoint, "ak": servers.access_key(), "sk": servers.secret_key(),
              "bucket": BUCKET, "shards": keys[k::args.readers], "want": md5}
             for k in range(args.readers)]
    pw = tempfile.mkdtemp(dir=work)
    n, elapsed = run_workers(WDS_WORKER, specs, pw)
    return {"images": n, "seconds": round(elapsed, 2), "images_per_s": round(n / elapsed, 1),
            "gets": len(keys), "gets_per_image": round(len(keys) / n, 4)}


CASES = ["files-order", "files-hinted", "shards-order", "shards-hinted", "shards-random",
         "shards-order-kept", "shards-hinted-kept", "shards-random-kept", "wds"]


def measure(args):
    work = tempfile.mkdtemp(prefix="objmount-shards-bench-")
    servers.select(args.server)
    srv = servers.server_class()().start()
    fp = None
    results = {"args": vars(args), "runs": []}
    try:
        s3 = srv.client()
        s3.create_bucket(Bucket=BUCKET)
        imgs, shards, members = build_dataset(args)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda kv: s3.put_object(Bucket=BUCKET, Key="files/" + kv[0],
                                                 Body=kv[1]), imgs.items()))
            list(ex.map(lambda kv: s3.put_object(Bucket=BUCKET, Key=kv[0], Body=kv[1]),
                        shards.items()))
        md5 = {n: hashlib.md5(b).hexdigest() for n, b in imgs.items()}
        shuffled = sorted(imgs)
        random.Random(args.seed).shuffle(shuffled)
        fp = FaultProxy(srv).start()
        fp.set_faults(latency=PHASES[args.phase])
        for case in args.cases:
            row = {"case": case, "phase": args.phase, "readers": args.readers}
            try:
                if case == "wds":
                    row.update(wds_run(args, fp, work, shards, md5))
                else:
                    row.update(objmount_run(case, args, fp, work, imgs, members, shuffled, md5))
            except (RuntimeError, OSError, subprocess.SubprocessError,
                    peermod.MountError) as e:
                row["error"] = str(e)[:300]
            results["runs"].append(row)
            log("%-14s %s" % (case, row.get("error") or "%7.1f images/s, %.4f GETs/image"
                              % (row["images_per_s"], row["gets_per_image"])))
    finally:
        if fp is not None:
            fp.stop()
        srv.stop()
        peermod.remove_work(work, args.keep_work, log)
    return results


def markdown(results):
    runs = {r["case"]: r for r in results["runs"]}
    files = runs.get("files-order", {}).get("images_per_s")
    wds = runs.get("wds", {}).get("images_per_s")
    lines = ["| case | images/s | GETs/image | vs files in order | vs wds |",
             "|---|---|---|---|---|"]
    for case in CASES:
        r = runs.get(case)
        if not r:
            continue
        if r.get("error"):
            lines.append("| %s | error | | | |" % case)
            continue
        ips = r["images_per_s"]
        lines.append("| %s | %.0f | %.4f | %s | %s |" % (
            case, ips, r["gets_per_image"], "%.2fx" % (ips / files) if files else "-",
            "%.2fx" % (ips / wds) if wds else "-"))
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="400 images, 2 shards")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--image-kib", type=int, default=110)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--phase", default="s3-like", choices=sorted(PHASES))
    peermod.add_server_arg(ap)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--out")
    peermod.add_peer_args(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.images, args.shards = 400, 2
    args.cases = [c for c in args.cases.split(",") if c]
    return args


def main(argv=None):
    args = parse_args(argv)
    peermod.start_run(log, needs_root=True)
    return peermod.report(measure(args), markdown, args.out)


if __name__ == "__main__":
    sys.exit(main())
