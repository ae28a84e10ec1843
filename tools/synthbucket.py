#!/usr/bin/python3
"""A synthetic S3 bucket of N deterministic keys, none of them stored.

    /usr/bin/python3 tools/synthbucket.py --keys 1000000 [--fanout 32]
        [--per-dir 1000] [--depth D] [--size 1024] [--ext .jpg]
        [--bucket bench] [--port 0] [--latency-ms 0]

Prints one JSON line once it listens on 127.0.0.1 ({"endpoint", "port",
"bucket", "keys", "pid", ...}), then serves until SIGTERM/SIGINT.

Layout: a tree DEPTH directories deep, FANOUT directories per level, PER-DIR
files in each leaf directory; the N keys fill the leaves in order, so the
last leaf may be partial and the trailing leaves empty (they do not exist).
Key i is d<a>/d<b>/.../f<j>EXT with leaf = i // PER_DIR written in base
FANOUT (one digit per level) and j = i % PER_DIR:

    d0000/d0000/f000000.jpg ... d0000/d0000/f000999.jpg, d0000/d0001/f000000.jpg ...

Names have fixed widths (d%04d, f%06d at least), so the order of indexes is
the order of keys: every answer is computed from the structure (a binary
search over indexes for a prefix or a start key), never by filtering N keys.
Without --depth the tree is as shallow as fits N (depth 0: all at the root).

Content of every object (SIZE bytes): a filler shared by all objects,
then 64 bytes of sha256(key) in hex; with SIZE < 64 the first SIZE bytes of
that hex. The MD5 of the filler is computed once, so an ETag costs one MD5
of 64 bytes. ETag = quoted MD5 of the content, Last-Modified fixed
(2026-01-01T00:00:00Z).

S3 API answered (path style http://host/BUCKET/KEY, or virtual-host style
with a Host of BUCKET.anything):
  GET  /BUCKET?list-type=2   ListObjectsV2: prefix, delimiter, max-keys (at
                             most 1000), continuation-token, start-after,
                             encoding-type=url, fetch-owner (ignored)
  GET  /BUCKET               ListObjects (v1): prefix, delimiter, max-keys, marker
  GET  /BUCKET?location      GetBucketLocation (us-east-1)
  HEAD /BUCKET               HeadBucket
  HEAD|GET /BUCKET/KEY       HeadObject / GetObject with Range, If-Match,
                             If-None-Match; NoSuchKey (404) for keys not in the set
  GET  /                     ListBuckets
Anything else is 501 NotImplemented (writes: 403 AccessDenied). No signature
is checked: any credentials work. Listing pages: an entry (key or common
prefix) is returned when it sorts after the start (start-after, marker or the
continuation token, which is the last entry returned); so a common prefix
given as a start is not returned again.

Not S3: GET /__stats answers the requests counted by kind as JSON
(?reset=1 zeroes them after answering).

--latency-ms sleeps that long before answering every S3 request (each
request in its own thread, so concurrent requests overlap).
"""

import argparse
import base64
import email.utils
import hashlib
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

TAIL = 64  # key-specific bytes at the end of every object
FILLER_BLOCK = 64 * 1024
MTIME = 1767225600  # 2026-01-01T00:00:00Z
MTIME_ISO = "2026-01-01T00:00:00.000Z"
MTIME_HTTP = email.utils.formatdate(MTIME, usegmt=True)
MAX_KEYS = 1000
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
REGION = "us-east-1"


