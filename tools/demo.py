#!/usr/bin/python3
"""The objmount demo, driven by tools/demo.sh (which installs and builds first).

Starts a private AIStore cluster on loopback (one proxy and two targets of
the pinned aisnode, tests/harness/aisserver.py: its S3 API answers every
object request with a 307 to the target that holds the object), seeds a
bucket with boto3 (an ImageFolder tree of generated JPEGs and an HDF5 file),
mounts the bucket with objmount at the proxy, and runs unmodified loaders
over the mount: two torch DataLoader epochs (images/s), h5py random slices,
a torch.save checkpoint with fsync. Every byte read is checked against what
was uploaded. Then it prints `objmountctl stats` (with the redirects
objmount followed, per operation), unmounts and stops the cluster.

Ctrl-C (or SIGTERM/SIGHUP) at any point: the mount is unmounted, the daemon
and the cluster are stopped, the work directory is removed, and the exit
status is that of a SIGINT death. The servers and the daemon are also started
with PR_SET_PDEATHSIG, so even a SIGKILL of this process stops them.

    /usr/bin/python3 tools/demo.py [--server KIND | --direct] [-o OPTS] [--log FILE]
                                   [--classes N] [--per-class N]
        --server KIND  the server of tests/harness/servers.py (default aistore;
                       aistore-proxy: the same cluster forwarding instead of
                       redirecting; ais: objmount mounts ais://demo on its
                       native API; versitygw; swift)
        --direct       the same as --server versitygw: a plain S3 server, no
                       redirects (what the mount does without AIStore's hops)
        -o OPTS        more objmount options (log_level=debug, ...)
        --log FILE     keep the daemon's log in FILE
"""

import argparse
import contextlib
import gc
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from harness import servers  # noqa: E402
from harness.mount import BUILD_DIR, Mount, is_mounted, seed  # noqa: E402

BUCKET = "demo"
WORKERS = 4
BATCH = 32


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP; a KeyboardInterrupt, so DataLoader workers (which
    inherit the handler) stop quietly, as they do on SIGINT."""


# The signals the handler saw. Python drops an exception raised in some
# places (an at-fork hook while the DataLoader forks its workers, a lock
# release inside logging, a finalizer): a Ctrl-C that lands there is kept
# here, and the next step, or the end of the run, stops as it would have.
SIGNALS = []


def say(msg=""):
    print(msg, flush=True)


def step(msg):
    """Print a step's header, unless a signal was seen and its exception lost."""
    if SIGNALS:
        raise Interrupted(SIGNALS[0])
    say(msg)


def mib(n):
    return "%.1f MiB" % (n / 1048576)


# -- data ----------------------------------------------------------------------------
def make_images(classes, per_class):
    """{key: jpeg bytes} and {key: crc32 of the decoded RGB pixels} of the
    given classes (a range or list of class numbers)."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:256, 0:256]
    objects, pixels = {}, {}
    for c in classes:
        rng = np.random.default_rng([6, c])
        tint = rng.integers(0, 256, 3)
        base = (x[..., None] * tint / 255 + y[..., None] * (255 - tint) / 255).astype(np.int16)
        for i in range(per_class):
            noise = rng.integers(-50, 51, (256, 256, 3), dtype=np.int16)
            arr = np.clip(base + noise, 0, 255).astype(np.uint8)
            b = io.BytesIO()
            Image.fromarray(arr, "RGB").save(b, "JPEG", quality=90)
            key = "train/class%d/img%03d.jpg" % (c, i)
            objects[key] = b.getvalue()
            with Image.open(io.BytesIO(objects[key])) as im:
                pixels[key] = zlib.crc32(np.asarray(im.convert("RGB")).tobytes())
    return objects, pixels


def die_quietly():
    """A data set worker: Ctrl-C, SIGTERM and SIGHUP end it at once, as their
    default does (no traceback: the demo itself says it was interrupted)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def import_loaders(out):
    """Import torch and torchvision (in a thread); an error is kept in
    out["error"] for the caller."""
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except BaseException as e:  # noqa: BLE001 - re-raised by the main thread
        out["error"] = e


