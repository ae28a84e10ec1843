"""Data sets and benchmark cases of bench.py.

A data set is a set of objects under one prefix of the bench bucket, seeded
once per invocation with boto3 (random bytes from a seeded generator, or
JPEG images for the DataLoader). A case reads (or, for the checkpoint, writes)
through a mount (run_mount), and most cases also have a reference run with
curl straight at the endpoint (run_reference, "the limit": what the server
delivers without any filesystem).

Every measured call returns a dict with at least "value" (in the case's
unit) and "seconds"; failures raise CaseError or CaseTimeout.
"""

import json
import os
import random
import re
import select
import subprocess
import sys
import time
import urllib.parse

from peers import BUCKET

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workload.py")
MiB = 1 << 20
KiB = 1 << 10


class CaseError(RuntimeError):
    pass


class CaseTimeout(RuntimeError):
    pass


# -- data sets -------------------------------------------------------------------
class Dataset:
    """count objects under prefix; sizes drawn from [min_size, max_size];
    namer(i) is the key of object i under prefix. kind "random" stores random
    bytes, "jpeg" stores JPEG images (sizes are then what the encoder gives)."""

    def __init__(self, name, prefix, count, min_size, max_size, namer, kind="random",
                 what=None):
        self.name = name
        self.prefix = prefix
        self.count = count
        self.min_size = min_size
        self.max_size = max_size
        self.namer = namer
        self.kind = kind
        self.what = what
        self.objects = []  # [(key, size)]

    def plan(self, seed):
        rng = random.Random("%s-%s" % (seed, self.name))
        self.objects = [(self.prefix + self.namer(i), rng.randint(self.min_size, self.max_size))
                        for i in range(self.count)]
        return self

    @property
    def total_bytes(self):
        return sum(s for _, s in self.objects)

    def describe(self):
        if self.what:
            return self.what
        if self.count == 1:
            return "1 object of %d MiB (`%s`)" % (self.min_size // MiB, self.objects[0][0])
        if self.min_size == self.max_size:
            size = "%d B" % self.min_size
        else:
            size = "%d-%d B" % (self.min_size, self.max_size)
        return "%d objects of %s under `%s`" % (self.count, size, self.prefix)


def tree_namer(fanout, per_dir):
    """Key i of a 3-level tree: fanout^3 leaf folders of per_dir files each."""
    def name(i):
        leaf, f = divmod(i, per_dir)
        a, rest = divmod(leaf, fanout * fanout)
        b, c = divmod(rest, fanout)
        return "d%02d/d%02d/d%02d/f-%03d.dat" % (a, b, c, f)
    return name


def datasets(sz):
    """sz: the Sizes of the run (bench.py: full or --quick)."""
    classes = sz.image_classes
    tree_count = sz.tree_fanout ** 3 * sz.tree_per_dir
    return {
        "large": Dataset("large", "large/", 1, sz.large_mib * MiB, sz.large_mib * MiB,
                         lambda i: "seq-%dMiB.bin" % sz.large_mib),
        # ~110 KB each, like a JPEG of an ImageNet-style training set
        "small": Dataset("small", "small/", sz.small_count, 100_000, 120_000,
                         lambda i: "img-%05d.jpg" % i),
        "images": Dataset("images", "images/", sz.image_count, 0, 0,
                          lambda i: "class-%02d/img-%05d.jpg" % (i % classes, i), kind="jpeg",
                          what="%d JPEG images (500x375, ~100-120 KB, quality 87) in %d class "
                               "folders under `images/`" % (sz.image_count, classes)),
        "ls": Dataset("ls", "ls%d/" % sz.ls_count, sz.ls_count, 256, 4096,
                      lambda i: "f-%05d.dat" % i),
        "tree": Dataset("tree", "tree/", tree_count, 256, 4096,
                        tree_namer(sz.tree_fanout, sz.tree_per_dir),
                        what="%d objects of 256-4096 B in a 3-level tree under `tree/` "
                             "(%d x %d x %d folders, %d files each)"
                             % (tree_count, sz.tree_fanout, sz.tree_fanout, sz.tree_fanout,
                                sz.tree_per_dir)),
    }


# -- child processes ---------------------------------------------------------------
_live_children = []


def live_children():
    return list(_live_children)


def _spawn(argv, stdout):
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE, start_new_session=True)
    _live_children.append(proc)
    return proc