# -- the key set ---------------------------------------------------------------------
class Layout:
    """N keys in a tree; key(i) for 0 <= i < N, sorted by i."""

    def __init__(self, keys, fanout=32, per_dir=1000, depth=None, size=1024, ext=".jpg"):
        if keys < 0 or fanout < 1 or per_dir < 1 or size < 0:
            raise ValueError("keys >= 0, fanout >= 1, per-dir >= 1, size >= 0")
        if depth is None:
            depth = 0
            while per_dir * fanout ** depth < keys:
                depth += 1
        elif per_dir * fanout ** depth < keys:
            raise ValueError("%d keys do not fit %d levels of %d directories with %d files each"
                             % (keys, depth, fanout, per_dir))
        self.n, self.fanout, self.per_dir, self.depth = keys, fanout, per_dir, depth
        self.size, self.ext = size, ext
        self.dfmt = "d%%0%dd/" % max(4, len(str(fanout - 1)))
        self.ffmt = "f%%0%dd%s" % (max(6, len(str(per_dir - 1))), ext)
        self.divs = [fanout ** (depth - 1 - k) for k in range(depth)]
        # the shared filler: a repeated pseudo-random block
        blk, c = bytearray(), 0
        while len(blk) < FILLER_BLOCK:
            blk += hashlib.sha256(b"synthbucket filler %d" % c).digest()
            c += 1
        self.block = bytes(blk[:FILLER_BLOCK])
        self.filler_len = max(0, size - TAIL)
        h = hashlib.md5()
        left = self.filler_len
        while left:
            n = min(left, FILLER_BLOCK)
            h.update(self.block[:n])
            left -= n
        self.filler_md5 = h

    def key(self, i):
        leaf, j = divmod(i, self.per_dir)
        parts = []
        for d in self.divs:
            q, leaf = divmod(leaf, d)
            parts.append(self.dfmt % q)
        parts.append(self.ffmt % j)
        return "".join(parts)

    def index(self, key):
        """Index of key, or None when it is not in the set."""
        parts = key.split("/")
        if len(parts) != self.depth + 1:
            return None
        leaf = 0
        try:
            for p in parts[:-1]:
                if p[:1] != "d":
                    return None
                leaf = leaf * self.fanout + int(p[1:])
            f = parts[-1]
            if not (f.startswith("f") and f.endswith(self.ext)):
                return None
            j = int(f[1:len(f) - len(self.ext)])
        except ValueError:
            return None
        if j >= self.per_dir:
            return None
        i = leaf * self.per_dir + j
        if i >= self.n or self.key(i) != key:  # widths, signs, digits out of range
            return None
        return i

    def lower_bound(self, s, lo=0, hi=None, strict=False):
        """First i in [lo, hi) with key(i) >= s (> s when strict), else hi."""
        hi = self.n if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            k = self.key(mid)
            if k < s or (strict and k == s):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def prefix_end(self, p, lo=0, hi=None):
        """First i in [lo, hi) whose key does not start with p, given that
        keys from lo on start with p or sort after it."""
        hi = self.n if hi is None else hi
        n = len(p)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid)[:n] <= p:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # content
    def tail(self, key):
        return hashlib.sha256(key.encode()).hexdigest().encode()

    def etag(self, key):
        if self.size < TAIL:
            return hashlib.md5(self.tail(key)[:self.size]).hexdigest()
        h = self.filler_md5.copy()
        h.update(self.tail(key))
        return h.hexdigest()

    def chunks(self, key, start, end):
        """The content's bytes [start, end) in pieces of at most 64 KiB."""
        tail = self.tail(key)
        if self.size < TAIL:
            tail = tail[:self.size]
        pos = start
        while pos < end:
            if pos < self.filler_len:
                off = pos % FILLER_BLOCK
                n = min(end, self.filler_len, pos + FILLER_BLOCK - off) - pos
                yield self.block[off:off + n]
            else:
                t = pos - self.filler_len
                n = end - pos
                yield tail[t:t + n]
            pos += n

    def list_page(self, prefix, delimiter, start, max_keys):
        """([(key, is_prefix)], truncated): up to max_keys entries under prefix
        sorting after start ("" for none), common prefixes rolled up at
        delimiter ("" for none)."""
        lo = self.lower_bound(prefix)
        hi = self.prefix_end(prefix, lo)
        i = max(lo, self.lower_bound(start, lo, hi, strict=True)) if start else lo
        out, plen = [], len(prefix)
        while i < hi:
            k = self.key(i)
            cut = k.find(delimiter, plen) if delimiter else -1
            if cut < 0:
                if len(out) == max_keys:
                    return out, True
                out.append((k, False))
                i += 1
                continue
            cp = k[:cut + len(delimiter)]
            if cp > start:
                if len(out) == max_keys:
                    return out, True
                out.append((cp, True))
            i = self.prefix_end(cp, i, hi)
        return out, False


# -- request counting ---------------------------------------------------------------
class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.by_kind = {}
            self.total = 0
            self.body_bytes = 0
            self.listed_keys = 0
            self.listed_prefixes = 0
            self.list_seconds = 0.0
            self.since = time.time()

    def count(self, kind, body=0, keys=0, prefixes=0, list_s=0.0):
        with self.lock:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            self.total += 1
            self.body_bytes += body
            self.listed_keys += keys
            self.listed_prefixes += prefixes
            self.list_seconds += list_s

    def snapshot(self):
        with self.lock:
            return {"requests": {"total": self.total, "by_kind": dict(self.by_kind)},
                    "bytes": {"body_sent": self.body_bytes},
                    "listed": {"keys": self.listed_keys, "prefixes": self.listed_prefixes,
                               "seconds_building": round(self.list_seconds, 3)},
                    "since": self.since}


# -- HTTP --------------------------------------------------------------------------
def token_encode(s):
    return base64.urlsafe_b64encode(s.encode()).decode()


