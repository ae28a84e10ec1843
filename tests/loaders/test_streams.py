"""Sequential record formats read with Python's own file and tarfile APIs:
a TFRecord-style length-prefixed file and a WebDataset-style tar shard."""

import struct
import tarfile
import zlib

import pytest


def read_records(f):
    """Yield the payloads of a TFRecord-style file (see conftest.write_records),
    checking both crc32s; AssertionError on a torn or corrupt record."""
    n = 0
    while True:
        hdr = f.read(8)
        if not hdr:
            return
        assert len(hdr) == 8, "record %d: header cut after %d bytes" % (n, len(hdr))
        (crc,) = struct.unpack("<I", f.read(4))
        assert crc == zlib.crc32(hdr), "record %d: length crc mismatch" % n
        (length,) = struct.unpack("<Q", hdr)
        data = f.read(length)
        assert len(data) == length, "record %d: %d of %d payload bytes" % (n, len(data), length)
        (crc,) = struct.unpack("<I", f.read(4))
        assert crc == zlib.crc32(data), "record %d: payload crc mismatch" % n
        yield data
        n += 1


def test_length_prefixed_records_sequential(data_mount, loader_data, redirected):
    want = loader_data.records
    with redirected():
        for buffering in (-1, 0):  # Python's buffered reader, then raw read(2) calls
            with open(data_mount.join("records/train-00000.rec"), "rb",
                      buffering=buffering) as f:
                got = 0
                for i, rec in enumerate(read_records(f)):
                    assert i < len(want), "more records than written"
                    assert rec == want[i], "record %d (%d bytes) differs" % (i, len(want[i]))
                    got += 1
                assert got == len(want), "%d of %d records" % (got, len(want))
                assert f.read(1) == b""


@pytest.mark.parametrize("shard,buffering", [(0, -1), (1, 0)], ids=["buffered", "raw"])
def test_webdataset_tar_shard_streaming(data_mount, loader_data, redirected, shard, buffering):
    """tarfile's stream mode reads 10 KiB records and never seeks; `raw`
    hands it an unbuffered file, so each record is one read(2) on the mount."""
    key = "shards/shard-%06d.tar" % shard
    want = loader_data.tar_members[key]
    got = []
    path = data_mount.join(key)
    with redirected(), open(path, "rb", buffering=buffering) as f:
        with tarfile.open(fileobj=f, mode="r|") as tar:
            for member in tar:
                assert member.isfile(), member.name
                data = tar.extractfile(member).read()
                i = len(got)
                assert i < len(want), "extra member %s" % member.name
                assert member.name == want[i][0], "member %d: %s, want %s" % (
                    i, member.name, want[i][0])
                assert data == want[i][1], "%s: contents differ" % member.name
                got.append(member.name)
    assert len(got) == len(want)
    assert len({n.rsplit(".", 1)[0] for n in got}) == 240  # samples