@contextlib.contextmanager
def data_set(args, work):
    """Make the JPEGs (two processes, half of the classes each) and the
    HDF5 file (a third task) in worker processes while the caller starts
    the server; yields a function that waits for them and returns
    (objects, pixels, h5 bytes, features). The workers are forked from
    this process, so a Ctrl-C reaches them too; the pool is shut down on
    the way out either way."""
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    classes = list(range(args.classes))
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx,
                                                initializer=die_quietly) as ex:
        jobs = [ex.submit(make_images, classes[k::2], args.per_class) for k in range(2)]
        h5 = ex.submit(make_h5, os.path.join(work, "features.h5"))

        def made():
            objects, pixels = {}, {}
            for j in jobs:
                o, p = j.result()
                objects.update(o)
                pixels.update(p)
            h5bytes, feats = h5.result()
            return dict(sorted(objects.items())), pixels, h5bytes, feats
        try:
            yield made
        except BaseException:
            for j in jobs + [h5]:
                j.cancel()
            raise


def make_h5(path):
    import h5py
    import numpy as np

    feats = np.random.default_rng(7).standard_normal((8192, 512)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=feats, chunks=(128, 128), compression="gzip",
                         compression_opts=4, shuffle=True)
    with open(path, "rb") as f:
        return f.read(), feats


# -- the loaders ---------------------------------------------------------------------
def quiet_worker(_):
    # SIGTERM/SIGHUP sent to the whole process group: the main process stops
    # the workers itself (as on Ctrl-C), so they must not die first
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)


def epoch(root, pixels):
    """One DataLoader epoch over ImageFolder(root); (images, seconds).
    Each worker checksums what it decoded; the main process compares."""
    import warnings

    import torch
    from torchvision import datasets, transforms

    # more workers than CPUs is what a training job does on a small machine
    warnings.filterwarnings("ignore", "This DataLoader will create", UserWarning)

    class Checked(torch.utils.data.Dataset):
        def __init__(self, folder):
            self.folder = folder

        def __len__(self):
            return len(self.folder)

        def __getitem__(self, i):
            x, y = self.folder[i]  # PIL decode of the file on the mount
            rel = os.path.relpath(self.folder.samples[i][0], root)
            crc = zlib.crc32(x.permute(1, 2, 0).contiguous().numpy().tobytes())
            return x.float().div_(255), y, rel, crc

    folder = datasets.ImageFolder(root, transform=transforms.PILToTensor())
    loader = torch.utils.data.DataLoader(Checked(folder), batch_size=BATCH, shuffle=True,
                                         num_workers=WORKERS, worker_init_fn=quiet_worker)
    seen = 0
    t0 = time.monotonic()
    it = iter(loader)
    try:
        for x, y, rels, crcs in it:
            for rel, crc in zip(rels, crcs.tolist()):
                if pixels["train/" + rel] != crc:
                    raise SystemExit("demo: %s decoded to different pixels than uploaded" % rel)
            seen += x.shape[0]
    finally:
        del it  # stop the workers now: they hold files open on the mount
    return seen, time.monotonic() - t0


def read_h5(path, feats):
    import h5py
    import numpy as np

    rng = np.random.default_rng(8)
    n, nbytes = 0, 0
    t0 = time.monotonic()
    with h5py.File(path, "r") as f:
        ds = f["features"]
        for _ in range(200):
            r = int(rng.integers(0, ds.shape[0] - 64))
            c = int(rng.integers(0, ds.shape[1] - 64))
            got = ds[r:r + 64, c:c + 64]
            if not np.array_equal(got, feats[r:r + 64, c:c + 64]):
                raise SystemExit("demo: features[%d:%d, %d:%d] differs" % (r, r + 64, c, c + 64))
            n, nbytes = n + 1, nbytes + got.nbytes
    return n, nbytes, time.monotonic() - t0


def write_checkpoint(path, s3client):
    import torch
    import torchvision

    sd = torchvision.models.resnet18().state_dict()
    t0 = time.monotonic()
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())
        size = f.tell()
    dt = time.monotonic() - t0
    key = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
    stored = torch.load(io.BytesIO(s3client.get_object(Bucket=BUCKET, Key=key)["Body"].read()))
    if list(stored) != list(sd) or not all(torch.equal(stored[k], v) for k, v in sd.items()):
        raise SystemExit("demo: the stored checkpoint differs from the state dict")
    return key, size, dt


