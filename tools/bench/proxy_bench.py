#!/usr/bin/python3
"""Is tools/faultproxy a bottleneck? Passthrough vs direct to the server, with curl.

    /usr/bin/python3 tools/bench/proxy_bench.py [--server KIND] [--size-mib 512] [--runs 5]
        [--small 500] [--small-size 4096]

Starts a private server (--server, default versitygw: tests/harness/servers.py;
not an AIStore, whose 307s curl would have to follow) and a fault proxy (no
faults), stores one large object and many small ones, then measures with
curl (GETs presigned for 24 h: versitygw and Swift refuse unsigned ones; the
proxy keeps the Host header, so one URL signed for each endpoint holds):
  - large GET, 1 stream and 4 parallel streams (aggregate MiB/s)
  - small GETs over one keep-alive connection, 1 and 4 parallel (requests/s)
for direct access and through the proxy, alternating, and prints medians
and the ratio proxy/direct. Output is a Markdown table (stdout).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from peers import presigner  # noqa: E402
from harness import servers  # noqa: E402  (path set up by peers)
from harness.faultproxy import FaultProxy  # noqa: E402

BUCKET = "bench"
SIGN = None  # url -> presigned url, set in main()


def curl_large(endpoint, streams):
    """Seconds to GET the large object `streams` times in parallel."""
    url = SIGN("%s/%s/large" % (endpoint, BUCKET))
    t0 = time.monotonic()
    procs = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null", url]) for _ in range(streams)]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("curl failed")
    return time.monotonic() - t0


def curl_small(endpoint, urls_file, parallel):
    """Seconds to GET every small object (keep-alive; --parallel when > 1)."""
    cmd = ["curl", "-sf", "--no-progress-meter", "-K", urls_file]
    if parallel > 1:
        cmd += ["--parallel", "--parallel-max", str(parallel)]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    global SIGN
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=[k for k in servers.KINDS
                                         if k not in servers.AISTORE_KINDS],
                    default=servers.DEFAULT, help="default %s" % servers.DEFAULT)
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--small-size", type=int, default=4096)
    args = ap.parse_args()

    servers.select(args.server)
    with servers.server_class(args.server)(buckets=[BUCKET]) as srv, FaultProxy(srv) as fp:
        SIGN = presigner(srv)
        s3 = srv.client()
        with tempfile.NamedTemporaryFile() as f:
            chunk = os.urandom(1 << 20)
            for _ in range(args.size_mib):
                f.write(chunk)
            f.flush()
            s3.upload_file(f.name, BUCKET, "large")
        small = os.urandom(args.small_size)
        for i in range(args.small):
            s3.put_object(Bucket=BUCKET, Key="small/%05d" % i, Body=small)

        lists = {}
        tmp = tempfile.mkdtemp(prefix="proxy-bench-")
        for name, ep in (("direct", srv.endpoint), ("proxy", fp.endpoint)):
            path = os.path.join(tmp, name + ".curl")
            with open(path, "w") as f:
                for i in range(args.small):
                    f.write('url = "%s"\noutput = "/dev/null"\n'
                            % SIGN("%s/%s/small/%05d" % (ep, BUCKET, i)))
            lists[name] = path

        endpoints = {"direct": srv.endpoint, "proxy": fp.endpoint}
        cases = [("large GET, 1 stream", "MiB/s", lambda ep, n: curl_large(ep, 1), args.size_mib),
                 ("large GET, 4 streams", "MiB/s", lambda ep, n: curl_large(ep, 4), 4 * args.size_mib),
                 ("small GETs, 1 connection", "req/s", lambda ep, n: curl_small(ep, lists[n], 1), args.small),
                 ("small GETs, 4 parallel", "req/s", lambda ep, n: curl_small(ep, lists[n], 4), args.small)]
        curl_large(srv.endpoint, 1)  # warm the page cache
        print("| case | unit | direct (median) | proxy (median) | proxy/direct |")
        print("|---|---|---|---|---|")
        for label, unit, fn, amount in cases:
            results = {"direct": [], "proxy": []}
            for _ in range(args.runs):
                for name in ("direct", "proxy"):  # alternate to share drift
                    results[name].append(amount / fn(endpoints[name], name))
            d = statistics.median(results["direct"])
            p = statistics.median(results["proxy"])
            print("| %s | %s | %.0f | %.0f | %.0f%% |" % (label, unit, d, p, 100.0 * p / d), flush=True)
        st = fp.stats()
        print("\nproxy saw %d requests, %d faults" % (st["requests"]["total"], sum(st["faults"].values())))


if __name__ == "__main__":
    main()
