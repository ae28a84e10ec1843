"""Data sets and benchmark cases of bench.py.

A data set is a set of objects under one prefix of the bench bucket, seeded
once per invocation with boto3 (random bytes from a seeded generator). A case
reads one data set, either through a mount (run_mount) or with curl straight
at the endpoint (run_reference, the "what the server can deliver" row).

Every measured call returns a dict with at least "value" (in the case's
unit) and "seconds"; failures raise CaseError or CaseTimeout.
"""

import os
import random
import re
import subprocess
import sys
import time
import urllib.parse

from peers import BUCKET

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workload.py")
MiB = 1 << 20


class CaseError(RuntimeError):
    pass


class CaseTimeout(RuntimeError):
    pass


# -- data sets -------------------------------------------------------------------
class Dataset:
    """count objects under prefix; sizes drawn from [min_size, max_size]."""

    def __init__(self, name, prefix, count, min_size, max_size, pattern):
        self.name = name
        self.prefix = prefix
        self.count = count
        self.min_size = min_size
        self.max_size = max_size
        self.pattern = pattern  # key name pattern under prefix, "%05d" style
        self.objects = []  # [(key, size)]

    def plan(self, seed):
        rng = random.Random("%s-%s" % (seed, self.name))
        name = (lambda i: self.pattern % i) if "%" in self.pattern else (lambda i: self.pattern)
        self.objects = [(self.prefix + name(i), rng.randint(self.min_size, self.max_size))
                        for i in range(self.count)]
        return self

    @property
    def total_bytes(self):
        return sum(s for _, s in self.objects)

    def describe(self):
        if self.count == 1:
            return "1 object of %d MiB (`%s`)" % (self.min_size // MiB, self.objects[0][0])
        if self.min_size == self.max_size:
            size = "%d B" % self.min_size
        else:
            size = "%d-%d B" % (self.min_size, self.max_size)
        return "%d objects of %s under `%s`" % (self.count, size, self.prefix)


def datasets(large_mib=512, small_count=2000, ls_count=5000):
    return {
        "large": Dataset("large", "large/", 1, large_mib * MiB, large_mib * MiB,
                         "seq-%dMiB.bin" % large_mib),
        # ~110 KB each, like a JPEG of an ImageNet-style training set
        "small": Dataset("small", "small/", small_count, 100_000, 120_000, "img-%05d.jpg"),
        "ls": Dataset("ls", "ls%d/" % ls_count, ls_count, 256, 4096, "f-%05d.dat"),
    }


# -- child processes ---------------------------------------------------------------
_live_children = []


def live_children():
    return list(_live_children)


def run_child(argv, timeout, stdout=subprocess.PIPE):
    """Run argv in its own session; (returncode, stdout, stderr, seconds).

    On timeout raise CaseTimeout, leaving the child to the caller's cleanup
    (it may be blocked on a hung mount until that mount is killed)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE, start_new_session=True)
    _live_children.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseTimeout("no result within %.0f s" % timeout)
    _live_children.remove(proc)
    return proc.returncode, out, err, time.monotonic() - t0


def reap_children(wait=True):
    """SIGKILL every child still running (after a timeout or Ctrl-C) and,
    with wait, reap them."""
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
            pass  # stuck in the kernel on a dead mount: nothing more to do
        _live_children.remove(proc)


def run_workload(args, timeout):
    import json

    rc, out, err, _ = run_child([sys.executable, WORKLOAD] + args, timeout)
    try:
        res = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CaseError("workload failed (rc %d): %s" % (rc, err.decode(errors="replace")[-500:]))
    if res.get("errors"):
        raise CaseError("%d read errors, first: %s"
                        % (res.get("error_count", len(res["errors"])), res["errors"][0]))
    return res


def url_for(endpoint, key):
    return "%s/%s/%s" % (endpoint, BUCKET, urllib.parse.quote(key))


# -- cases ---------------------------------------------------------------------------
class Case:
    name = "?"
    title = "?"
    unit = "?"
    higher_is_better = True
    dataset = "?"

    def describe(self):
        return self.title


class SeqRead(Case):
    """Sequential read of the large object: one reader, 1 MiB read() calls."""

    name = "seq"
    unit = "MiB/s"
    dataset = "large"

    def __init__(self, ds, block=MiB, ref_streams=8):
        self.ds = ds
        self.block = block
        self.ref_streams = ref_streams
        self.title = "sequential read, %d MiB object" % (ds.min_size // MiB)

    def run_mount(self, ctx, mnt, timeout):
        key, size = self.ds.objects[0]
        res = run_workload(["seq", os.path.join(mnt, key), "--block", str(self.block),
                            "--size", str(size)], timeout)
        res["value"] = res["bytes"] / MiB / res["seconds"]
        return res

    def run_reference(self, ctx, endpoint, timeout):
        """Best of one GET stream and ref_streams parallel ranged GETs."""
        key, size = self.ds.objects[0]
        url = url_for(endpoint, key)
        deadline = time.monotonic() + timeout
        rc, _, err, one = run_child(["curl", "-sSf", "-o", "/dev/null", url], timeout)
        if rc:
            raise CaseError("curl: %s" % err.decode(errors="replace").strip())
        step = -(-size // self.ref_streams)
        argv = ["curl", "--parallel", "--parallel-max", str(self.ref_streams)]
        for i in range(self.ref_streams):
            lo, hi = i * step, min(size, (i + 1) * step) - 1
            if i:
                argv.append("--next")
            argv += ["-sSf", "-r", "%d-%d" % (lo, hi), "-o", "/dev/null",
                     "-w", "%{size_download}\\n", url]
        rc, out, err, par = run_child(argv, max(1.0, deadline - time.monotonic()))
        if rc:
            raise CaseError("curl: %s" % err.decode(errors="replace").strip())
        got = sum(int(x) for x in out.split())
        if got != size:
            raise CaseError("parallel ranged GETs returned %d bytes, expected %d" % (got, size))
        one_rate, par_rate = size / MiB / one, size / MiB / par
        return {"value": max(one_rate, par_rate), "seconds": min(one, par), "bytes": size,
                "single_stream": one_rate, "parallel_%d" % self.ref_streams: par_rate}


class SmallFiles(Case):
    """Read every small object whole (open, read to EOF, close) with N threads."""

    unit = "files/s"
    dataset = "small"

    def __init__(self, ds, readers):
        self.ds = ds
        self.readers = readers
        self.name = "small%d" % readers
        self.title = "%d x ~110 KB files, %d reader%s" % (ds.count, readers,
                                                           "" if readers == 1 else "s")

    def run_mount(self, ctx, mnt, timeout):
        lst = os.path.join(ctx.work, "small-%s.lst" % os.path.basename(mnt))
        with open(lst, "w") as f:
            for key, size in self.ds.objects:
                f.write("%s\t%d\n" % (os.path.join(mnt, key), size))
        res = run_workload(["files", lst, "--threads", str(self.readers)], timeout)
        res["value"] = res["files"] / res["seconds"]
        return res

    def run_reference(self, ctx, endpoint, timeout):
        cfg = os.path.join(ctx.work, "small-curl.cfg")
        with open(cfg, "w") as f:
            for key, _ in self.ds.objects:
                f.write('url = "%s"\noutput = "/dev/null"\n' % url_for(endpoint, key))
        argv = ["curl", "-sSf", "-K", cfg]
        if self.readers > 1:
            argv += ["--parallel", "--parallel-max", str(self.readers)]
        rc, _, err, secs = run_child(argv, timeout)
        if rc:
            raise CaseError("curl: %s" % err.decode(errors="replace").strip()[-300:])
        return {"value": self.ds.count / secs, "seconds": secs, "files": self.ds.count,
                "bytes": self.ds.total_bytes}


class ListLong(Case):
    """`ls -l DIR` on a freshly mounted file system (seconds, lower is better)."""

    name = "ls"
    unit = "s"
    higher_is_better = False
    dataset = "ls"

    def __init__(self, ds):
        self.ds = ds
        self.title = "`ls -l` of %d objects" % ds.count

    def run_mount(self, ctx, mnt, timeout):
        out = os.path.join(ctx.work, "ls.out")
        with open(out, "wb") as f:
            rc, _, err, secs = run_child(["ls", "-l", os.path.join(mnt, self.ds.prefix)],
                                         timeout, stdout=f)
        if rc:
            raise CaseError("ls -l: rc %d: %s" % (rc, err.decode(errors="replace").strip()[-300:]))
        with open(out, "rb") as f:
            entries = sum(1 for line in f if not line.startswith(b"total "))
        if entries != self.ds.count:
            raise CaseError("ls -l listed %d entries, expected %d" % (entries, self.ds.count))
        return {"value": secs, "seconds": secs, "files": entries}

    def run_reference(self, ctx, endpoint, timeout):
        """ListObjectsV2 pages (1000 keys each) fetched one after the other."""
        deadline = time.monotonic() + timeout
        token, keys, pages = None, 0, 0
        t0 = time.monotonic()
        while True:
            q = {"list-type": "2", "prefix": self.ds.prefix, "delimiter": "/",
                 "max-keys": "1000"}
            if token:
                q["continuation-token"] = token
            url = "%s/%s?%s" % (endpoint, BUCKET, urllib.parse.urlencode(q))
            rc, out, err, _ = run_child(["curl", "-sSf", url],
                                        max(1.0, deadline - time.monotonic()))
            if rc:
                raise CaseError("curl list: %s" % err.decode(errors="replace").strip())
            text = out.decode()
            pages += 1
            keys += text.count("<Key>")
            m = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", text)
            if not m or "<IsTruncated>true</IsTruncated>" not in text:
                break
            token = m.group(1).replace("&amp;", "&")
        secs = time.monotonic() - t0
        if keys != self.ds.count:
            raise CaseError("listed %d keys, expected %d" % (keys, self.ds.count))
        return {"value": secs, "seconds": secs, "files": keys, "pages": pages}


def make_cases(dsets, readers=(1, 8)):
    out = {"seq": SeqRead(dsets["large"])}
    for n in readers:
        c = SmallFiles(dsets["small"], n)
        out[c.name] = c
    out["ls"] = ListLong(dsets["ls"])
    return out