def drop_page_cache():
    """Drop the kernel's page cache (root only), so that epoch 2 shows what
    objmount's data cache does for a data set larger than RAM."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")  # the page cache only: the kernel keeps its inodes
        return True
    except OSError:
        return False


# -- the run -------------------------------------------------------------------------
def run(args, work, live):
    import importlib.util
    import threading

    import numpy  # noqa: F401  (the data set's workers need it)

    for mod in ("torch", "torchvision", "h5py", "PIL"):  # fail early, before any server starts
        if importlib.util.find_spec(mod) is None:
            raise SystemExit("demo: the Python module %s is missing (tools/bootstrap.sh "
                             "installs it)" % mod)

    t = time.monotonic()
    say("work directory %s (removed at the end)" % work)
    step("[1/6] server (and the data set, made meanwhile by two processes)")
    t0 = time.monotonic()
    with data_set(args, work) as made:
        # torch's import (seconds) overlaps the server's start too; the
        # workers above were forked before this thread runs
        loaders = {}
        importer = threading.Thread(target=import_loaders, args=(loaders,), daemon=True)
        importer.start()
        srv = live["server"] = start_server(args.server, work)
        t_srv = time.monotonic() - t0
        objects, pixels, h5bytes, feats = made()
    endpoint = srv.endpoint
    for line in describe_server(srv):
        say("      " + line)
    say("      [server ready after %.1f s, data set after %.1f s]"
        % (t_srv, time.monotonic() - t0))

    step("[2/6] seeding bucket %r" % BUCKET)
    t1 = time.monotonic()
    s3 = srv.client()  # an AIStore's follows its 307s, as objmount does
    # The JPEGs with the harness's seed(): boto3 PUTs, or for a few hundred
    # objects the server's own cheapest path (AIStore's native API,
    # versitygw's directory); the HDF5 file with one boto3 PUT.
    seed(s3, BUCKET, objects, threads=16)
    s3.put_object(Bucket=BUCKET, Key="features.h5", Body=h5bytes)
    images = sum(len(v) for v in objects.values())
    say("      train/: %d classes x %d JPEGs (%s), features.h5 (8192x512 float32, gzip "
        "chunks, %s) [%.1f s]"
        % (args.classes, args.per_class, mib(images), mib(len(h5bytes)),
           time.monotonic() - t1))

    step("[3/6] mounting with objmount")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    cache = os.path.join(work, "cache")
    live["mount"] = m = Mount(BUCKET, endpoint, mountpoint=mnt, fast_retries=False,
                              opts=",".join(filter(None, ["profile=training,cache_dir=" + cache,
                                                          args.opts])))
    t0 = time.monotonic()
    m.start()
    daemon = os.path.join(BUILD_DIR, "objmount")
    if daemon.startswith(ROOT + os.sep):
        daemon = os.path.relpath(daemon, ROOT)
    say("      %s %s %s -o %s [%.2f s]" % (daemon, m.source(), mnt, m.options(),
                                           time.monotonic() - t0))

    importer.join()
    if "error" in loaders:
        raise loaders["error"]
    step("[4/6] DataLoader(ImageFolder(%s/train), batch_size=%d, num_workers=%d, shuffle=True)"
        % (mnt, BATCH, WORKERS))
    n, dt = epoch(os.path.join(mnt, "train"), pixels)
    say("      %-42s %4d images in %5.2f s = %6.0f images/s"
        % ("epoch 1, from the bucket:", n, dt, n / dt))
    dropped = drop_page_cache()
    n, dt = epoch(os.path.join(mnt, "train"), pixels)
    say("      %-42s %4d images in %5.2f s = %6.0f images/s"
        % ("epoch 2, data cache (page cache dropped):" if dropped
           else "epoch 2, kernel page cache:", n, dt, n / dt))
    say("      every image decoded to the pixels uploaded")
    ctl = os.path.join(BUILD_DIR, "tools", "objmountctl")
    out = subprocess.run([ctl, "cache", "stats", mnt], capture_output=True, text=True, timeout=30)
    say("      objmountctl cache stats: " + (out.stdout + out.stderr).strip())
    if out.returncode != 0:
        raise SystemExit("demo: objmountctl cache stats failed (%d)" % out.returncode)

    step("[5/6] h5py and torch.save through the mount")
    n, nbytes, dt = read_h5(os.path.join(mnt, "features.h5"), feats)
    say("      features.h5: %d random 64x64 slices (%s decoded) in %.2f s, all equal"
        % (n, mib(nbytes), dt))
    os.mkdir(os.path.join(mnt, "ckpt"))
    key, size, dt = write_checkpoint(os.path.join(mnt, "ckpt", "resnet18.pt"), s3)
    say("      torch.save(resnet18 state dict) + fsync to %s: %s in %.2f s; the stored "
        "object loads equal (boto3)" % (key, mib(size), dt))

    step("[6/6] objmountctl stats %s" % mnt)
    out = subprocess.run([ctl, "stats", mnt], capture_output=True, text=True, timeout=30)
    for line in (out.stdout + out.stderr).rstrip().splitlines():
        say("      " + line if line else "")
    if out.returncode != 0:
        raise SystemExit("demo: objmountctl stats failed (%d)" % out.returncode)
    say("      " + redirect_summary(ctl, mnt, srv))
    say("done in %.1f s" % (time.monotonic() - t))


def start_server(kind, work, attempts=3):
    """A started server of kind with the bucket. A start that fails (a
    loaded machine can miss a start-up deadline; ports are picked free and
    then bound) is tried again on fresh ports, as the tests' fixture does."""
    from harness.procs import ServerNotInstalled

    for attempt in range(1, attempts + 1):
        srv = servers.server_class(kind)(buckets=[BUCKET], base_dir=work)
        try:
            return srv.start()
        except Exception as e:  # noqa: BLE001 - reported when the last attempt fails
            if attempt == attempts or isinstance(e, ServerNotInstalled):
                raise
            say("      %s did not start (attempt %d of %d): %s; trying again"
                % (kind, attempt, attempts, str(e).splitlines()[0][:160] if str(e) else e))
            time.sleep(attempt)


