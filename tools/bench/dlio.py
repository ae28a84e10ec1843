#!/usr/bin/python3
"""DLIO 2.0.0 (the MLPerf Storage engine) with its data on objmount's mount
against local disk (issue 35).

    tools/bench/setup_peers.sh            # once: the venv with dlio-benchmark
    /usr/bin/python3 tools/bench/dlio.py [--server versitygw] [--phase lat0|lat20|s3like]
        [--files 16] [--record-mib 48] [--stdev-mib 16] [--epochs 3] [--batch 4]
        [--threads 4] [--computation-time S] [--model-mib 64] [--out results.json]

The workload is DLIO's unet3d_h100 with these keys changed (hydra ++ overrides),
scaled to a 2-core machine:
  dataset.num_files_train   168 -> --files (16)
  dataset.record_length     140 MiB (stdev 65 MiB) -> --record-mib (48), --stdev-mib (16):
                            16 files of ~48 MiB are 0.75 GiB per epoch, an epoch in seconds
  reader.batch_size         7 -> --batch (4): 4 steps per epoch instead of 2
  reader.read_threads       4 -> --threads (4, the loaders.py worker count)
  train.epochs              5 -> --epochs (3)
  train.computation_time    0.323 s -> --computation-time, or with --calibrate
                            the time of one batch on local disk (page cache
                            dropped, computation_time 0): with 4 read threads
                            fetching ahead, local disk then sits at AU >= 90%
                            while a store slower than local disk shows
  checkpoint                checkpoint=True, model_size --model-mib (64 MiB, not
                            476 MiB), after epoch 1, every epoch
  output.folder, data_folder, checkpoint_folder: the run's directories
The resnet50 workloads are TensorFlow ones (tfrecord, data_loader tensorflow):
not run, as TensorFlow is not installed (and not wanted in the venv).

Configurations, each a fresh DLIO process (python of the peers venv, one MPI
rank, a stub module in place of tensorflow, which 2.0.0 imports at load):
  local     data generated into local disk, trained from it, checkpoints there
  objmount  data generated THROUGH objmount into the bucket (then every object
            compared, MD5, with the local run's files: DLIO's generator is
            seeded, so both runs write the same bytes), a fresh mount, then
            trained from it with checkpoints written into the mount (every
            checkpoint object compared with the SHA-256 of what torch.save
            serialised, recorded by the wrapper)
  dlio-s3   DLIO's own S3 path (storage_type=s3, storage_root=bench): 2.0.0's
            S3Storage is a stub whose reads go to the framework's file calls;
            the row shows what it does
The page cache is dropped before every training run; the fault proxy sits
between objmount and the server with --phase's latency.

Reports train_au_mean_percentage, train_throughput_mean_samples_per_second,
train_io_mean_MB_per_second (summary.json), the datagen and checkpoint
write times (per_epoch_stats.json ckptN durations) per configuration.
Must run as root.
"""

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import loaders as loadmod  # noqa: E402
import peers as peermod  # noqa: E402
from harness import servers  # noqa: E402
from harness.faultproxy import FaultProxy  # noqa: E402

MiB = 1 << 20
BUCKET = peermod.BUCKET
log = loadmod.log

# DLIO 2.0.0 under a wrapper: tensorflow stubbed (tf_profiler imports it at
# load, unused with framework=pytorch); torch.save recorded so that what each
# checkpoint file should hold is known (hashed after the run, not inside the
# timed checkpoint).
WRAPPER = r"""
import hashlib, io, json, os, sys, types
sys.modules.setdefault("tensorflow", types.ModuleType("tensorflow"))
import torch
saved = []
_save = torch.save
def save(obj, f, *a, **kw):
    _save(obj, f, *a, **kw)
    name = f if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    if isinstance(name, (str, os.PathLike)):  # DLIO saves into open(name, "wb")
        saved.append((os.fspath(name), obj))
torch.save = save
from dlio_benchmark.main import main
try:
    main()
finally:
    out = {}
    for path, obj in saved:
        b = io.BytesIO()
        _save(obj, b)
        out[path] = hashlib.sha256(b.getvalue()).hexdigest()
    with open(os.environ["DLIO_SAVED"], "w") as fh:
        json.dump(out, fh)
"""


