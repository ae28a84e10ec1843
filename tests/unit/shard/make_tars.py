#!/usr/bin/python3
"""Write the tar shards of tests/unit/shard/test_shard_*.c into OUTDIR, as
Python's tarfile (and, for sparse files, GNU tar) writes them, each with an
expectation file NAME.expect read back by tarfile itself:

    type offset size mode uid gid mtime nsec sha256 name [link]

one line per member in tar order, tab-separated; type f (file), d (dir),
l (symlink), h (hard link, with its target's offset and size). Members
that objmount does not list (sparse files, FIFOs) are not in it; NAME.skip
says how many of each kind there are.

Beside each tar, the index objects WebDataset tools write for it: NAME.idx
in DALI's wds2idx format (v1.2, written here as wds2idx.py writes it from
tarfile: regular files grouped by sample, hidden ones left out) and, when
numpy is there, NAME.index.pN, wids' pickle (TarFileReader: the names and
np.array of [offset, size] of its regular files) in pickle protocol N.

    make_tars.py OUTDIR
    make_tars.py --fixtures DIR    the small committed fixtures of
                                   tests/unit/shard/fixtures (no numpy needed
                                   to read them back)
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from harness import tars  # noqa: E402
from harness.tars import LONG_DIR, LONG_KEY, LONG_NAME, add_file, add_special  # noqa: E402

out = sys.argv[1]


def members_common(tf, fraction):
    add_special(tf, "train", tarfile.DIRTYPE)
    add_file(tf, "train/000000.jpg", 110 * 1024 + 17, mtime=1700000001 + fraction)
    add_file(tf, "train/000000.cls", 1, mode=0o600)
    add_file(tf, "train/empty.txt", 0)  # a 0-byte member
    add_file(tf, LONG_NAME, 3000, uid=3000000, gid=4000000)  # base-256 or PAX ids
    add_file(tf, LONG_DIR + "/" + LONG_KEY + ".cls", 2)
    add_special(tf, "train/link-to-first", tarfile.SYMTYPE, "000000.jpg")
    add_special(tf, "train/long-link", tarfile.SYMTYPE, "../" + LONG_NAME)
    add_special(tf, "train/hard.jpg", tarfile.LNKTYPE, "train/000000.jpg", mode=0o644)
    add_special(tf, "train/fifo", tarfile.FIFOTYPE)
    add_file(tf, "./dot/slash.bin", 513)
    add_file(tf, "train/end.bin", 512)


def write(name, fmt, build, **kw):
    path = os.path.join(out, name)
    with tarfile.open(path, "w", format=fmt, **kw) as tf:
        build(tf)
    expect(path)
    dali_index(path)
    wids_index(path)


def sec_nsec(ti):
    """The mtime as written: PAX's exact text when there is one (tarfile's
    float loses the nanoseconds)."""
    text = ti.pax_headers.get("mtime")
    if text is None:
        return int(ti.mtime), 0
    whole, _, frac = text.partition(".")
    frac = int((frac + "000000000")[:9])
    sec = int(whole)
    if text.startswith("-") and frac:
        return sec - 1, 1000000000 - frac
    return sec, frac


def expect(path):
    lines, skipped = [], {"sparse": 0, "special": 0}
    data = open(path, "rb").read()
    with tarfile.open(path, "r") as tf:
        members = tf.getmembers()
    by_name = {}
    for ti in members:
        name = ti.name
        while name.startswith("./"):
            name = name[2:]
        if ti.issparse():
            skipped["sparse"] += 1
            continue
        if ti.isfifo() or ti.ischr() or ti.isblk():
            skipped["special"] += 1
            continue
        if ti.isreg():
            kind, off, size = "f", ti.offset_data, ti.size
            by_name[name] = ti
        elif ti.isdir():
            kind, off, size = "d", ti.offset_data, 0
        elif ti.issym():
            kind, off, size = "l", ti.offset_data, 0
        elif ti.islnk():
            target = by_name[ti.linkname]
            kind, off, size = "h", target.offset_data, target.size
        # an extracted hard link is its target's inode
        sec, nsec = sec_nsec(by_name[ti.linkname] if ti.islnk() else ti)
        digest = hashlib.sha256(data[off:off + size]).hexdigest()
        mode = (by_name[ti.linkname] if ti.islnk() else ti).mode & 0o7777
        uid = (by_name[ti.linkname] if ti.islnk() else ti).uid
        gid = (by_name[ti.linkname] if ti.islnk() else ti).gid
        fields = [kind, off, size, mode, uid, gid, sec, nsec, digest, name]
        if ti.issym() or ti.islnk():
            fields.append(ti.linkname)
        lines.append("\t".join(str(f) for f in fields))
    with open(path + ".expect", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(path + ".skip", "w") as f:
        f.write("%d %d\n" % (skipped["sparse"], skipped["special"]))


def dali_index(path):
    """wds2idx.py's v1.2 index of the tar at path, beside it as NAME.idx."""
    with open(path, "rb") as f:
        data = f.read()
    with open(path[:-len(".tar")] + ".idx", "wb") as f:
        f.write(tars.dali_index(data))