def run_child(argv, timeout, stdout=subprocess.PIPE):
    """Run argv in its own session; (returncode, stdout, stderr, seconds).

    On timeout raise CaseTimeout, leaving the child to the caller's cleanup
    (it may be blocked on a hung mount until that mount is killed)."""
    t0 = time.monotonic()
    proc = _spawn(argv, stdout)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseTimeout("no result within %.0f s" % timeout)
    _live_children.remove(proc)
    return proc.returncode, out, err, time.monotonic() - t0


def stop_child(proc):
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
        _live_children.remove(proc)
    except subprocess.TimeoutExpired:
        pass


def reap_children(wait=True):
    """SIGKILL every child still running (after a timeout or Ctrl-C) and,
    with wait, reap them. A child's whole session goes (DataLoader workers,
    fio jobs)."""
    for proc in list(_live_children):
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        if not wait:
            continue
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue  # stuck in the kernel on a dead mount: nothing more to do
        _live_children.remove(proc)


def run_workload(args, timeout):
    rc, out, err, _ = run_child([sys.executable, WORKLOAD] + args, timeout)
    try:
        res = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CaseError("workload failed (rc %d): %s" % (rc, err.decode(errors="replace")[-500:]))
    if res.get("errors"):
        raise CaseError("%d errors, first: %s"
                        % (res.get("error_count", len(res["errors"])), res["errors"][0]))
    return res


def run_fio(args, timeout):
    """fio with JSON output; the summed read figures of all jobs."""
    rc, out, err, secs = run_child(["fio", "--output-format=json"] + args, timeout)
    text = out.decode(errors="replace")
    try:
        j = json.loads(text[text.index("{"):])
    except ValueError:
        raise CaseError("fio rc %d: %s" % (rc, (err.decode(errors="replace") or text)[-400:]))
    jobs = j["jobs"]
    bad = [jb for jb in jobs if jb.get("error")]
    if rc or bad:
        raise CaseError("fio rc %d, job error %s: %s" % (
            rc, bad[0]["error"] if bad else 0, err.decode(errors="replace").strip()[-300:]))
    io_bytes = sum(jb["read"]["io_bytes"] for jb in jobs)
    ios = sum(jb["read"]["total_ios"] for jb in jobs)
    runtime = max(jb["read"]["runtime"] for jb in jobs) / 1000.0  # ms
    if runtime <= 0:
        raise CaseError("fio reported no runtime")
    lat = [jb["read"].get("clat_ns", {}) for jb in jobs]
    p99 = max((l.get("percentile", {}).get("99.000000", 0) for l in lat), default=0)
    return {"seconds": runtime, "bytes": io_bytes, "ios": ios,
            "mibps": io_bytes / MiB / runtime, "iops": ios / runtime,
            "clat_mean_ms": sum(l.get("mean", 0) for l in lat) / len(lat) / 1e6,
            "clat_p99_ms": p99 / 1e6, "wall_s": secs}


# A server that refuses unsigned requests (versitygw, Swift) gets presigned
# URLs: bench.py sets this to a function url -> presigned url. Every curl
# follows redirects (-L, `location`): an AIStore answers with 307s.
PRESIGN = None


def signed(url):
    return PRESIGN(url) if PRESIGN else url


def url_for(endpoint, key):
    return signed("%s/%s/%s" % (endpoint, BUCKET, urllib.parse.quote(key)))


def curl_error(err):
    return "curl: %s" % err.decode(errors="replace").strip()[-300:]


