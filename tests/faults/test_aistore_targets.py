"""An AIStore target that dies and comes back, under a mount.

The cluster (1 proxy, 2 targets) places each object on one target; the
proxy redirects there (or forwards, with S3-Reverse-Proxy). Here one target
is killed (SIGKILL, as a crash) in the middle of an epoch and of writes,
then started again:

- reads of objects on the live target go on with the right bytes;
- reads of the dead target's objects end with the right bytes (a retry
  that went back through the proxy after the target returned) or EIO,
  each within the mount's timeouts, never with other bytes or a hang;
- a file whose close() succeeded is stored, whole and right, once the
  target is back; a close() that failed kept its bytes in recovery;
- once the target is back, every object reads right again or, where
  AIStore does not serve what the target held (a target its proxy had
  dropped from the map and that joined again answered 404 for minutes
  here), ENOENT or EIO: never other bytes; what is lost to the cluster's
  view is checked on the target's disk.

Runs on the AIStore kinds (tests/matrix.py).
"""

import errno
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from botocore.exceptions import ClientError

from harness.mount import MiB, new_bucket, payload, read_checked, seed
from harness.recovery import recovery_entries

# bounds a request may take here: a dead target refuses connections at once
# (loopback), so what costs time is the retries' backoff
# the retries' defaults (the harness shortens them): a retry after a
# target refused the connection waits a second (OM_HTTP_TARGET_DOWN_MS)
OPTS = ("retry_base=0.1,retry_max=10,stall_timeout=5,request_timeout=20,connect_timeout=2,"
        "upload_retry_delay=0.2,part_size=5M")
# no read may take longer than this, whatever the cluster does
READ_BOUND = 60.0
# files the writer writes at most (it stops when the target is back)
WRITES = 40


def write_size(i):
    # single PUTs: an object of one file on a target's disk, which the test
    # reads there (AIStore keeps a multipart object as chunks)
    return 300_000 + 1000 * i


def placement(s3server, bucket, keys):
    ports = {k: s3server.target_port(bucket, k) for k in keys}
    return {p: [k for k in keys if ports[k] == p] for p in set(ports.values())}


def on_disk(s3server, bucket, key):
    """The bytes of key on whichever target's mountpath holds it (AIStore
    keeps an object as the file <mountpath>/@ais/<bucket>/%ob/<name>)."""
    tail = os.path.join("@ais", bucket, "%ob", key)
    for root, _, files in os.walk(s3server.data_dir):
        for f in files:
            path = os.path.join(root, f)
            if path.endswith("/" + tail):
                with open(path, "rb") as fh:
                    return fh.read()
    return None


def timed_read(path, want):
    """(None or the EIO of the open or a read, seconds taken)."""
    t = time.monotonic()
    try:
        err = read_checked(path, want)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        err = e
    return err, time.monotonic() - t


def test_a_target_killed_mid_epoch_and_mid_write(mount, s3server, s3client, cache_dir):
    bucket = new_bucket(s3client, "tgt")
    objects = {"e/%03d.bin" % i: payload("t%d" % i, 200_000 + 1000 * i) for i in range(40)}
    objects["e/big.bin"] = payload("big", 12 * MiB)
    seed(s3client, bucket, objects)
    where = placement(s3server, bucket, list(objects))
    assert len(where) == 2, "every object on one target: %s" % {p: len(v) for p, v in where.items()}
    victim_port = sorted(where)[1]
    victim = [i for i, t in enumerate(s3server.targets) if t.port == victim_port][0]
    on_victim = set(where[victim_port])

    m = mount(bucket, "cache_dir=%s,%s" % (cache_dir, OPTS))
    names = sorted(objects)
    # the epoch starts with both targets up
    for k in names[:10]:
        assert read_checked(m.join(k), objects[k]) is None, k

    os.mkdir(m.join("w"))
    written = {}  # name -> close error or None (the bytes: payload(name, write_size(i)))
    stop_writing = threading.Event()

    def writer():
        for i in range(WRITES):
            if stop_writing.is_set():
                return
            name = "w/%03d.bin" % i
            try:
                with open(m.join(name), "wb") as f:
                    f.write(payload(name, write_size(i)))
                written[name] = None
            except OSError as e:
                written[name] = e

    results = {}
    with ThreadPoolExecutor(1) as wx, ThreadPoolExecutor(1) as tx:
        wf = wx.submit(writer)
        time.sleep(0.5)
        s3server.stop_target(victim)  # a crash: SIGKILL
        # it comes back while the rest of the epoch is being read
        tf = tx.submit(lambda: (time.sleep(1.5), s3server.start_target(victim)))
        try:
            with ThreadPoolExecutor(4) as rx:
                for k, r in zip(names[10:], rx.map(
                        lambda k: timed_read(m.join(k), objects[k]), names[10:])):
                    results[k] = r
        finally:
            stop_writing.set()
            tf.result(timeout=90)
            wf.result(timeout=120)

    slow = {k: round(t, 1) for k, (_, t) in results.items() if t > READ_BOUND}
    assert not slow, "reads past the bound: %s" % slow
    live_failed = {k: e for k, (e, _) in results.items() if e is not None and k not in on_victim}
    assert not live_failed, "objects on the live target failed: %s" % live_failed
    dead = [k for k in results if k in on_victim]
    assert dead, "the epoch read nothing of the dead target"
    print("dead-target reads: %d, failed %d; writes %d, failed %d; times %s" % (
        len(dead), sum(results[k][0] is not None for k in dead), len(written),
        sum(e is not None for e in written.values()),
        sorted(round(t, 1) for _, t in results.values())))

    failed = {n: e for n, e in written.items() if e is not None}
    stored = [n for n, e in written.items() if e is None]
    assert stored, "no write succeeded: %s" % failed
    m.unmount()
    # a file whose close() succeeded is on a target's disk, whole and right
    # (read from the mountpaths: the cluster itself may not serve it yet)
    for n in stored:
        want = payload(n, write_size(int(n[2:5])))
        assert on_disk(s3server, bucket, n) == want, \
            "%s, whose close() succeeded, is not stored whole" % n
    kept = {side["key"] for _, side in recovery_entries(cache_dir)}
    assert set(failed) <= kept, "failed closes without their bytes in recovery: %s (kept %s)" % (
        {n: failed[n] for n in set(failed) - kept}, kept)
    # once the target is back the cluster serves its objects again, or (when
    # its proxy had dropped it from the map and it joined again: AIStore
    # then answered 404 for what it held, here for minutes) answers 404;
    # never other bytes
    t = time.monotonic()
    missing = set(names) | set(stored)
    while missing and time.monotonic() < t + 60:
        for n in sorted(missing):
            try:
                s3client.head_object(Bucket=bucket, Key=n)
                missing.discard(n)
            except ClientError as e:
                assert e.response["Error"]["Code"] in ("404", "NoSuchKey"), e.response
        time.sleep(0.5)
    print("not served 60 s after the epoch: %d of %d (rebalances %s)" % (
        len(missing), len(names) + len(stored), s3server.rebalances()))
    # a new mount reads every object the cluster serves right, and the rest
    # is ENOENT, not other bytes
    m2 = mount(bucket, OPTS)
    for k in names:
        if k in missing:  # the right bytes, if served by now, or the error
            try:
                read_checked(m2.join(k), objects[k], errnos=(errno.EIO, errno.ENOENT))
            except OSError as e:  # the open
                assert e.errno in (errno.EIO, errno.ENOENT), e
        else:
            assert read_checked(m2.join(k), objects[k]) is None, k
