"""Tar shards as the shard tests write them (tests/integration/test_shards.py,
tests/loaders/test_dali_style.py, tests/unit/shard/make_tars.py): members
whose bytes follow from their names, special members, and DALI's wds2idx
index of a shard."""

import hashlib
import io
import tarfile

# a WebDataset key of 240 bytes in a directory of 120: past ustar's 100 and 155
LONG_DIR = "d" * 120
LONG_KEY = "sample_" + "k" * 233
LONG_NAME = LONG_DIR + "/" + LONG_KEY + ".jpg"


def content(name, size):
    """size bytes that follow from name."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def add_file(tf, name, size, mode=0o644, mtime=1700000000, uid=1000, gid=1000):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime = size, mode, mtime
    ti.uid, ti.gid = uid, gid
    ti.uname, ti.gname = "u", "g"
    tf.addfile(ti, io.BytesIO(content(name, size)))


def add_special(tf, name, type_, link="", mode=0o755, mtime=1700000000):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode, ti.mtime = type_, link, mode, mtime
    ti.uid, ti.gid = 1000, 1000
    tf.addfile(ti)


def dali_samples(fileobj):
    """The samples of a tar as DALI's tools/wds2idx.py groups them (its
    tarfile fallback): regular files only, hidden ones left out, one list
    of (ext, data offset, size, name) per run of members sharing the part
    of the name before its first dot."""
    samples, last = [], None
    with tarfile.open(fileobj=fileobj) as tf:
        for ti in tf:
            if ti.type != tarfile.REGTYPE:
                continue
            name = ti.name
            dot = name.find(".", name.rfind("/") + 1)
            base, ext = name[:dot], name[dot + 1:]
            if not base or base.endswith("/"):
                continue
            if base != last:
                samples.append([])
                last = base
            samples[-1].append((ext, ti.offset_data, ti.size, name))
    return samples


def dali_index(data):
    """wds2idx.py's v1.2 index of the tar data (bytes): "v1.2 SAMPLES",
    then EXT OFFSET SIZE NAME per member, one line per sample."""
    samples = dali_samples(io.BytesIO(data))
    return ("v1.2 %d\n" % len(samples)
            + "".join(" ".join("%s %d %d %s" % m for m in s) + "\n" for s in samples)).encode()