def token_decode(t):
    try:
        return base64.urlsafe_b64decode(t.encode() + b"=" * (-len(t) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "synthbucket"

    def log_message(self, fmt, *args):  # quiet: thousands of requests a second
        pass

    # -- replies
    def reply(self, status, body=b"", headers=None, ctype="application/xml", kind=None,
              length=None, count_body=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("x-amz-request-id", "%x" % threading.get_ident())
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        if kind:
            self.server.stats.count(kind, len(body) if count_body and self.command != "HEAD"
                                    else 0)

    def error(self, status, code, message, kind, resource=""):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
                '<Message>%s</Message><Resource>%s</Resource><RequestId>0</RequestId>'
                '</Error>' % (code, escape(message), escape(resource))).encode()
        self.reply(status, body, kind=kind)

    # -- routing
    def route(self):
        """(bucket or None, key or None, query dict) from Host and path."""
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = urllib.parse.unquote(url.path)
        host = (self.headers.get("Host") or "").split(":")[0]
        b = self.server.bucket
        if host.startswith(b + ".") and host != b + ".":
            return b, path[1:] or None, q
        parts = path[1:].split("/", 1)
        bucket = parts[0] or None
        key = parts[1] if len(parts) > 1 and parts[1] else None
        return bucket, key, q

    def handle_any(self):
        if self.path.startswith("/__stats"):
            snap = self.server.stats.snapshot()
            snap["bucket"] = self.server.describe()
            if "reset=1" in self.path:
                self.server.stats.reset()
            return self.reply(200, json.dumps(snap).encode(), ctype="application/json")
        if self.server.latency:
            time.sleep(self.server.latency)
        bucket, key, q = self.route()
        if self.command in ("PUT", "POST", "DELETE"):
            return self.error(403, "AccessDenied", "synthbucket is read-only", "Write")
        if bucket is None:
            return self.list_buckets()
        if bucket != self.server.bucket:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist",
                              "Other", bucket)
        if key is not None:
            return self.object(key)
        if self.command == "HEAD":
            return self.reply(200, headers={"x-amz-bucket-region": REGION}, kind="HeadBucket")
        if "location" in q:
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                    '<LocationConstraint xmlns="%s"></LocationConstraint>' % XMLNS).encode()
            return self.reply(200, body, kind="GetBucketLocation")
        others = set(q) - {"list-type", "prefix", "delimiter", "max-keys", "continuation-token",
                           "start-after", "encoding-type", "fetch-owner", "marker"}
        if others:
            return self.error(501, "NotImplemented", "synthbucket answers listings only",
                              "Other", "?" + ",".join(sorted(others)))
        return self.list_objects(q, v2=q.get("list-type") == "2")

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    def list_buckets(self):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="%s">'
                '<Owner><ID>synth</ID><DisplayName>synth</DisplayName></Owner><Buckets><Bucket>'
                '<Name>%s</Name><CreationDate>%s</CreationDate></Bucket></Buckets>'
                '</ListAllMyBucketsResult>' % (XMLNS, self.server.bucket, MTIME_ISO)).encode()
        self.reply(200, body, kind="ListBuckets")

    def list_objects(self, q, v2):
        kind = "ListObjectsV2" if v2 else "ListObjects"
        t0 = time.monotonic()
        lay = self.server.layout
        prefix = q.get("prefix", "")
        delim = q.get("delimiter", "")
        try:
            max_keys = int(q.get("max-keys", MAX_KEYS))
            if max_keys < 0:
                raise ValueError
        except ValueError:
            return self.error(400, "InvalidArgument", "max-keys", kind)
        max_keys = min(max_keys, MAX_KEYS)
        url = q.get("encoding-type") == "url"
        enc = (lambda s: urllib.parse.quote(s, safe="/")) if url else escape
        if v2:
            token = q.get("continuation-token")
            start = q.get("start-after", "")
            if token is not None:
                after = token_decode(token)
                if after is None:
                    return self.error(400, "InvalidArgument",
                                      "The continuation token provided is incorrect", kind)
                start = max(start, after)
        else:
            start = q.get("marker", "")
        entries, truncated = lay.list_page(prefix, delim, start, max_keys)
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="%s">'
               '<Name>%s</Name><Prefix>%s</Prefix>' % (XMLNS, self.server.bucket, enc(prefix))]
        if v2:
            if "start-after" in q:
                out.append("<StartAfter>%s</StartAfter>" % enc(q["start-after"]))
            if "continuation-token" in q:
                out.append("<ContinuationToken>%s</ContinuationToken>"
                           % escape(q["continuation-token"]))
            if truncated:
                out.append("<NextContinuationToken>%s</NextContinuationToken>"
                           % token_encode(entries[-1][0]))
            out.append("<KeyCount>%d</KeyCount>" % len(entries))
        else:
            out.append("<Marker>%s</Marker>" % enc(start))
            if truncated:
                out.append("<NextMarker>%s</NextMarker>" % enc(entries[-1][0]))
        out.append("<MaxKeys>%d</MaxKeys>" % max_keys)
        if delim:
            out.append("<Delimiter>%s</Delimiter>" % enc(delim))
        if url:
            out.append("<EncodingType>url</EncodingType>")
        out.append("<IsTruncated>%s</IsTruncated>" % ("true" if truncated else "false"))
        tail = ("</LastModified><ETag>&quot;%s&quot;</ETag><Size>" + str(lay.size)
                + "</Size><StorageClass>STANDARD</StorageClass></Contents>")
        keys = prefixes = 0
        for k, is_prefix in entries:
            if not is_prefix:
                keys += 1
                out.append("<Contents><Key>%s</Key><LastModified>%s" % (enc(k), MTIME_ISO))
                out.append(tail % lay.etag(k))
        for k, is_prefix in entries:
            if is_prefix:
                prefixes += 1
                out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % enc(k))
        out.append("</ListBucketResult>")
        body = "".join(out).encode()
        self.reply(200, body)
        self.server.stats.count(kind, len(body), keys, prefixes, time.monotonic() - t0)

    def object(self, key):
        kind = "HeadObject" if self.command == "HEAD" else "GetObject"
        lay = self.server.layout
        if lay.index(key) is None:
            return self.error(404, "NoSuchKey", "The specified key does not exist.", kind, key)
        etag = '"%s"' % lay.etag(key)
        headers = {"ETag": etag, "Last-Modified": MTIME_HTTP, "Accept-Ranges": "bytes"}
        im, inm = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if im and im.strip() != "*" and etag not in im and etag.strip('"') not in im:
            return self.error(412, "PreconditionFailed",
                              "At least one of the pre-conditions you specified did not hold",
                              kind, key)
        if inm and (inm.strip() == "*" or etag in inm):
            return self.reply(304, headers=headers, kind=kind)
        size, start, end, status = lay.size, 0, lay.size, 200
        rng = self.headers.get("Range")
        if rng and self.command == "GET":
            r = parse_range(rng, size)
            if r is None:
                headers["Content-Range"] = "bytes */%d" % size
                return self.error(416, "InvalidRange", "The requested range is not satisfiable",
                                  kind, key)
            if r is not False:
                start, end, status = r[0], r[1], 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, size)
                kind = "GetObjectRange"
        self.reply(status, headers=headers, ctype="image/jpeg", length=end - start, kind=None)
        sent = 0
        if self.command == "GET":
            for piece in lay.chunks(key, start, end):
                self.wfile.write(piece)
                sent += len(piece)
        self.server.stats.count(kind, sent)