def wids_index(path, out_prefix=None):
    """wids' TarFileReader index, pickled in protocols 2 to 5 (and, for
    numpy 2's module names, protocol 2 with them)."""
    try:
        import numpy as np
    except ImportError:
        return
    import pickle
    tf = tarfile.open(path, "r")
    fnames, index = [], []
    for member in tf:
        if member.isfile():
            fnames.append(member.name)
            index.append([tf.fileobj.tell(), member.size])
    tf.close()
    arr = np.array(index)
    prefix = out_prefix or path + ".index"
    for proto in (2, 3, 4, 5):
        with open("%s.p%d" % (prefix, proto), "wb") as f:
            pickle.dump((fnames, arr), f, protocol=proto)
    data = pickle.dumps((fnames, arr), protocol=2)
    data = data.replace(b"cnumpy.core.multiarray\n", b"cnumpy._core.multiarray\n")
    with open("%s.np2.p2" % prefix, "wb") as f:
        f.write(data)


if len(sys.argv) == 3 and sys.argv[1] == "--fixtures":
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)

    def small(tf):
        add_file(tf, "s/000000.jpg", 700)
        add_file(tf, "s/000000.cls", 1)
        add_file(tf, "s/000001.jpg", 0)
        add_file(tf, "s/000001.cls", 2)

    path = os.path.join(out, "small.tar")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        small(tf)
    dali_index(path)
    wids_index(path, os.path.join(out, "small.tar.index"))
    with tarfile.open(os.path.join(out, "empty.tar"), "w") as tf:
        pass
    wids_index(os.path.join(out, "empty.tar"), os.path.join(out, "empty.tar.index"))
    sys.exit(0)

write("gnu.tar", tarfile.GNU_FORMAT, lambda tf: members_common(tf, 0))
write("pax.tar", tarfile.PAX_FORMAT, lambda tf: members_common(tf, 0.25))
write("ustar.tar", tarfile.USTAR_FORMAT,
      lambda tf: [add_file(tf, "p" * 150 + "/" + "n" * 90 + ".jpg", 700),
                  add_file(tf, "short.txt", 5)])


def many(tf):
    for i in range(550):
        add_file(tf, "%06d.jpg" % i, 100 + (i * 37) % 900, mtime=1700000000 + i)
        add_file(tf, "%06d.cls" % i, 1 + i % 3)


write("many.tar", tarfile.PAX_FORMAT, many)  # 1,100 members

# GNU tar's sparse files: old GNU ('S' headers) and PAX (GNU.sparse.* keys)
if shutil.which("tar"):
    src = os.path.join(out, "sparse-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "holes.bin"), "wb") as f:
        f.seek(5 << 20)
        f.write(b"x" * 4096)
        f.seek(9 << 20)
        f.write(b"y")
    with open(os.path.join(src, "plain.txt"), "wb") as f:
        f.write(b"plain\n")
    for fmt in ("gnu", "pax"):
        path = os.path.join(out, "sparse-%s.tar" % fmt)
        subprocess.run(["tar", "--sparse", "--format=" + fmt, "-cf", path, "-C", src,
                        "holes.bin", "plain.txt"], check=True)
        expect(path)
