"""How keys become a directory tree in an objmount mount.

Keys map to paths by '/'; `dir/` markers and common prefixes make
directories; a directory hides a file of the same name; names that cannot be
file names are skipped; a prefix mount shows only its subtree. Seeded with
boto3 on a fresh bucket per test."""

import errno
import http.client
import http.server
import os
import re
import stat
import subprocess
import threading
import urllib.parse
from xml.sax.saxutils import escape

import pytest

from harness.mount import check_bytes, payload, read_all, seed


def put(s3client, bucket, keys, size=None):
    """Upload keys (list, or dict key->size) with payload() bytes; returns {key: bytes}."""
    if not isinstance(keys, dict):
        keys = {k: (size if size is not None else 100 + i) for i, k in enumerate(keys)}
    objects = {k: (b"" if k.endswith("/") else payload(k, n)) for k, n in keys.items()}
    seed(s3client, bucket, objects)
    return objects


def ls_a(path):
    """Names exactly as readdir returned them, '.' and '..' included, in order."""
    p = subprocess.run(["ls", "-a1f", path], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [os.fsdecode(n) for n in p.stdout.split(b"\n")[:-1]]


UNICODE_KEYS = [
    "with space/file name.txt",
    "with space/ leading and trailing ",
    "unicode/d\u00e9j\u00e0 vu/\u65e5\u672c\u8a9e.txt",
    "unicode/\U0001f600.bin",
    "sym/!$&'()*,;=@[]+~%.txt",
    "sym/a+b c%20d",
    "sym/q?x=1#frag",
]


def test_keys_with_spaces_and_unicode_are_listed_and_read(mount, bucket, s3client):
    objects = put(s3client, bucket, UNICODE_KEYS)
    m = mount(bucket)
    assert sorted(os.listdir(m.path)) == ["sym", "unicode", "with space"]
    assert sorted(os.listdir(m.join("unicode"))) == ["d\u00e9j\u00e0 vu", "\U0001f600.bin"]
    assert sorted(os.listdir(m.join("sym"))) == sorted(
        k.split("/", 1)[1] for k in UNICODE_KEYS if k.startswith("sym/"))
    for key, data in objects.items():
        assert os.stat(m.join(key)).st_size == len(data), key
        check_bytes(read_all(m.join(key)), data, key)


def test_1100_keys_in_one_directory_are_all_listed(mount, bucket, s3client):
    files = {"many/k%04d.bin" % i: i % 7 for i in range(1100)}
    subdirs = {"many/sub%02d/x" % i: 1 for i in range(0, 60, 12)}
    put(s3client, bucket, {**files, **subdirs})
    m = mount(bucket)
    want_files = {k.split("/")[1] for k in files}
    want_dirs = {k.split("/")[1] for k in subdirs}
    names = os.listdir(m.join("many"))
    assert len(names) == len(want_files) + len(want_dirs), "duplicates or missing names"
    assert set(names) == want_files | want_dirs
    with os.scandir(m.join("many")) as it:
        entries = {e.name: e for e in it}
    assert set(entries) == want_files | want_dirs
    for name in want_dirs:
        assert entries[name].is_dir() and not entries[name].is_file()
    for name in want_files:
        e = entries[name]
        assert e.is_file() and not e.is_dir()
        assert e.stat().st_size == files["many/" + name], name
    # a second listing (cached or not) is the same
    assert sorted(os.listdir(m.join("many"))) == sorted(names)


def test_nested_directories_walk_like_the_keys(mount, bucket, s3client):
    keys = ["deep/a/b/c/d/e.txt", "deep/a/b/f.txt", "deep/a/g/h.txt", "deep/i.txt",
            "deep/a/b/c/j.txt", "top.txt"]
    objects = put(s3client, bucket, keys)
    m = mount(bucket)
    walked = {}
    for root, dirs, files in os.walk(m.join("deep")):
        walked[os.path.relpath(root, m.path)] = (sorted(dirs), sorted(files))
    assert walked == {
        "deep": (["a"], ["i.txt"]),
        "deep/a": (["b", "g"], []),
        "deep/a/b": (["c"], ["f.txt"]),
        "deep/a/b/c": (["d"], ["j.txt"]),
        "deep/a/b/c/d": ([], ["e.txt"]),
        "deep/a/g": ([], ["h.txt"]),
    }
    for d in ("deep", "deep/a", "deep/a/b/c/d"):
        assert stat.S_ISDIR(os.stat(m.join(d)).st_mode), d
    for key, data in objects.items():
        check_bytes(read_all(m.join(key)), data, key)


def test_cold_lookup_of_deep_path_without_listing(mount, bucket, s3client):
    objects = put(s3client, bucket, ["x/y/z/w.bin"])
    m = mount(bucket)
    # nothing listed first: every component is looked up cold
    assert os.stat(m.join("x/y/z/w.bin")).st_size == len(objects["x/y/z/w.bin"])
    assert stat.S_ISDIR(os.stat(m.join("x/y")).st_mode)
    check_bytes(read_all(m.join("x/y/z/w.bin")), objects["x/y/z/w.bin"], "w.bin")


def test_marker_only_directories_are_empty_directories(mount, bucket, s3client):
    objects = put(s3client, bucket, ["empty/", "nested/empty2/", "withmarker/",
                                     "withmarker/f", "file"])
    m = mount(bucket)
    assert sorted(os.listdir(m.path)) == ["empty", "file", "nested", "withmarker"]
    for d in ("empty", "nested", "nested/empty2", "withmarker"):
        assert stat.S_ISDIR(os.stat(m.join(d)).st_mode), d
    assert os.listdir(m.join("empty")) == []
    assert ls_a(m.join("empty")).count(".") == 1 and len(ls_a(m.join("empty"))) == 2
    assert os.listdir(m.join("nested")) == ["empty2"]
    assert os.listdir(m.join("nested/empty2")) == []
    assert os.listdir(m.join("withmarker")) == ["f"]  # the marker is not an entry
    check_bytes(read_all(m.join("withmarker/f")), objects["withmarker/f"], "withmarker/f")
    with os.scandir(m.path) as it:
        kinds = {e.name: e.is_dir() for e in it}
    assert kinds == {"empty": True, "file": False, "nested": True, "withmarker": True}


def test_marker_directory_stat_is_cold_lookup(mount, bucket, s3client):
    put(s3client, bucket, ["empty/", "nested/empty2/"])
    m = mount(bucket)
    # stat before any listing: the lookup alone must find the marker
    assert stat.S_ISDIR(os.stat(m.join("nested/empty2")).st_mode)
    assert stat.S_ISDIR(os.stat(m.join("empty")).st_mode)
    assert os.listdir(m.join("empty")) == []


def test_directory_wins_over_file_of_same_name(mount, bucket, s3client):
    objects = put(s3client, bucket, ["a", "a/b", "c", "c/", "d/", "d/e", "d/e/f"])
    m = mount(bucket)
    names = ls_a(m.path)
    assert sorted(names) == [".", "..", "a", "c", "d"], "each name exactly once"
    for d in ("a", "c", "d", "d/e"):
        assert stat.S_ISDIR(os.stat(m.join(d)).st_mode), d
    assert os.listdir(m.join("a")) == ["b"]
    assert os.listdir(m.join("c")) == []
    assert os.listdir(m.join("d")) == ["e"]
    assert os.listdir(m.join("d/e")) == ["f"]
    check_bytes(read_all(m.join("a/b")), objects["a/b"], "a/b")
    check_bytes(read_all(m.join("d/e/f")), objects["d/e/f"], "d/e/f")
    with pytest.raises(IsADirectoryError):
        open(m.join("a"), "rb").read()


def test_cold_lookup_prefers_directory_over_file(mount, bucket, s3client):
    put(s3client, bucket, ["a", "a/b", "c", "c/"])
    m = mount(bucket)
    # no readdir first: lookup sees the file `a` (HEAD) and the prefix `a/` (LIST)
    st = os.stat(m.join("a"))
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_ISDIR(os.stat(m.join("c")).st_mode)
    assert os.path.isfile(m.join("a/b"))
    assert sorted(os.listdir(m.path)) == ["a", "c"]
    assert stat.S_ISDIR(os.stat(m.join("a")).st_mode)


PREFIX_KEYS = ["train/x.bin", "train/sub/y.bin", "train/sub/deeper/z.bin", "trainX/z",
               "train.txt", "other/w", "top"]


@pytest.mark.parametrize("prefix", ["train", "train/", "/train"])
def test_prefix_mount_shows_only_subtree(mount, bucket, s3client, prefix):
    objects = put(s3client, bucket, PREFIX_KEYS)
    m = mount(bucket, prefix=prefix)
    assert sorted(os.listdir(m.path)) == ["sub", "x.bin"]
    assert sorted(os.listdir(m.join("sub"))) == ["deeper", "y.bin"]
    check_bytes(read_all(m.join("x.bin")), objects["train/x.bin"], "x.bin")
    check_bytes(read_all(m.join("sub/deeper/z.bin")), objects["train/sub/deeper/z.bin"], "z.bin")
    for outside in ("trainX", "train.txt", "other", "top", "train", "x"):
        assert not os.path.exists(m.join(outside)), outside


def test_nested_prefix_mount(mount, bucket, s3client):
    objects = put(s3client, bucket, PREFIX_KEYS)
    m = mount(bucket, prefix="train/sub")
    assert sorted(os.listdir(m.path)) == ["deeper", "y.bin"]
    check_bytes(read_all(m.join("y.bin")), objects["train/sub/y.bin"], "y.bin")


# -- names that cannot be file names ------------------------------------------------
class ListingInjector:
    """An HTTP proxy to the server that forwards every request unchanged
    (method, path, query and Host as sent, so SigV4 still verifies) and adds
    entries to ListObjectsV2 answers with delimiter '/' for one prefix: keys
    a server cannot store (an empty segment from `a//b`, a 256-byte name, and
    on posix-backed servers `.` and `..`)."""

    def __init__(self, upstream, prefix, keys=(), prefixes=()):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.prefix, self.keys, self.prefixes = prefix, list(keys), list(prefixes)
        self.injected = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(owner.upstream.hostname, owner.upstream.port,
                                                  timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        conn.putheader(k, v)
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if self.command == "GET" and resp.status == 200:
                    data = owner.rewrite(self.path, data)
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() in ("content-length", "transfer-encoding", "connection",
                                     "date", "server"):
                        continue
                    self.send_header(k, v)
                if self.command == "HEAD":
                    self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
                    self.end_headers()
                else:
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # the upstream's path too (AIStore's S3 API is under /s3)
        self.endpoint = "http://127.0.0.1:%d%s" % (self.server.server_address[1],
                                                   self.upstream.path.rstrip("/"))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def rewrite(self, path, data):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query, keep_blank_values=True)
        if q.get("list-type") != ["2"] or q.get("delimiter") != ["/"] \
                or q.get("prefix") != [self.prefix]:
            return data
        url = q.get("encoding-type") == ["url"]

        def enc(s):
            return escape(urllib.parse.quote(s, safe="/") if url else s)

        text = data.decode()
        contents = "".join(
            "<Contents><Key>%s</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
            "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>" % enc(k) for k in self.keys)
        prefixes = "".join("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % enc(p)
                           for p in self.prefixes)
        # keep S3's order: extra keys sort after the real ones, extra prefixes before
        i = text.rfind("</Contents>")
        if i >= 0:
            i += len("</Contents>")
        else:
            j = text.find("<CommonPrefixes>")
            i = j if j >= 0 else text.rfind("</ListBucketResult>")
        text = text[:i] + contents + text[i:]
        j = text.find("<CommonPrefixes>")
        j = j if j >= 0 else text.rfind("</ListBucketResult>")
        text = text[:j] + prefixes + text[j:]
        text = re.sub(r"<KeyCount>(\d+)</KeyCount>", lambda mo: "<KeyCount>%d</KeyCount>" % (
            int(mo.group(1)) + len(self.keys) + len(self.prefixes)), text)
        self.injected += 1
        return text.encode()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_odd_names_are_skipped(mount, bucket, s3client, s3server):
    long_ok = "n" * 255
    # `odd/.` and `odd/..` are stored where the server can (Swift); where
    # keys are paths of a posix tree (versitygw, AIStore) they are listed by
    # the injector: objmount sees the same listing
    dots = ["odd/.", "odd/.."]
    storable = s3server.kind == "swift"
    objects = put(s3client, bucket, ["odd/ok", "odd/%s/z" % long_ok, "odd/zz", "fine"]
                  + (dots if storable else []))
    with ListingInjector(s3server.endpoint, "odd/",
                         keys=["odd/" + "z" * 256] + ([] if storable else dots),
                         prefixes=["odd//"]) as inj:
        m = mount(bucket, endpoint=inj.endpoint)
        names = ls_a(m.join("odd"))
        assert sorted(names) == sorted([".", "..", "ok", long_ok, "zz"]), \
            "'.', '..', '' and a 256-byte name must be skipped, each valid name listed once"
        assert inj.injected >= 1, "the listing of odd/ did not go through the injector"
        assert stat.S_ISDIR(os.stat(m.join("odd", long_ok)).st_mode)
        check_bytes(read_all(m.join("odd", long_ok, "z")), objects["odd/%s/z" % long_ok], "z")
        check_bytes(read_all(m.join("odd/ok")), objects["odd/ok"], "odd/ok")
        check_bytes(read_all(m.join("odd/zz")), objects["odd/zz"], "odd/zz")
        with os.scandir(m.join("odd")) as it:
            for e in it:
                e.stat()  # every listed entry can be stat'ed
        assert sorted(os.listdir(m.path)) == ["fine", "odd"]
        m.check_alive()


# -- stat fields --------------------------------------------------------------------
def test_stat_fields_match_objects(mount, bucket, s3client):
    keys = {"f0": 0, "f1": 1, "d/f2": 123457, "d/e/f3": 2 * 1024 * 1024 + 3}
    put(s3client, bucket, keys)
    listed = {o["Key"]: o for o in s3client.list_objects_v2(Bucket=bucket)["Contents"]}

    def check(m, st, key):
        assert stat.S_ISREG(st.st_mode), key
        assert st.st_size == keys[key], key
        lm = listed[key]["LastModified"].timestamp()
        assert abs(st.st_mtime - lm) <= 2, "%s: mtime %s, LastModified %s" % (key, st.st_mtime, lm)
        assert st.st_nlink >= 1
        assert st.st_blocks * 512 >= st.st_size, "%s: st_blocks %d for %d bytes" % (
            key, st.st_blocks, st.st_size)

    m = mount(bucket)
    for key in keys:  # cold lookups
        check(m, os.stat(m.join(key)), key)
    for d in ("d", "d/e"):
        st = os.stat(m.join(d))
        assert stat.S_ISDIR(st.st_mode) and st.st_nlink >= 1
    root = os.stat(m.path)
    assert stat.S_ISDIR(root.st_mode)
    m2 = mount(bucket)
    for parent in ("", "d", "d/e"):  # attributes primed by the listing
        with os.scandir(m2.join(parent)) as it:
            for e in it:
                key = os.path.join(parent, e.name)
                if key in keys:
                    check(m2, e.stat(), key)
                    check(m2, os.lstat(m2.join(key)), key)


def test_inode_numbers_are_stable_and_distinct(mount, bucket, s3client):
    put(s3client, bucket, ["a/1", "a/2", "b/3", "c"])
    m = mount(bucket)
    paths = ["a", "a/1", "a/2", "b", "b/3", "c"]
    first = {p: os.stat(m.join(p)).st_ino for p in paths}
    assert len(set(first.values())) == len(paths), first
    for _ in range(2):
        for root, dirs, files in os.walk(m.path):
            pass
        with os.scandir(m.join("a")) as it:
            for e in it:
                assert e.inode() == first["a/" + e.name]
        assert {p: os.stat(m.join(p)).st_ino for p in paths} == first


def test_missing_names_are_enoent(mount, bucket, s3client):
    put(s3client, bucket, ["dir/file"])
    m = mount(bucket)
    for p in ("nope", "dir/nope", "dir/file/below", "nope/deeper"):
        with pytest.raises(OSError) as ei:
            os.stat(m.join(p))
        assert ei.value.errno in (errno.ENOENT, errno.ENOTDIR), p
    with pytest.raises(FileNotFoundError):
        open(m.join("dir/nope"), "rb")
    with pytest.raises(NotADirectoryError):
        os.listdir(m.join("dir/file"))
    # asking twice (negative entry cached or not) gives the same answer
    with pytest.raises(FileNotFoundError):
        os.stat(m.join("nope"))


def test_statfs_reports_large_values(mount, bucket):
    m = mount(bucket)
    sv = os.statvfs(m.path)
    assert sv.f_bsize > 0 and sv.f_frsize > 0
    assert sv.f_blocks * sv.f_frsize >= 1 << 40, sv
    assert sv.f_bavail * sv.f_frsize >= 1 << 40, sv
    assert sv.f_bfree >= sv.f_bavail
    assert sv.f_namemax >= 255, sv
    p = subprocess.run(["df", "-P", m.path], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


# -- ownership and modes -------------------------------------------------------------
def test_uid_gid_file_mode_dir_mode_options(mount, bucket, s3client):
    put(s3client, bucket, ["d/f", "g"])
    m = mount(bucket, "uid=1234,gid=2345,file_mode=0640,dir_mode=0750")
    for p, mode, isdir in (("", 0o750, True), ("d", 0o750, True), ("d/f", 0o640, False),
                           ("g", 0o640, False)):
        st = os.stat(m.join(p))
        assert (st.st_uid, st.st_gid) == (1234, 2345), p
        assert stat.S_IMODE(st.st_mode) == mode, "%s: %o" % (p, stat.S_IMODE(st.st_mode))
        assert stat.S_ISDIR(st.st_mode) == isdir


def test_default_owner_is_the_mounting_user(mount, bucket, s3client):
    put(s3client, bucket, ["d/f"])
    m = mount(bucket)
    for p in ("", "d", "d/f"):
        st = os.stat(m.join(p))
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), p
    assert os.access(m.join("d/f"), os.R_OK)


def test_umask_option_masks_modes(mount, bucket, s3client):
    put(s3client, bucket, ["d/f"])
    m = mount(bucket, "umask=0027")
    for p in ("", "d", "d/f"):
        mode = stat.S_IMODE(os.stat(m.join(p)).st_mode)
        assert mode & 0o027 == 0, "%s: %o" % (p, mode)
        assert mode & 0o400, "%s: %o (owner must be able to read)" % (p, mode)
    assert stat.S_IMODE(os.stat(m.join("d")).st_mode) & 0o100


def test_ro_option_refuses_changes(mount, bucket, s3client):
    objects = put(s3client, bucket, ["d/f"])
    m = mount(bucket, "ro")
    for action in (lambda: open(m.join("new"), "wb"),
                   lambda: open(m.join("d/f"), "r+b"),
                   lambda: os.mkdir(m.join("newdir")),
                   lambda: os.unlink(m.join("d/f")),
                   lambda: os.rename(m.join("d/f"), m.join("d/g"))):
        with pytest.raises(OSError) as ei:
            action()
        assert ei.value.errno == errno.EROFS
    check_bytes(read_all(m.join("d/f")), objects["d/f"], "d/f")
    assert s3client.list_objects_v2(Bucket=bucket)["KeyCount"] == 1


def _stat_as_nobody(path):
    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    return subprocess.run(["stat", "-c", "%u", path], capture_output=True, text=True,
                          timeout=30, preexec_fn=drop)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_allow_other_lets_other_users_in(mount, bucket, s3client):
    put(s3client, bucket, ["f"])
    private = mount(bucket)
    assert _stat_as_nobody(private.join("f")).returncode != 0, \
        "without allow_other another user must not reach the mount"
    shared = mount(bucket, "allow_other")
    p = _stat_as_nobody(shared.join("f"))
    assert p.returncode == 0, p.stderr