def parse_range(h, size):
    """(start, end) of a single bytes range, False for a header to ignore
    (several ranges, or not bytes=), None when not satisfiable."""
    h = h.strip()
    if not h.startswith("bytes=") or "," in h:
        return False
    a, _, b = h[6:].partition("-")
    try:
        if a == "":
            n = int(b)
            if n <= 0:
                return None
            return max(0, size - n), size
        start = int(a)
        end = int(b) + 1 if b else size
    except ValueError:
        return False
    if start >= size or end <= start:
        return None
    return start, min(end, size)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, addr, layout, bucket, latency_ms):
        super().__init__(addr, Handler)
        self.layout = layout
        self.bucket = bucket
        self.latency = latency_ms / 1000.0
        self.stats = Stats()

    def describe(self):
        lay = self.layout
        return {"bucket": self.bucket, "keys": lay.n, "fanout": lay.fanout,
                "per_dir": lay.per_dir, "depth": lay.depth, "size": lay.size, "ext": lay.ext,
                "latency_ms": self.latency * 1000.0}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--keys", type=int, required=True, help="number of keys N")
    ap.add_argument("--fanout", type=int, default=32, help="directories per level (default 32)")
    ap.add_argument("--per-dir", type=int, default=1000,
                    help="files per leaf directory (default 1000)")
    ap.add_argument("--depth", type=int, default=None,
                    help="directory levels (default: the fewest that hold N)")
    ap.add_argument("--size", type=int, default=1024, help="bytes per object (default 1024)")
    ap.add_argument("--ext", default=".jpg", help="file name extension (default .jpg)")
    ap.add_argument("--bucket", default="bench", help="bucket name (default bench)")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="sleep before answering every S3 request (default 0)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        layout = Layout(args.keys, args.fanout, args.per_dir, args.depth, args.size, args.ext)
    except ValueError as e:
        sys.exit("synthbucket: %s" % e)
    srv = Server(("127.0.0.1", args.port), layout, args.bucket, args.latency_ms)

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = srv.server_address[1]
    info = dict(srv.describe(), endpoint="http://127.0.0.1:%d" % port, port=port, pid=os.getpid())
    print(json.dumps(info), flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
