"""A PyTorch checkpoint of more than 200 MiB stored in a real AIStore
cluster through the mount, with the fault proxy between objmount and the
cluster cutting answers short and answering 5xx in bursts.

DLIO's AIStore storage type checkpoints to local disk without saying so
(the seeds' gap); here torch.save goes to the bucket, and what is read back,
through the mount and straight from the cluster, is the state saved. The
proxy sits in front of the cluster's proxy and, with --hop-redirects, in
front of its targets too (their 307s are sent back through it), so the
faults reach every request objmount makes. Runs on the AIStore kinds
(tests/matrix.py).
"""

import hashlib
import io
import os

import pytest

from harness import admin
from harness.mount import MiB, get_object

torch = pytest.importorskip("torch")

OPTS = "retry_base=0.05,retry_max=2,part_size=8M"
# float32 elements of the model's weights: 52.5 M, 210 MiB
ELEMENTS = 55_000_000


def state_dict():
    g = torch.Generator().manual_seed(34)
    layers = {"layer%d.weight" % i: torch.randn(ELEMENTS // 5, generator=g).reshape(-1, 1000)
              for i in range(5)}
    return {"model": layers, "epoch": 3, "step": 9000,
            "optimizer": {"lr": 0.01, "momentum": torch.zeros(1000)}}


def check_same(got, want, where):
    assert (got["epoch"], got["step"]) == (want["epoch"], want["step"]), where
    assert list(got["model"]) == list(want["model"]), where
    for k, t in want["model"].items():
        assert torch.equal(got["model"][k], t), "%s: %s differs" % (where, k)
    assert torch.equal(got["optimizer"]["momentum"], want["optimizer"]["momentum"]), where


def test_a_checkpoint_over_200_mib_survives_truncations_and_5xx_bursts(
        mount, bucket, s3client, faultproxy, cache_dir):
    want = state_dict()
    buf = io.BytesIO()
    torch.save(want, buf)
    saved = buf.getvalue()
    assert len(saved) > 200 * MiB
    endpoint = faultproxy.endpoint
    opts = "cache_dir=%s,rw,%s" % (cache_dir, OPTS)

    # writes: three 503s in a row on part uploads, then on the single
    # requests of the commit (its HEAD, the completion)
    faultproxy.set_faults(errors={"status": 503, "code": "SlowDown", "method": "PUT",
                                  "nth": 3, "count": 3})
    m = mount(bucket, opts, endpoint=endpoint)
    path = m.join("ckpt", "epoch3.pt")
    os.mkdir(m.join("ckpt"))
    with open(path, "wb") as f:
        torch.save(want, f)
        f.flush()
        os.fsync(f.fileno())  # the commit: it must have stored the object
    assert faultproxy.faults_injected("errors") == 3, faultproxy.stats()["faults"]
    w = admin.stats_json(m.path)["writes"]
    proven = w["verified_md5"] + w["verified_multipart"] + w["verified_checksum"]
    assert proven == 1 and w["verified_size_only"] == 0, str(w)
    stored = get_object(s3client, bucket, "ckpt/epoch3.pt")
    assert hashlib.sha256(stored).digest() == hashlib.sha256(saved).digest(), \
        "the stored object is not the checkpoint torch.save wrote"
    m.unmount()
    assert not os.listdir(os.path.join(cache_dir, "recovery"))

    # reads: GETs cut short (Content-Length still the whole) and 5xx bursts
    faultproxy.reset_stats()
    faultproxy.set_faults(truncate={"fraction": 0.5, "method": "GET", "nth": 2, "count": 3},
                          errors={"status": 500, "method": "GET", "nth": 6, "count": 3})
    m2 = mount(bucket, opts, endpoint=endpoint)
    check_same(torch.load(m2.join("ckpt", "epoch3.pt")), want, "through the mount")
    got = faultproxy.stats()["faults"]
    assert faultproxy.faults_injected("truncate") == 3, got
    assert faultproxy.faults_injected("errors") == 3, got
    assert admin.stats_json(m2.path)["requests"]["retries"] >= 6