# -- cases ---------------------------------------------------------------------------
class Case:
    name = "?"
    title = "?"
    unit = "?"
    higher_is_better = True
    dataset = None
    writes = False      # needs a read-write mount (peers mount differently)
    reference = True    # has a run_reference
    ref_of = None       # the limit is the reference of another case
    how = ""            # one line for the report: what runs

    def info(self):
        return {"title": self.title, "unit": self.unit, "higher_is_better": self.higher_is_better,
                "ref_of": self.ref_of, "how": self.how}


def seq_reference(ds, endpoint, timeout, streams=8):
    """The limit for reading the large object: the better of one GET stream
    and `streams` parallel ranged GETs (1/streams of the object each)."""
    key, size = ds.objects[0]
    url = url_for(endpoint, key)
    deadline = time.monotonic() + timeout
    rc, _, err, one = run_child(["curl", "-sSfL", "-o", "/dev/null", url], timeout)
    if rc:
        raise CaseError(curl_error(err))
    step = -(-size // streams)
    argv = ["curl", "--parallel", "--parallel-max", str(streams)]
    for i in range(streams):
        lo, hi = i * step, min(size, (i + 1) * step) - 1
        if i:
            argv.append("--next")
        argv += ["-sSfL", "-r", "%d-%d" % (lo, hi), "-o", "/dev/null",
                 "-w", "%{size_download}\\n", url]
    rc, out, err, par = run_child(argv, max(1.0, deadline - time.monotonic()))
    if rc:
        raise CaseError(curl_error(err))
    got = sum(int(x) for x in out.split())
    if got != size:
        raise CaseError("parallel ranged GETs returned %d bytes, expected %d" % (got, size))
    one_rate, par_rate = size / MiB / one, size / MiB / par
    return {"value": max(one_rate, par_rate), "seconds": min(one, par), "bytes": size,
            "single_stream": one_rate, "parallel_%d" % streams: par_rate}


class FioSeq(Case):
    """Sequential read of the large object with fio: 1 stream reads it all;
    4 streams are 4 jobs (4 open file descriptors) each reading its own quarter."""

    unit = "MiB/s"
    dataset = "large"

    def __init__(self, ds, streams):
        self.ds = ds
        self.streams = streams
        self.name = "seq%d" % streams
        mib = ds.min_size // MiB
        if streams == 1:
            self.title = "sequential read, %d MiB object, fio 1 stream" % mib
            self.how = ("fio rw=read bs=1M direct=0 ioengine=psync, the whole %d MiB object"
                        % mib)
        else:
            self.title = "sequential read, %d MiB object, fio %d streams" % (mib, streams)
            self.how = ("fio numjobs=%d, each job reads its own %d MiB of the same object "
                        "(size=%dM offset_increment=%dM), same settings"
                        % (streams, mib // streams, mib // streams, mib // streams))
            self.ref_of = "seq1"
            self.reference = False

    def run_mount(self, ctx, mnt, timeout):
        key, size = self.ds.objects[0]
        part = size // self.streams
        args = ["--name=" + self.name, "--filename=" + os.path.join(mnt, key), "--rw=read",
                "--bs=1M", "--direct=0", "--ioengine=psync", "--readonly",
                "--size=%d" % part, "--numjobs=%d" % self.streams]
        if self.streams > 1:
            args.append("--offset_increment=%d" % part)
        res = run_fio(args, timeout)
        if res["bytes"] != size:
            raise CaseError("fio read %d bytes, expected %d" % (res["bytes"], size))
        res["value"] = res["mibps"]
        return res

    def run_reference(self, ctx, endpoint, timeout):
        return seq_reference(self.ds, endpoint, timeout)


class CatSeq(Case):
    """`cat FILE | wc -c`: cat's own read size, bytes counted."""

    name = "cat"
    unit = "MiB/s"
    dataset = "large"
    reference = False
    ref_of = "seq1"

    def __init__(self, ds):
        self.ds = ds
        self.title = "sequential read, %d MiB object, cat" % (ds.min_size // MiB)
        self.how = "`cat FILE | wc -c` (coreutils cat, its own 128 KiB reads); bytes counted"

    def run_mount(self, ctx, mnt, timeout):
        key, size = self.ds.objects[0]
        rc, out, err, secs = run_child(["sh", "-c", 'cat "$1" | wc -c', "sh",
                                        os.path.join(mnt, key)], timeout)
        if rc:
            raise CaseError("cat: rc %d: %s" % (rc, err.decode(errors="replace").strip()[-300:]))
        n = int(out.split()[0])
        if n != size:
            raise CaseError("cat read %d bytes, expected %d" % (n, size))
        return {"value": size / MiB / secs, "seconds": secs, "bytes": size}


class FioRand(Case):
    """Random reads of bs bytes anywhere in the large object: one fio job,
    queue depth 1 (psync), fixed seed, every block at most once, bounded by
    time (runtime) or by one pass over the object."""

    unit = "IOPS"
    dataset = "large"

    def __init__(self, ds, bs, runtime):
        self.ds = ds
        self.bs = bs
        self.runtime = runtime
        label = "%dk" % (bs // KiB) if bs < MiB else "%dm" % (bs // MiB)
        self.name = "rand" + label
        self.label = label.upper().replace("K", " KiB").replace("M", " MiB")
        self.title = "random %s reads, %d MiB object" % (self.label, ds.min_size // MiB)
        self.how = ("fio rw=randread bs=%s direct=0 ioengine=psync randseed=1234 "
                    "runtime=%ds (or one pass), 1 job" % (label, runtime))

    def run_mount(self, ctx, mnt, timeout):
        key, size = self.ds.objects[0]
        res = run_fio(["--name=" + self.name, "--filename=" + os.path.join(mnt, key),
                       "--rw=randread", "--bs=%d" % self.bs, "--direct=0",
                       "--ioengine=psync", "--readonly", "--size=%d" % size,
                       "--randseed=1234", "--runtime=%d" % self.runtime],
                      timeout)
        if res["ios"] < 1:
            raise CaseError("fio completed no reads")
        res["value"] = res["iops"]
        return res

    def run_reference(self, ctx, endpoint, timeout):
        """Ranged GETs of the same size at random aligned offsets, one after
        the other on one keep-alive connection (curl -K, a `next` per range),
        for the same time. Timed from the first completed GET to the last, so
        curl's start-up (parsing thousands of ranges) is not counted."""
        key, size = self.ds.objects[0]
        url = url_for(endpoint, key)
        rng = random.Random(1234)
        blocks = size // self.bs
        n = min(blocks, 3000 * self.runtime)
        cfg = os.path.join(ctx.work, "rand-%s.cfg" % self.name)
        with open(cfg, "w") as f:
            for i, b in enumerate(rng.sample(range(blocks), n)):
                if i:
                    f.write("next\n")
                f.write('url = "%s"\nrange = %d-%d\noutput = "/dev/null"\nlocation\n'
                        'write-out = "%%{size_download}\\n"\n'
                        % (url, b * self.bs, (b + 1) * self.bs - 1))
        # stdbuf: one line per finished GET, not a 4 KiB stdio buffer at a time
        proc = _spawn(["stdbuf", "-oL", "curl", "-sS", "-K", cfg], subprocess.PIPE)
        start = time.monotonic()
        t_first = t_last = None
        done = got = 0
        buf = b""
        try:
            while True:
                now = time.monotonic()
                if now - start > timeout or (t_first and now - t_first > self.runtime):
                    break
                r, _, _ = select.select([proc.stdout], [], [], 0.5)
                if not r:
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                if lines:
                    t_last = time.monotonic()
                    t_first = t_first or t_last
                for line in lines:
                    done += 1
                    got += int(line)
        finally:
            stop_child(proc)
        if done < 2:
            raise CaseError("curl completed %d range GETs: %s"
                            % (done, proc.stderr.read().decode(errors="replace")[-300:]))
        if got != done * self.bs:
            raise CaseError("range GETs returned %d bytes, expected %d" % (got, done * self.bs))
        secs = t_last - t_first
        if secs <= 0:
            raise CaseError("range GETs too fast to time (%d in one read)" % done)
        rate = (done - 1) / secs
        return {"value": rate, "seconds": secs, "ios": done, "bytes": got,
                "mibps": rate * self.bs / MiB}


def run_counting(argv, limit_s, timeout):
    """Run a curl that prints one line (its size_download) per finished
    transfer; stop it after limit_s seconds. (lines, bytes, seconds, finished)."""
    proc = _spawn(["stdbuf", "-oL"] + argv, subprocess.PIPE)
    t0 = time.monotonic()
    done = got = 0
    buf = b""
    finished = False
    try:
        while True:
            now = time.monotonic()
            if now - t0 > timeout:
                raise CaseTimeout("no result within %.0f s" % timeout)
            if limit_s and now - t0 > limit_s:
                break
            r, _, _ = select.select([proc.stdout], [], [], 0.2)
            if not r:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                finished = True
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                done += 1
                got += int(line)
        secs = time.monotonic() - t0
        if finished:
            proc.wait(timeout=10)
            if proc.returncode:
                raise CaseError(curl_error(proc.stderr.read()))
    finally:
        stop_child(proc)
    return done, got, secs, finished


class SmallFiles(Case):
    """Read every small object whole (open, read to EOF, close) with N threads,
    in manifest order; no file is started after `seconds` (rate: files/s)."""

    unit = "files/s"
    dataset = "small"

    def __init__(self, ds, readers, seconds):
        self.ds = ds
        self.readers = readers
        self.seconds = seconds
        self.name = "small%d" % readers
        self.title = "%d x ~110 KB files, %d reader%s" % (ds.count, readers,
                                                           "" if readers == 1 else "s")
        self.how = ("open, read to EOF with 1 MiB read() calls, close, for the files of the "
                    "manifest in order (no listing), %d thread%s taking the next file; stops "
                    "starting files after %d s" % (readers, "" if readers == 1 else "s",
                                                   seconds))

    def run_mount(self, ctx, mnt, timeout):
        lst = os.path.join(ctx.work, "small-%s.lst" % os.path.basename(mnt))
        with open(lst, "w") as f:
            for key, size in self.ds.objects:
                f.write("%s\t%d\n" % (os.path.join(mnt, key), size))
        res = run_workload(["files", lst, "--threads", str(self.readers),
                            "--seconds", str(self.seconds)], timeout)
        res["value"] = res["files"] / res["seconds"]
        return res

    def run_reference(self, ctx, endpoint, timeout):
        cfg = os.path.join(ctx.work, "small-curl.cfg")
        with open(cfg, "w") as f:
            for key, _ in self.ds.objects:
                f.write('url = "%s"\noutput = "/dev/null"\n' % url_for(endpoint, key))
        argv = ["curl", "-sSfL", "-w", "%{size_download}\\n", "-K", cfg]
        if self.readers > 1:
            argv += ["--parallel", "--parallel-max", str(self.readers)]
        files, got, secs, _ = run_counting(argv, self.seconds, timeout)
        if files == 0:
            raise CaseError("curl fetched no file")
        return {"value": files / secs, "seconds": secs, "files": files, "bytes": got}


class Loader(Case):
    """torchvision ImageFolder + DataLoader(num_workers=4), one epoch."""

    name = "loader"
    unit = "images/s"
    dataset = "images"
    reference = False

    def __init__(self, ds, workers=4, batch=32):
        self.ds = ds
        self.workers = workers
        self.batch = batch
        self.title = "DataLoader, %d JPEGs, %d workers" % (ds.count, workers)
        self.how = ("torchvision ImageFolder (PIL decode, PILToTensor) + DataLoader(num_workers="
                    "%d, batch_size=%d, shuffle=True), one epoch; the folder scan is timed, "
                    "Python/torch start-up is not" % (workers, batch))

    def run_mount(self, ctx, mnt, timeout):
        res = run_workload(["loader", os.path.join(mnt, self.ds.prefix), "--expect",
                            str(self.ds.count), "--workers", str(self.workers),
                            "--batch", str(self.batch)], timeout)
        res["value"] = res["files"] / res["seconds"]
        return res


def list_keys(endpoint, prefix, delimiter, deadline):
    """ListObjectsV2 pages (1000 keys each) one after the other with curl."""
    token, keys, pages = None, 0, 0
    while True:
        q = {"list-type": "2", "prefix": prefix, "max-keys": "1000"}
        if delimiter:
            q["delimiter"] = "/"
        if token:
            q["continuation-token"] = token
        url = signed("%s/%s?%s" % (endpoint, BUCKET, urllib.parse.urlencode(q)))
        rc, out, err, _ = run_child(["curl", "-sSfL", url],
                                    max(1.0, deadline - time.monotonic()))
        if rc:
            raise CaseError("curl list: %s" % err.decode(errors="replace").strip())
        text = out.decode()
        pages += 1
        keys += text.count("<Key>")
        m = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", text)
        if not m or "<IsTruncated>true</IsTruncated>" not in text:
            return keys, pages
        token = m.group(1).replace("&amp;", "&")


class _Listing(Case):
    """A listing command on a fresh mount (seconds, lower is better); the
    reference lists the same keys with ListObjectsV2 pages."""

    unit = "s"
    higher_is_better = False
    delimited = True  # reference: one folder with "/" (ls), or the whole tree flat (find)

    def command(self, path):
        raise NotImplementedError

    def counts(self, line):
        return True

    def run_mount(self, ctx, mnt, timeout):
        out = os.path.join(ctx.work, self.name + ".out")
        cmd = self.command(os.path.join(mnt, self.ds.prefix))
        with open(out, "wb") as f:
            rc, _, err, secs = run_child(cmd, timeout, stdout=f)
        if rc:
            raise CaseError("%s: rc %d: %s" % (" ".join(cmd[:2]), rc,
                                               err.decode(errors="replace").strip()[-300:]))
        with open(out, "rb") as f:
            entries = sum(1 for line in f if self.counts(line))
        if entries != self.ds.count:
            raise CaseError("%s printed %d entries, expected %d" % (cmd[0], entries,
                                                                    self.ds.count))
        return {"value": secs, "seconds": secs, "files": entries}

    def run_reference(self, ctx, endpoint, timeout):
        t0 = time.monotonic()
        keys, pages = list_keys(endpoint, self.ds.prefix, self.delimited, t0 + timeout)
        secs = time.monotonic() - t0
        if keys != self.ds.count:
            raise CaseError("listed %d keys, expected %d" % (keys, self.ds.count))
        return {"value": secs, "seconds": secs, "files": keys, "pages": pages}


class ListLong(_Listing):
    """`ls -l DIR` on a freshly mounted file system (seconds, lower is better)."""

    name = "ls"
    dataset = "ls"

    def __init__(self, ds):
        self.ds = ds
        self.title = "`ls -l` of %d objects" % ds.count
        self.how = "`ls -l DIR` of one folder on a fresh mount; it must list every entry"

    def command(self, path):
        return ["ls", "-l", path]

    def counts(self, line):
        return not line.startswith(b"total ")


class Find(_Listing):
    """`find DIR -type f` over the 3-level tree (seconds, lower is better);
    the reference lists the whole tree as flat ListObjectsV2 pages."""

    name = "find"
    dataset = "tree"
    delimited = False

    def __init__(self, ds):
        self.ds = ds
        self.title = "`find` over %d objects, 3 levels" % ds.count
        self.how = ("`find DIR -type f` of the tree on a fresh mount (GNU find: readdir of "
                    "every folder, no stat of files); it must print every file")

    def command(self, path):
        return ["find", path, "-type", "f"]


class Checkpoint(Case):
    """Write SIZE bytes to a new file in 8 MiB write() calls and close it;
    then wait (polling the server directly, not through the proxy) until the
    object in the bucket has the full size and the expected MD5 ETag.

    value: MiB/s until the object is complete in the bucket (the fair figure:
    rclone's close() returns before its upload). close_mibps: MiB/s until
    close() returned."""

    name = "ckpt"
    unit = "MiB/s"
    dataset = None
    writes = True
    reference = False

    def __init__(self, size, seed, block=8 * MiB):
        self.size = size
        self.seed = seed
        self.block = block
        self.md5 = None
        self.title = "checkpoint write, %d MiB + close" % (size // MiB)
        self.how = ("%d MiB written with 8 MiB write() calls to a new file, then close(); "
                    "timed until the object is complete in the bucket (size and MD5 checked)"
                    % (size // MiB))

    def expected_md5(self):
        if self.md5 is None:
            import hashlib

            sys.path.insert(0, HERE)
            import workload

            buf = workload.block_data(self.seed, self.block)
            h = hashlib.md5()
            done, i = 0, 0
            while done < self.size:
                buf[:8] = i.to_bytes(8, "little")
                n = min(self.block, self.size - done)
                h.update(memoryview(buf)[:n])
                done += n
                i += 1
            self.md5 = h.hexdigest()
        return self.md5

    def run_mount(self, ctx, mnt, timeout):
        md5 = self.expected_md5()
        ctx.ckpt_seq = getattr(ctx, "ckpt_seq", 0) + 1
        key = "ckpt-%s-%d.pt" % (os.path.basename(mnt), ctx.ckpt_seq)
        path = os.path.join(mnt, key)
        ctx.cleanup_keys.append(key)
        deadline = time.monotonic() + timeout
        res = run_workload(["write", path, "--size", str(self.size), "--block",
                            str(self.block), "--seed", self.seed], timeout)
        s3 = ctx.srv_client()
        t_done, last = None, "absent"
        while time.monotonic() < deadline:
            try:
                h = s3.head_object(Bucket=BUCKET, Key=key)
                etag = h["ETag"].strip('"')
                if h["ContentLength"] == self.size:
                    t_done = time.monotonic()
                    if etag != md5 and "-" in etag:  # a multipart ETag (Swift): read it back
                        etag = stored_md5(s3, key)
                    if etag != md5:
                        raise CaseError("stored object has ETag %s, expected MD5 %s"
                                        % (etag, md5))
                    break
                last = "%d bytes" % h["ContentLength"]
            except CaseError:
                raise
            except Exception as e:  # 404 until the upload completes
                last = str(e)[:100]
            time.sleep(0.02)
        if t_done is None:
            raise CaseTimeout("object not complete in the bucket within %.0f s (%s)"
                              % (timeout, last))
        close_s = res["t_closed"] - res["t_open"]
        bucket_s = t_done - res["t_open"]
        return {"value": self.size / MiB / bucket_s, "seconds": bucket_s,
                "close_s": close_s, "close_mibps": self.size / MiB / close_s,
                "write_s": res["t_written"] - res["t_open"], "bytes": self.size,
                "after_close_s": max(0.0, t_done - res["t_closed"])}


def stored_md5(s3, key):
    """MD5 of the object's bytes, read straight from the server."""
    import hashlib

    h = hashlib.md5()
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"]
    for chunk in iter(lambda: body.read(8 * MiB), b""):
        h.update(chunk)
    return h.hexdigest()


def make_cases(dsets, sz, seed):
    large = dsets["large"]
    out = {}
    for c in (FioSeq(large, 1), FioSeq(large, 4), CatSeq(large),
              FioRand(large, 4 * KiB, sz.rand_runtime), FioRand(large, 64 * KiB, sz.rand_runtime),
              FioRand(large, MiB, sz.rand_runtime),
              SmallFiles(dsets["small"], 1, sz.small_seconds),
              SmallFiles(dsets["small"], 8, sz.small_seconds),
              Loader(dsets["images"]), ListLong(dsets["ls"]), Find(dsets["tree"]),
              Checkpoint(sz.ckpt_mib * MiB, seed)):
        out[c.name] = c
    return out


ALIASES = {"seq": "seq1", "rand": "rand4k,rand64k,rand1m", "small": "small1,small8",
           "meta": "ls,find", "write": "ckpt"}