def describe_server(srv):
    """Lines saying what runs: for an AIStore, its nodes and what its proxy
    does with object requests."""
    if srv.kind not in servers.AISTORE_KINDS:
        name = {"versitygw": "versitygw (S3 gateway, posix backend; checks SigV4 and "
                             "Content-MD5; no redirects)",
                "swift": "OpenStack Swift with s3api (no redirects)"}.get(srv.kind, srv.kind)
        return ["%s on %s" % (name, srv.endpoint)]
    targets = ", ".join("127.0.0.1:%d" % t.port for t in srv.targets)
    lines = ["AIStore (aisnode %s): proxy on %s, targets on %s; %s checksums"
             % (gobin_version(), srv.proxy_url, targets, srv.checksum)]
    if srv.api == "native":
        lines.append("native API at %s: objmount mounts ais://%s; the proxy answers object "
                     "requests with 301/307 to a target" % (srv.endpoint, BUCKET))
    elif srv.reverse_proxy:
        lines.append("S3 API at %s with S3-Reverse-Proxy: the proxy forwards object requests "
                     "to the targets (no redirects)" % srv.endpoint)
    else:
        lines.append("S3 API at %s: the proxy answers every object request with a 307 to "
                     "the target that holds the object" % srv.endpoint)
    return lines


def gobin_version():
    from harness import gobin

    return gobin.version("aisnode")


