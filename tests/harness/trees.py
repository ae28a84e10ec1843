"""Directory trees and bucket contents, compared as data.

    from harness import trees
    want = trees.snapshot(src)                       # walks src (listing + lstat)
    got = trees.snapshot(dst, paths=list(want))      # lstat of exactly these paths,
                                                     # in order, without listing dst
    trees.assert_same(got, want, "after remount", fields=("type", "mode", "mtime"))
    trees.keys(s3client, bucket, prefix="d/")        # sorted keys, every page
    trees.exists(s3client, bucket, key)

snapshot(root, paths=None) -> {relpath: entry}; entry is a dict: type ("file",
"dir", "link"), mode (permission bits), uid, gid, mtime (whole seconds), size
and md5 (files), target (links). paths=None walks root top-down (os.walk, no
symlinks followed); "" is root itself and is left out.

assert_same(got, want, what, fields=None) fails with one line per difference
(missing/extra paths, then differing fields), so a broken round trip shows
every file at once.
"""

import hashlib
import os
import stat

from botocore.exceptions import ClientError

FIELDS = ("type", "mode", "uid", "gid", "mtime", "size", "md5", "target")


def _md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def entry(path):
    st = os.lstat(path)
    e = {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
         "mtime": int(st.st_mtime)}
    if stat.S_ISLNK(st.st_mode):
        e.update(type="link", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        e.update(type="dir")
    elif stat.S_ISREG(st.st_mode):
        e.update(type="file", size=st.st_size, md5=_md5(path))
    else:
        e.update(type="other")
    return e


def walk_paths(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(d, root)
        for n in sorted(dirs) + sorted(files):
            out.append(os.path.normpath(os.path.join(rel, n)))
    return out


def snapshot(root, paths=None):
    if paths is None:
        paths = walk_paths(root)
    return {p: entry(os.path.join(root, p)) for p in paths}


def assert_same(got, want, what, fields=None):
    fields = fields or FIELDS
    problems = []
    for p in sorted(set(want) - set(got)):
        problems.append("missing: %s" % p)
    for p in sorted(set(got) - set(want)):
        problems.append("unexpected: %s (%s)" % (p, got[p].get("type")))
    for p in sorted(set(got) & set(want)):
        for f in fields:
            if f not in want[p] and f not in got[p]:
                continue
            g, w = got[p].get(f), want[p].get(f)
            if g != w:
                if f == "mode":
                    g, w = oct(g) if g is not None else g, oct(w) if w is not None else w
                problems.append("%s: %s is %r, want %r" % (p, f, g, w))
    assert not problems, "%s: %d difference(s):\n  %s" % (what, len(problems),
                                                          "\n  ".join(problems))


# -- the bucket, seen with boto3 --------------------------------------------------------
def keys(s3client, bucket, prefix=""):
    out = []
    for page in s3client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.extend(o["Key"] for o in page.get("Contents", []))
    return sorted(out)


def exists(s3client, bucket, key):
    try:
        s3client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        if e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
