"""How many times the write path hashes each byte (issue 14).

Every part goes out with its Content-MD5, and every commit is verified
against the server's ETag. A server whose multipart ETags are the MD5 of the
part MD5s (AWS S3, Swift's s3api) needs nothing more: once the mount has
seen one such ETag, each byte uploaded is hashed once. A server whose
multipart ETags are whole-object MD5s (s3rver) needs the whole MD5 too: two
passes. The mount learns the form from its first verified multipart upload
and shows it in `objmountctl stats --json` (writes.multipart_etag_form), with
the bytes hashed (writes.hashed_bytes). And a commit waiting for its parts
sleeps rather than spins.
"""

import os
import subprocess

from harness import admin
from harness.mount import MiB, check_object, daemon_pids, payload

SIZE = 17 * MiB  # four parts of 5 MiB (the last one short)


def writes(m):
    return admin.stats_json(m.path)["writes"]


def cp(tmp_path, data, dst):
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    subprocess.run(["cp", str(src), dst], check=True, timeout=120)


def test_each_byte_is_hashed_once_or_twice_by_the_servers_etag_form(rw_mount, bucket, s3client,
                                                                     tmp_path):
    m = rw_mount(bucket, "part_size=5M")
    assert admin.wait_socket(m.path)
    assert writes(m)["multipart_etag_form"] == "unknown"

    first = payload("hash-1", SIZE)
    cp(tmp_path, first, m.join("first.bin"))
    check_object(s3client, bucket, "first.bin", first)
    w = writes(m)
    form = w["multipart_etag_form"]
    assert form in ("md5-of-parts", "whole-md5"), w
    # until the form is known the mount expects MD5s of part MD5s: one pass,
    # plus one read-back pass when the server turns out to need the whole MD5
    assert w["hashed_bytes"] == SIZE * (1 if form == "md5-of-parts" else 2), w

    second = payload("hash-2", SIZE)
    cp(tmp_path, second, m.join("second.bin"))
    check_object(s3client, bucket, "second.bin", second)
    w2 = writes(m)
    assert w2["multipart_etag_form"] == form
    passes = 1 if form == "md5-of-parts" else 2
    assert w2["hashed_bytes"] - w["hashed_bytes"] == passes * SIZE, (w, w2)
    assert w2["verified_multipart" if form == "md5-of-parts" else "verified_md5"] >= 2, w2


def test_verify_read_hashes_the_whole_object_and_the_read_back(rw_mount, bucket, s3client,
                                                               tmp_path):
    m = rw_mount(bucket, "part_size=5M,verify=read")
    assert admin.wait_socket(m.path)
    data = payload("hash-read", SIZE)
    cp(tmp_path, data, m.join("read.bin"))
    check_object(s3client, bucket, "read.bin", data)
    w = writes(m)
    assert w["verified_read"] == 1, w
    # parts, the running whole MD5 and the read-back
    assert w["hashed_bytes"] == 3 * SIZE, w


def voluntary_switches(pid):
    """Voluntary context switches of every thread of pid, summed."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, t)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def test_a_commit_waiting_for_slow_parts_does_not_spin(mount, bucket, s3client, faultproxy,
                                                       cache_dir, tmp_path):
    """With as many parts in flight as allowed and each taking 400 ms, the
    close waits; the daemon must sleep meanwhile. Before the fix the commit
    and the upload workers woke each other in a loop (hundreds of thousands
    of context switches for these 40 MiB; now a few hundred)."""
    m = mount(bucket, "cache_dir=%s,part_size=5M,parts_in_flight=2" % cache_dir,
              endpoint=faultproxy.endpoint)
    (pid,) = daemon_pids(m.path)
    faultproxy.set_faults(latency={"first_byte_ms": 400, "kind": "UploadPart"})
    data = payload("spin", 40 * MiB)
    before = voluntary_switches(pid)
    cp(tmp_path, data, m.join("slow.bin"))  # 8 parts, 2 at a time: about 1.6 s of waiting
    switches = voluntary_switches(pid) - before
    check_object(s3client, bucket, "slow.bin", data)
    print("context switches: %d" % switches)
    assert switches < 20000, "%d context switches for a 40 MiB write" % switches