def redirect_summary(ctl, mnt, srv):
    """One line from `objmountctl stats --json`: the redirects objmount
    followed, per operation."""
    import json

    out = subprocess.run([ctl, "stats", mnt, "--json"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise SystemExit("demo: objmountctl stats --json failed (%d)" % out.returncode)
    st = json.loads(out.stdout)
    req = st["requests"]
    per_op = ", ".join("%s %d" % (o["op"], o["redirects"])
                       for o in st["operations"] if o["redirects"])
    line = "redirects followed: %d in %d requests" % (req["redirects"], req["total"])
    if per_op:
        line += " (%s)" % per_op
    if srv.redirects and not req["redirects"]:
        raise SystemExit("demo: %s redirects object requests, but objmount followed none"
                         % srv.kind)
    return line


def stop_loader_workers():
    """Kill the DataLoader workers still running. A Ctrl-C during the epoch
    can leave one running after the loader stopped (about 1 interrupted run
    in 8: the loader's shutdown waited 5 s for it, then sent SIGTERM, which
    quiet_worker ignores), and Python's exit then waited for it forever.
    They hold files open on the mount, so this comes before the unmount."""
    import multiprocessing

    # torch's SIGCHLD handler would raise for a worker of an iterator that
    # never shut down
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for child in multiprocessing.active_children():
        child.kill()
        child.join(10)


def cleanup(live, work, failed, log=None):
    """Unmount, stop the server, remove the work directory.
    Never removes anything under a mount point that is still mounted. After
    a failure the daemon's log is kept in a file named on the way out."""
    problems = []
    gc.collect()  # drop file objects a failed step may still hold on the mount
    stop_loader_workers()
    m = live.get("mount")
    if m is not None:
        try:
            m.unmount(check=False, timeout=10)
        except Exception as e:
            problems.append("unmount: %s" % e)
        if m.path and is_mounted(m.path):
            problems.append("%s is still mounted" % m.path)
        if m.proc is not None and m.returncode != 0:
            problems.append("objmount exited with status %s%s" % (
                m.returncode, " (killed after the unmount timed out)" if m.killed else ""))
            failed = True
        if log or (failed and m.log):
            if log:
                f = open(log, "w")
            else:
                fd, log = tempfile.mkstemp(prefix="objmount-demo-daemon.", suffix=".log")
                f = os.fdopen(fd, "w")
            with f:
                f.write(m.log)
            say("demo: the daemon's log is in %s" % log)
    srv = live.get("server")
    if srv is not None:
        try:
            # its data goes with the work directory: an AIStore's nodes are
            # killed at once instead of shutting down in turn (1.5 s)
            for node in getattr(srv, "nodes", ()):
                node.stop(hard=True)
            srv.stop()
        except Exception as e:
            problems.append("server: %s" % e)
    if work and not is_mounted(os.path.join(work, "mnt")):
        shutil.rmtree(work, ignore_errors=True)
    return problems


def main():
    p = argparse.ArgumentParser(description="objmount demo")
    p.add_argument("--server", choices=servers.KINDS, default="aistore",
                   help="the server of tests/harness/servers.py to mount (default aistore: "
                        "a local AIStore cluster, S3 API, 307s to two targets)")
    p.add_argument("--direct", action="store_true",
                   help="the same as --server versitygw: a plain S3 server, no redirects")
    p.add_argument("-o", dest="opts", default="",
                   help="more objmount options (e.g. log_level=debug)")
    p.add_argument("--log", metavar="FILE",
                   help="keep the daemon's log (stderr) in FILE")
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--per-class", type=int, default=64)
    args = p.parse_args()
    if args.direct:
        args.server = "versitygw"
    servers.select(args.server)  # the keys the mount and boto3 use

    # The handler also notes the signal (SIGNALS): where Python drops the
    # exception, the loader may fail because its workers died, or the run
    # goes on to the next step, which raises it again.
    signals = SIGNALS

    def stop(signum, frame):
        signals.append(signal.Signals(signum).name)
        raise Interrupted(signals[-1])

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop)
    os.environ.update(AWS_ACCESS_KEY_ID=servers.access_key(),
                      AWS_SECRET_ACCESS_KEY=servers.secret_key(),
                      AWS_EC2_METADATA_DISABLED="true")
    work, live, status = None, {}, 0
    try:
        work = tempfile.mkdtemp(prefix="objmount-demo.")
        run(args, work, live)
        if signals:  # seen during the last step, its exception lost
            raise Interrupted(signals[0])
    except KeyboardInterrupt as e:
        say("\ndemo: interrupted (%s); cleaning up" % (str(e) or "SIGINT"))
        status = 130
    except SystemExit as e:
        say(str(e.code))
        status = 1
    except BaseException:
        if signals:  # a consequence of the signal, not a fault of its own
            say("\ndemo: interrupted (%s); cleaning up" % signals[0])
            status = 130
        else:
            import traceback

            traceback.print_exc()
            status = 1
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup
        problems = cleanup(live, work, status not in (0, 130), args.log)
    if problems:
        say("demo: cleanup problems: " + "; ".join(problems))
        return status or 1
    done = [w for k, w in (("mount", "unmounted"),
                           ("server", "%s stopped" % args.server)) if k in live]
    say("; ".join(done + ["nothing left running"]))
    return status


if __name__ == "__main__":
    sys.exit(main())