def overrides(a, data, out, ckpt, generate, train):
    o = ["workload=unet3d_h100",
         "++workload.dataset.data_folder=" + data,
         "++workload.dataset.num_files_train=%d" % a.files,
         "++workload.dataset.record_length=%d" % (a.record_mib * MiB),
         "++workload.dataset.record_length_stdev=%d" % (a.stdev_mib * MiB),
         "++workload.workflow.generate_data=%s" % generate,
         "++workload.workflow.train=%s" % train,
         "++workload.workflow.checkpoint=%s" % (train and a.model_mib > 0),
         "++workload.reader.batch_size=%d" % a.batch,
         "++workload.reader.read_threads=%d" % a.threads,
         "++workload.train.epochs=%d" % a.epochs,
         "++workload.train.computation_time=%g" % a.computation_time,
         "++workload.output.folder=" + out,
         "hydra.run.dir=" + out + "/hydra"]
    if ckpt:
        o += ["++workload.checkpoint.checkpoint_folder=" + ckpt,
              "++workload.checkpoint.model_size=%d" % (a.model_mib * MiB),
              "++workload.checkpoint.checkpoint_after_epoch=1",
              "++workload.checkpoint.epochs_between_checkpoints=1"]
    return o


class Dlio:
    def __init__(self, args, work):
        self.a, self.work = args, work
        self.py = subprocess.run([os.path.join(HERE, "setup_peers.sh"), "--check"],
                                 capture_output=True, text=True).stdout.strip()
        self.wrapper = os.path.join(work, "dlio_run.py")
        with open(self.wrapper, "w") as f:
            f.write(WRAPPER)

    def run(self, name, extra, env_extra=None):
        """One DLIO process; returns (summary metrics, per-epoch stats, wall s,
        saved-checkpoint hashes, error)."""
        out = os.path.join(self.work, "out-" + name)
        os.makedirs(out, exist_ok=True)
        env = peermod.clean_env()
        env.update({"AWS_EC2_METADATA_DISABLED": "true", "DLIO_SAVED": out + "/saved.json",
                    "PYTHONWARNINGS": "ignore"})
        env.update(env_extra or {})
        argv = [self.py, self.wrapper] + [x.replace("@OUT@", out) for x in extra]
        t0 = time.monotonic()
        with open(out + "/stdout.log", "wb") as lf:
            p = subprocess.run(argv, stdout=lf, stderr=subprocess.STDOUT, env=env, cwd=out,
                               timeout=self.a.timeout)
        wall = time.monotonic() - t0
        res = {"wall": wall, "rc": p.returncode}
        with contextlib.suppress(OSError, ValueError):
            res["summary"] = json.load(open(out + "/summary.json"))["metric"]
        with contextlib.suppress(OSError, ValueError):
            res["epochs"] = json.load(open(out + "/per_epoch_stats.json"))
        with contextlib.suppress(OSError, ValueError):
            res["saved"] = json.load(open(out + "/saved.json"))
        if p.returncode != 0:
            with open(out + "/stdout.log", errors="replace") as lf:
                tail = [x for x in lf.read().splitlines() if x.strip()][-6:]
            res["error"] = "exit %d: %s" % (p.returncode, " / ".join(tail)[-600:])
        log("  %s: %s" % (name, brief(res)))
        return res

    def config(self, name, data, ckpt, source=None):
        """datagen then train; data and ckpt under a mount when source."""
        a = self.a
        res = {}
        gen = overrides(a, data, "@OUT@", None, True, False)
        train = overrides(a, data, "@OUT@", ckpt, False, True)
        if source is None:
            res["gen"] = self.run(name + "-gen", gen)
            loadmod.drop_caches()
            res["train"] = self.run(name + "-train", train)
            return res
        with self.mount() as m:
            res["gen"] = self.run(name + "-gen", [x.replace("MNT", m.mountpoint) for x in gen])
        # the unmount waited for every commit: the bucket holds what DLIO wrote
        res["gen_verify"] = self.verify_data(data.replace("MNT/", ""))
        loadmod.drop_caches()
        with self.mount() as m:
            res["train"] = self.run(name + "-train",
                                    [x.replace("MNT", m.mountpoint) for x in train])
        res["ckpt_verify"] = self.verify_ckpt(res["train"].get("saved", {}))
        return res

    @contextlib.contextmanager
    def mount(self):
        peer = loadmod.Mounted(BUCKET, [], binary=self.bin, ctl=self.ctl)
        peer.cache_dir = tempfile.mkdtemp(prefix="cache-", dir=self.work)
        mnt = os.path.join(self.work, "mnt")
        m = peer.mount(self.fp.endpoint, mnt, self.work, os.path.join(self.work, "objmount.log"))
        try:
            yield m
        finally:
            subprocess.run([self.ctl, "unmount", mnt, "--timeout", "600"], capture_output=True)
            problems = peermod.unmount(m, timeout=600)
            if problems:
                log("unmount: %s" % "; ".join(problems))
            shutil.rmtree(peer.cache_dir, ignore_errors=True)

    def verify_data(self, prefix):
        """Every generated object against the local run's file of that name."""
        cli = self.srv.client()
        local = os.path.join(self.work, "local", "unet3d", "train")
        bad, n = [], 0
        for name in sorted(os.listdir(local)):
            n += 1
            want = md5_file(os.path.join(local, name))
            try:
                body = cli.get_object(Bucket=BUCKET, Key=prefix + "/train/" + name)["Body"]
                got = hashlib.md5(body.read()).hexdigest()
            except Exception as e:  # noqa: BLE001
                got = "missing: %s" % e
            if got != want:
                bad.append(name)
        # the directory's own marker (mkdir's "unet3d/train/") is not an object of DLIO's
        keys = [k for k in iter_keys(cli, prefix + "/train/") if not k.endswith("/")]
        return {"objects": n, "listed": len(keys), "bad": bad, "ok": not bad and len(keys) == n}

    def verify_ckpt(self, saved):
        cli = self.srv.client()
        mnt = os.path.join(self.work, "mnt") + "/"
        bad = []
        for path, want in sorted(saved.items()):
            key = path[len(mnt):] if path.startswith(mnt) else path
            try:
                got = hashlib.sha256(cli.get_object(Bucket=BUCKET, Key=key)["Body"].read())
                got = got.hexdigest()
            except Exception as e:  # noqa: BLE001
                got = "missing: %s" % e
            if got != want:
                bad.append(key)
        return {"files": len(saved), "bad": bad, "ok": bool(saved) and not bad}

    def main(self):
        a = self.a
        servers.select(a.server)
        self.bin = os.path.join(self.work, "objmount")
        self.ctl = os.path.join(self.work, "objmountctl")
        shutil.copy2(os.path.join(peermod.REPO_ROOT, "build", "objmount"), self.bin)
        shutil.copy2(os.path.join(peermod.REPO_ROOT, "build", "tools", "objmountctl"), self.ctl)
        results = {"args": vars(a)}
        local = os.path.join(self.work, "local")
        if a.calibrate:
            a.computation_time = 0.0
            r = self.config("calibrate", local + "/unet3d", None)
            steps = a.files // a.batch * a.epochs
            # the batch time on local disk: the run's training time / steps
            t = sum(float(e["block1"]["duration"]) for e in r["train"]["epochs"].values())
            a.computation_time = round(t / steps, 2) if steps else 0.3
            log("calibrated computation_time %.2f s (local batch %.2f s)"
                % (a.computation_time, t / steps))
            shutil.rmtree(local, ignore_errors=True)
            results["calibration_batch_s"] = t / steps
        results["computation_time"] = a.computation_time
        results["local"] = self.config("local", local + "/unet3d", local + "/ckpt")
        with servers.server_class(a.server)(buckets=[BUCKET]) as srv, \
                FaultProxy(upstream=srv) as fp:
            self.srv, self.fp = srv, fp
            fp.set_faults(latency=loadmod.PHASES[a.phase])
            results["objmount"] = self.config("objmount", "MNT/unet3d", "MNT/ckpt", BUCKET)
            env = {"AWS_ACCESS_KEY_ID": servers.access_key(),
                   "AWS_SECRET_ACCESS_KEY": servers.secret_key(), "AWS_REGION": "us-east-1",
                   "AWS_ENDPOINT_URL": fp.endpoint}
            s3 = overrides(a, "unet3d", "@OUT@", None, False, True) + [
                "++workload.storage.storage_type=s3", "++workload.storage.storage_root=" + BUCKET]
            results["dlio-s3"] = {"train": self.run("dlio-s3-train", s3, env)}
        return results


