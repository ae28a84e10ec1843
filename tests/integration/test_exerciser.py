"""Random I/O on files in the mount, checked against a model (issue 17).

- A file opened read-write and closed without a write keeps its size and
  bytes (Python's "r+b", h5py's "r+" and "a" open files this way); so does a
  file whose earlier handle truncated it.
- omfsx (tools/omfsx.c, an fsx-style exerciser: pwrite with holes and
  extends, ftruncate up and down, pread, mmap read and write with msync,
  fsync, close+reopen, a second process reading) runs a few thousand
  operations on several files at once; after the last close each stored
  object must equal the exerciser's model, read with boto3 and through a
  fresh mount.
omfsx -P (processes: dup2, children holding descriptors) is in
test_exerciser_processes.py, a file of its own so that the test command's
workers run the two long parts side by side. The long runs (100,000
operations per file, with profile=training and through the fault proxy) are
in tools/bench (correctness section)."""

import os
import subprocess

import pytest

from harness.mount import MiB, payload
from harness.omtools import tool


def test_rdwr_open_close_keeps_size_and_bytes(rw_mount, bucket, s3client):
    data = payload("f.bin", 3 * MiB)
    with rw_mount(bucket) as m:
        p = os.path.join(m.path, "f.bin")
        with open(p, "wb") as f:
            f.write(data)
        for flags in (os.O_RDWR, os.O_WRONLY, os.O_RDWR | os.O_APPEND):
            fd = os.open(p, flags)
            os.close(fd)
            assert os.stat(p).st_size == len(data)
            with open(p, "rb") as f:
                assert f.read() == data
        with open(p, "r+b") as f:  # what h5py's "r+" and "a" do
            assert f.read(10) == data[:10]
        assert os.stat(p).st_size == len(data)
        with open(p, "rb") as f:
            assert f.read() == data
    body = s3client.get_object(Bucket=bucket, Key="f.bin")["Body"].read()
    assert body == data


def test_truncate_through_earlier_handle(rw_mount, bucket, s3client):
    data = payload("t.bin", 2 * MiB)
    with rw_mount(bucket) as m:
        p = os.path.join(m.path, "t.bin")
        with open(p, "wb") as f:
            f.write(data)
        a = os.open(p, os.O_RDWR)
        b = os.open(p, os.O_RDWR)
        os.ftruncate(a, 1000)
        os.close(b)  # a handle that wrote nothing: the size stays the truncated one
        assert os.fstat(a).st_size == 1000
        assert os.stat(p).st_size == 1000
        os.close(a)
        assert os.stat(p).st_size == 1000
        with open(p, "rb") as f:
            assert f.read() == data[:1000]
    assert s3client.get_object(Bucket=bucket, Key="t.bin")["Body"].read() == data[:1000]


def test_second_process_sees_writer_size(rw_mount, bucket):
    """A name looked up while another handle writes shows the writer's size."""
    with rw_mount(bucket, "entry_timeout=0,attr_timeout=0") as m:
        p = os.path.join(m.path, "w.bin")
        with open(p, "wb") as f:
            f.write(b"x" * 750000)
        fd = os.open(p, os.O_RDWR)
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"y" * 5000, 100)
        out = subprocess.run(["stat", "-c", "%s", p], capture_output=True, text=True)
        assert out.stdout.strip() == "5100"
        with open(p, "rb") as f:
            assert f.read() == b"\0" * 100 + b"y" * 5000
        os.close(fd)


def run_omfsx(path, models, seed, ops, files=4, extra=()):
    cmd = [tool("omfsx"), "-q", "-s", str(seed), "-n", str(ops), "-f", str(files),
           "-S", str(12 * MiB), "-m", models] + list(extra) + [path]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, "omfsx failed:\n%s\n%s" % (p.stdout[-6000:], p.stderr[-6000:])
    return p


@pytest.mark.parametrize("opts", ["", "profile=training"])
def test_omfsx_short(rw_mount, bucket, s3client, tmp_path, opts):
    models = str(tmp_path / "models")
    os.mkdir(models)
    with rw_mount(bucket, opts) as m:
        run_omfsx(m.path, models, seed=1, ops=1000)
    names = sorted(os.listdir(models))
    assert len(names) == 4
    for name in names:
        with open(os.path.join(models, name), "rb") as f:
            want = f.read()
        got = s3client.get_object(Bucket=bucket, Key=name)["Body"].read()
        assert len(got) == len(want), name
        assert got == want, name
    # and through a fresh mount, as the next job would read it
    with rw_mount(bucket, "ro") as m:
        for name in names:
            with open(os.path.join(models, name), "rb") as f:
                want = f.read()
            with open(os.path.join(m.path, name), "rb") as f:
                assert f.read() == want, name
