"""No secret, token or signature in the debug log of a full run, and keys
cannot forge log lines (issue 13).

A mount at log_level=debug writes, reads, lists, renames and deletes; then
the daemon's whole log is grepped for the secret it was given, on every
server. Where the server does not redirect, the mount goes through the fault
proxy's AIStore gateway emulation (every object request is a 307 to the
target, with a query in the Location); an AIStore cluster redirects itself
(the native API's 301s and 307s too)."""

import os

from harness import servers
from harness.mount import payload, seed

EVIL = "evil\u009b2Jkey\nnot-a-log-line.bin"  # C1 CSI and a newline: valid XML, not a log line


def test_debug_log_of_a_full_run_holds_no_secret(s3server, faultproxy, s3client, bucket, mount,
                                                 cache_dir):
    seed(s3client, bucket, {"data/a.bin": payload("a", 300000), EVIL: b"x"})
    real = s3server.kind in servers.AISTORE_KINDS
    m = mount(bucket, "log_level=debug,part_size=1M,cache_dir=%s" % cache_dir,
              endpoint=s3server.endpoint if real else faultproxy.gateway_endpoint)
    assert open(m.join("data/a.bin"), "rb").read() == payload("a", 300000)
    big = payload("big", 3 << 20)
    with open(m.join("data/big.bin"), "wb") as f:
        f.write(big)
    assert open(m.join("data/big.bin"), "rb").read() == big
    names = os.listdir(m.path)
    assert "data" in names
    # a HEAD for a key that must be logged escaped, if at all (the name as
    # the server lists it: AIStore keeps control characters as it likes)
    evil = [n for n in names if n.startswith("evil")]
    assert evil, names
    os.stat(m.join(evil[0]))
    os.rename(m.join("data/big.bin"), m.join("data/big2.bin"))
    os.unlink(m.join("data/big2.bin"))
    m.unmount()
    log = m.log
    if not real:
        assert faultproxy.redirects_issued() > 0
    if getattr(s3server, "redirects", True):  # not AIStore's reverse proxy
        assert "redirect 30" in log  # the debug log did see the redirects
    secret_given = servers.secret_key()
    assert secret_given and len(secret_given) >= 6
    for secret in (secret_given, "Signature=", "X-Amz-Signature", "x-amz-security-token",
                   "Authorization", "pid=", "utm="):
        assert secret not in log, "%r in the debug log" % secret
    assert "\x1b" not in log and "\r" not in log and "\u009b" not in log
    assert "\nnot-a-log-line" not in log
    assert all(ord(c) >= 0x20 or c in "\n\t" for c in log)