def iter_keys(cli, prefix):
    for page in cli.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for o in page.get("Contents", []):
            yield o["Key"]


def md5_file(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(MiB), b""):
            h.update(b)
    return h.hexdigest()


def ckpt_times(r):
    return [float(v["duration"]) for e in (r.get("epochs") or {}).values()
            for k, v in e.items() if k.startswith("ckpt")]


def brief(r):
    if "error" in r:
        return "ERROR " + r["error"][-300:]
    m = r.get("summary") or {}
    s = "%.0f s" % r["wall"]
    if "train_au_mean_percentage" in m:
        s += ", AU %.1f%%, %.2f samples/s, %.1f MB/s" % (
            m["train_au_mean_percentage"], m["train_throughput_mean_samples_per_second"],
            m["train_io_mean_MB_per_second"])
    if ckpt_times(r):
        s += ", checkpoints %s s" % "/".join("%.2f" % x for x in ckpt_times(r))
    return s


def table(res):
    lines = ["| configuration | datagen s | verified | AU % | samples/s | MB/s | checkpoint write s | checkpoints verified |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for name in ("local", "objmount", "dlio-s3"):
        r = res.get(name)
        if not r:
            continue
        t = r["train"]
        m = t.get("summary") or {}
        gen = r.get("gen")
        gv, cv = r.get("gen_verify"), r.get("ckpt_verify")
        if "error" in t:
            lines.append("| %s | | | fails: %s | | | | |" % (name, t["error"][-200:].replace("|", "/")))
            continue
        ck = ckpt_times(t)
        lines.append("| %s | %s | %s | %.1f | %.2f | %.1f | %s | %s |" % (
            name, "%.0f" % gen["wall"] if gen else "",
            ("%d/%d objects" % (gv["objects"] - len(gv["bad"]), gv["objects"])) if gv else "",
            m.get("train_au_mean_percentage", 0), m.get("train_throughput_mean_samples_per_second", 0),
            m.get("train_io_mean_MB_per_second", 0),
            "/".join("%.2f" % x for x in ck), ("%d/%d files" % (cv["files"] - len(cv["bad"]), cv["files"])) if cv else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="versitygw", choices=["versitygw", "aistore"])
    ap.add_argument("--phase", default="lat0", choices=list(loadmod.PHASES))
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--record-mib", type=int, default=48)
    ap.add_argument("--stdev-mib", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--computation-time", type=float, default=1.0)
    ap.add_argument("--calibrate", action="store_true",
                    help="measure the local batch time first and derive computation_time")
    ap.add_argument("--model-mib", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep-work", action="store_true")
    a = ap.parse_args()
    peermod.start_run(log, "FUSE mounts and drop_caches")
    work = tempfile.mkdtemp(prefix="objmount-dlio-", dir="/var/tmp")
    d = Dlio(a, work)
    if not d.py:
        sys.exit("the peers venv is not built: run tools/bench/setup_peers.sh")
    try:
        res = d.main()
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1, default=str)
        print(table(res))
    finally:
        peermod.end_run(work, a.keep_work, log)


if __name__ == "__main__":
    main()
