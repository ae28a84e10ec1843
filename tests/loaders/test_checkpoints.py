"""torch.save writes a state dict through the mount (fsync before close);
torch.load reads it back through the mount and from the stored object."""

import io
import os

import pytest

from harness.mount import get_object

torch = pytest.importorskip("torch")


def state_dict():
    """~20 MB of tensors (a multipart upload at the default 8 MiB parts) and
    the bookkeeping a training checkpoint carries."""
    g = torch.Generator().manual_seed(14)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(4096, 1200), torch.nn.Linear(1200, 10))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return {"model": model.state_dict(), "epoch": 7, "step": 123456,
            "lr": torch.tensor([0.1, 0.01], dtype=torch.float64),
            "mask": torch.randint(0, 2, (1000,), generator=g, dtype=torch.bool),
            "ids": torch.arange(5000, dtype=torch.int64).reshape(50, 100).t()}


def check_same(got, want, where):
    assert got.keys() == want.keys(), where
    assert (got["epoch"], got["step"]) == (want["epoch"], want["step"]), where
    for name in ("lr", "mask", "ids"):
        assert got[name].dtype == want[name].dtype and torch.equal(got[name], want[name]), \
            "%s: %s differs" % (where, name)
    assert list(got["model"]) == list(want["model"]), where
    for k, t in want["model"].items():
        assert torch.equal(got["model"][k], t), "%s: model.%s differs" % (where, k)


def test_torch_save_fsync_then_load(mount, bucket, s3client, redirected, nothing_recovered):
    want = state_dict()
    m = mount(bucket)
    path = m.join("ckpt", "epoch7.pt")
    os.mkdir(m.join("ckpt"))
    with redirected("torch.save + fsync"):
        with open(path, "wb") as f:
            torch.save(want, f)
            f.flush()
            os.fsync(f.fileno())  # the commit: it must have stored the object
            stored = get_object(s3client, bucket, "ckpt/epoch7.pt")
    check_same(torch.load(io.BytesIO(stored)), want, "object after fsync")
    check_same(torch.load(path), want, "through the mount")
    m.unmount()
    assert get_object(s3client, bucket, "ckpt/epoch7.pt") == stored
    m2 = mount(bucket)
    with redirected("torch.load after remount"):
        check_same(torch.load(m2.join("ckpt", "epoch7.pt")), want, "after remount")
    nothing_recovered()
