#!/usr/bin/python3
"""Measure how a test server of the harness behaves towards an S3 client.

Starts a private server of tests/harness/servers.py (versitygw by default),
runs each probe with raw signed HTTP requests (botocore's SigV4 signer, no
retries) or boto3, and prints one line per fact. It is the successor of
tools/node/probe_s3rver.py (s3rver's facts, measured on its patched 3.7.1,
are kept in doc/decisions.md, "versitygw instead of s3rver", beside what
this script measured on versitygw):

    /usr/bin/python3 tools/probe_s3.py [--server versitygw|swift|aistore|aistore-proxy]

Raw requests to an AIStore follow its 307s (same method, body and
headers, to the Location as given), as objmount does.
"""

import argparse
import base64
import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from botocore.exceptions import ClientError  # noqa: E402

from harness import servers  # noqa: E402
from harness.rawhttp import sign_headers  # noqa: E402

MiB = 1 << 20


class Raw:
    """Signed raw requests to the server's S3 endpoint (path prefix kept)."""

    def __init__(self, srv):
        self.srv = srv
        u = urllib.parse.urlsplit(srv.endpoint)
        self.host, self.port, self.prefix = u.hostname, u.port, u.path.rstrip("/")

    def sign(self, method, path, body=b"", headers=None, secret=None, payload_hash=None,
             sign_host=None):
        """Headers of the request signed with the server's keys (secret:
        another secret; sign_host: signed for another Host, sent to this one)."""
        host = sign_host or "%s:%d" % (self.host, self.port)
        hdrs = sign_headers(method, "http://%s%s" % (host, path), body, headers, payload_hash,
                            access_key=self.srv.access_key,
                            secret_key=self.srv.secret_key if secret is None else secret,
                            region=self.srv.region)
        hdrs["Host"] = "%s:%d" % (self.host, self.port)
        return hdrs

    def req(self, method, path, body=b"", headers=None, sign=True, secret=None,
            payload_hash=None, sign_host=None):
        path = self.prefix + path
        headers = dict(headers or {})
        if sign:
            headers = self.sign(method, path, body, headers, secret, payload_hash, sign_host)
        host, port = self.host, self.port
        for _ in range(4):
            conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            loc = resp.getheader("Location")
            if resp.status not in (301, 302, 307, 308) or not loc:
                break
            u = urllib.parse.urlsplit(loc)
            host, port = u.hostname, u.port
            path = u.path + ("?" + u.query if u.query else "")
        return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data


def code_of(body):
    s = body.decode("utf-8", "replace")
    if "<Code>" in s:
        return s.split("<Code>", 1)[1].split("</Code>", 1)[0]
    return ""


def fact(name, value):
    print("%-58s %s" % (name, value), flush=True)


def attempt(name, fn):
    """fact(name, fn()), or the error it raised."""
    try:
        fact(name, fn())
    except ClientError as e:
        fact(name, "%d %s" % (e.response["ResponseMetadata"]["HTTPStatusCode"],
                              e.response["Error"]["Code"]))
    except Exception as e:  # noqa: BLE001 - a probe reports, never stops
        fact(name, "ERROR %s: %s" % (type(e).__name__, str(e)[:120]))


def probe_listing(srv, s3):
    keys = {"many/k%05d" % i: b"x" for i in range(1100)}
    rest = srv.store_objects("probe", keys)
    for k, v in rest.items():
        s3.put_object(Bucket="probe", Key=k, Body=v)
    pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket="probe", Prefix="many/"))
    fact("ListObjectsV2 1100 keys: pages / keys",
         "%d / %d" % (len(pages), sum(p.get("KeyCount", 0) for p in pages)))
    for k in ("a/b/c.jpg", "deep/x/y/z.bin", "ord/a/x", "ord/a b", "ord/a.txt", "ord/a-1",
              "ord/a+b", "enc/a b+c%d\u00e9.txt"):
        s3.put_object(Bucket="probe", Key=k, Body=b"x")
    attempt("object ord/a beside ord/a/x (file and directory)",
            lambda: s3.put_object(Bucket="probe", Key="ord/a", Body=b"x") and "stored")
    for prefix in ("a/", "deep/", ""):
        r = s3.list_objects_v2(Bucket="probe", Prefix=prefix, Delimiter="/")
        fact("prefix %r delim / -> CommonPrefixes" % prefix,
             [p["Prefix"] for p in r.get("CommonPrefixes", [])])
    r = s3.list_objects_v2(Bucket="probe", Prefix="ord/")
    fact("order of keys under ord/ (S3: UTF-8 byte order)",
         [c["Key"] for c in r.get("Contents", [])])
    got = []
    for p in s3.get_paginator("list_objects_v2").paginate(
            Bucket="probe", Prefix="ord/", PaginationConfig={"PageSize": 1}):
        got += [c["Key"] for c in p.get("Contents", [])]
    fact("ord/ paged with max-keys 1", got)
    for k in ("pg/a/1", "pg/b/1", "pg/c/1", "pg/d", "pg/e/1", "pg/f"):
        s3.put_object(Bucket="probe", Key=k, Body=b"x")
    got = []
    for p in s3.get_paginator("list_objects_v2").paginate(
            Bucket="probe", Prefix="pg/", Delimiter="/", PaginationConfig={"PageSize": 2}):
        got.append("%s+%s KeyCount=%s" % ([c["Key"][3:] for c in p.get("Contents", [])],
                                          [x["Prefix"][3:] for x in p.get("CommonPrefixes", [])],
                                          p.get("KeyCount")))
    fact("pg/ (3 prefixes, 2 keys) delim /, max-keys 2, pages", "; ".join(got))
    # encoding-type=url, raw (boto3 decodes the answer itself)
    raw = Raw(srv)
    st, _, b = raw.req("GET", "/probe?list-type=2&prefix=enc%2F&encoding-type=url")
    body = b.decode("utf-8", "replace")
    key = body.split("<Key>", 1)[1].split("</Key>", 1)[0] if "<Key>" in body else ""
    fact("ListObjectsV2 encoding-type=url: status, Key, echoed",
         "%d %s %s" % (st, key, "<EncodingType>url" in body))
    st, _, b = raw.req("GET", "/probe?list-type=2&prefix=a%2F&delimiter=%2F&encoding-type=url")
    body = b.decode("utf-8", "replace")
    fact("  CommonPrefixes encoded too (a/b/)",
         body.split("<Prefix>", 2)[-1].split("</Prefix>", 1)[0] if "<CommonPrefixes>" in body
         else "no CommonPrefixes")
    r = s3.list_objects(Bucket="probe", Prefix="ord/", MaxKeys=2)
    fact("ListObjects V1 max-keys 2: truncated, NextMarker",
         "%s %s" % (r.get("IsTruncated"), r.get("NextMarker")))


def probe_signing(srv, raw):
    q = "/probe?list-type=2&max-keys=1"
    st, _, b = raw.req("GET", q, sign=False)
    fact("unsigned (anonymous) ListObjectsV2", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("GET", q, secret="WRONG")
    fact("SigV4 signed with wrong secret", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("GET", q, sign_host="127.0.0.1:1")
    fact("SigV4 signed for another Host", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("GET", q)
    fact("SigV4 correct", "%d %s" % (st, code_of(b)))


def probe_put_integrity(srv, s3, raw):
    body = b"hello world"
    bad_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    st, _, b = raw.req("PUT", "/probe/md5", body=body, headers={"Content-MD5": bad_md5})
    fact("PUT with wrong Content-MD5", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/md5", body=body, headers={"Content-MD5": "notbase64!"})
    fact("PUT with malformed Content-MD5", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/sha", body=body,
                       payload_hash=hashlib.sha256(b"other").hexdigest())
    fact("PUT with wrong x-amz-content-sha256", "%d %s" % (st, code_of(b)))
    st, h, b = raw.req("PUT", "/probe/unsigned", body=body, payload_hash="UNSIGNED-PAYLOAD")
    fact("PUT with UNSIGNED-PAYLOAD", "%d etag=%s" % (st, h.get("etag")))
    fact("  ETag == md5(body)", h.get("etag") == '"%s"' % hashlib.md5(body).hexdigest())
    st, h, b = raw.req("PUT", "/probe/stream",
                       body=b"b;chunk-signature=x\r\nabcdefghijk\r\n0\r\n\r\n",
                       payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                       headers={"Content-Encoding": "aws-chunked",
                                "x-amz-decoded-content-length": "11"})
    stored = b""
    if st == 200:
        stored = s3.get_object(Bucket="probe", Key="stream")["Body"].read()
    fact("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER (bad chunk)",
         "%d %s stored=%r" % (st, code_of(b), stored[:40]))
    # a well-formed aws-chunked body, unsigned chunks with no trailer
    chunk = b"hello chunked"
    framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk)
    st, h, b = raw.req("PUT", "/probe/stream2", body=framed,
                       payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                       headers={"Content-Encoding": "aws-chunked",
                                "x-amz-decoded-content-length": str(len(chunk))})
    stored = b""
    if st == 200:
        stored = s3.get_object(Bucket="probe", Key="stream2")["Body"].read()
    fact("PUT aws-chunked, well formed", "%d %s stored=%r" % (st, code_of(b), stored[:40]))
    # the object after a PUT cut off mid-body
    s3.put_object(Bucket="probe", Key="victim", Body=b"A" * 1000)
    u = urllib.parse.urlsplit(srv.endpoint)
    path = u.path.rstrip("/") + "/probe/victim"
    signed = raw.sign("PUT", path, b"B" * 100000, payload_hash="UNSIGNED-PAYLOAD")
    host, port = u.hostname, u.port
    if srv.redirects:  # the 307's target, as a client would reach it
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("PUT", path, body=b"", headers=dict(signed, **{"Content-Length": "0"}))
        resp = conn.getresponse()
        resp.read()
        conn.close()
        loc = resp.getheader("Location")
        if loc:
            lu = urllib.parse.urlsplit(loc)
            host, port, path = lu.hostname, lu.port, lu.path + ("?" + lu.query if lu.query else "")
        s3.put_object(Bucket="probe", Key="victim", Body=b"A" * 1000)
    sock = socket.create_connection((host, port))
    head = "PUT %s HTTP/1.1\r\n" % path + "".join(
        "%s: %s\r\n" % kv for kv in signed.items()) + "Content-Length: 100000\r\n\r\n"
    sock.sendall(head.encode() + b"B" * 500)
    time.sleep(0.3)
    sock.close()
    time.sleep(0.5)
    o = s3.get_object(Bucket="probe", Key="victim")
    data = o["Body"].read()
    fact("object after a PUT cut off at 500 of 100000 bytes",
         "len=%d first=%r etag=%s" % (len(data), data[:1], o["ETag"]))


def probe_reads(srv, s3, raw):
    st, _, _ = raw.req("HEAD", "/nosuchbucket")
    fact("HEAD missing bucket", "%d" % st)
    st, _, _ = raw.req("HEAD", "/probe/nosuchkey")
    fact("HEAD missing key", "%d" % st)
    st, _, b = raw.req("DELETE", "/probe/nosuchkey")
    fact("DELETE missing key", "%d %s" % (st, code_of(b)))
    s3.put_object(Bucket="probe", Key="ten", Body=b"0123456789")
    etag = s3.head_object(Bucket="probe", Key="ten")["ETag"]
    fact("  ETag of 'ten' == md5", etag == '"%s"' % hashlib.md5(b"0123456789").hexdigest())
    for name, hdrs in (("GET If-Match: wrong etag", {"If-Match": '"0000"'}),
                       ("GET If-Match: right etag", {"If-Match": etag}),
                       ("HEAD If-Match: wrong etag", None),
                       ("GET If-None-Match: right etag", {"If-None-Match": etag}),
                       ("GET If-Match wrong + Range", {"If-Match": '"0000"',
                                                       "Range": "bytes=0-1"})):
        if hdrs is None:
            st, _, b = raw.req("HEAD", "/probe/ten", headers={"If-Match": '"0000"'})
        else:
            st, _, b = raw.req("GET", "/probe/ten", headers=hdrs)
        fact(name, "%d %s" % (st, code_of(b)))
    for rng in ("bytes=10-", "bytes=5-100", "bytes=-3", "bytes=0-1,4-5"):
        st, h, b = raw.req("GET", "/probe/ten", headers={"Range": rng})
        fact("GET Range %s on 10-byte object" % rng, "%d %r content-range=%s"
             % (st, b if st < 300 else code_of(b), h.get("content-range")))
    s3.put_object(Bucket="probe", Key="empty", Body=b"")
    try:
        st, h, b = raw.req("GET", "/probe/empty", headers={"Range": "bytes=0-"})
        fact("GET Range bytes=0- on empty object", "%d %s content-length=%s body=%d"
             % (st, code_of(b), h.get("content-length"), len(b)))
    except Exception as e:  # noqa: BLE001
        fact("GET Range bytes=0- on empty object", "BROKEN (%s)" % type(e).__name__)
    # conditional writes
    st, _, b = raw.req("PUT", "/probe/ten", body=b"x", headers={"If-None-Match": "*"})
    fact("PUT If-None-Match: * over an existing key", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/ten", body=b"x", headers={"If-Match": '"0000"'})
    fact("PUT If-Match: wrong etag", "%d %s" % (st, code_of(b)))
    s3.put_object(Bucket="probe", Key="meta", Body=b"m", Metadata={"color": "blue"},
                  ContentType="image/jpeg")
    h = s3.head_object(Bucket="probe", Key="meta")
    fact("x-amz-meta round trip / content-type",
         "%s %s" % (h.get("Metadata"), h.get("ContentType")))
    s3.put_object(Bucket="probe", Key="src a+b%c", Body=b"copyme")
    attempt("CopyObject of key 'src a+b%c'", lambda: "ok data=%r" % (
        s3.copy_object(Bucket="probe", Key="dst",
                       CopySource={"Bucket": "probe", "Key": "src a+b%c"}) and
        s3.get_object(Bucket="probe", Key="dst")["Body"].read()))


def probe_multipart(srv, s3, raw):
    part = os.urandom(5 * MiB)
    mp = s3.create_multipart_upload(Bucket="probe", Key="mp")
    uid = mp["UploadId"]
    etags = []
    for n, data in ((1, part), (2, b"tail")):
        etags.append(s3.upload_part(Bucket="probe", Key="mp", UploadId=uid, PartNumber=n,
                                    Body=data)["ETag"])
    fact("UploadPart ETags == md5(part)",
         etags == ['"%s"' % hashlib.md5(d).hexdigest() for d in (part, b"tail")])
    st, _, b = raw.req("GET", "/probe?uploads")
    fact("ListMultipartUploads (GET ?uploads)", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("GET", "/probe/mp?uploadId=" + uid)
    fact("ListParts (GET ?uploadId)", "%d %s" % (st, code_of(b)))
    r = s3.complete_multipart_upload(Bucket="probe", Key="mp", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": etags[1]}]})
    whole = hashlib.md5(part + b"tail").hexdigest()
    aws = hashlib.md5(hashlib.md5(part).digest()
                      + hashlib.md5(b"tail").digest()).hexdigest() + "-2"
    kind = {'"%s"' % whole: "whole-object md5", '"%s"' % aws: "md5-of-md5s-N"}
    fact("CompleteMultipartUpload ETag", "%s (%s)" % (r["ETag"], kind.get(r["ETag"], "other")))
    h = s3.head_object(Bucket="probe", Key="mp")
    fact("HEAD after multipart ETag", "%s (%s)" % (h["ETag"], kind.get(h["ETag"], "other")))
    st, _, b = raw.req("POST", "/probe/mp?uploadId=" + uid, body=(
        b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>"
        b"</CompleteMultipartUpload>"))
    fact("Complete repeated after success", "%d %s" % (st, code_of(b)))
    mp = s3.create_multipart_upload(Bucket="probe", Key="mp2")
    st, _, b = raw.req("DELETE", "/probe/mp2?uploadId=" + mp["UploadId"])
    fact("AbortMultipartUpload", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/mp3?partNumber=1&uploadId=nosuchupload", body=b"x")
    fact("UploadPart to unknown uploadId", "%d %s" % (st, code_of(b)))
    mp = s3.create_multipart_upload(Bucket="probe", Key="mp4")
    s3.upload_part(Bucket="probe", Key="mp4", UploadId=mp["UploadId"], PartNumber=1, Body=b"one")
    st, _, b = raw.req("POST", "/probe/mp4?uploadId=" + mp["UploadId"], body=(
        b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"
        b"\"00000000000000000000000000000000\"</ETag></Part></CompleteMultipartUpload>"))
    fact("Complete with a wrong part ETag", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("POST", "/probe/mp4?uploadId=" + mp["UploadId"], body=(
        b"<CompleteMultipartUpload><Part><PartNumber>7</PartNumber><ETag>x</ETag></Part>"
        b"</CompleteMultipartUpload>"))
    fact("Complete naming a part never uploaded", "%d %s" % (st, code_of(b)))
    # two small parts: S3 refuses a non-last part under 5 MiB (EntityTooSmall)
    mp = s3.create_multipart_upload(Bucket="probe", Key="mp5")
    small = [s3.upload_part(Bucket="probe", Key="mp5", UploadId=mp["UploadId"], PartNumber=n,
                            Body=b"%d" % n)["ETag"] for n in (1, 2)]
    attempt("Complete with a 1-byte non-last part", lambda: s3.complete_multipart_upload(
        Bucket="probe", Key="mp5", UploadId=mp["UploadId"], MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), small)]})["ETag"])
    # UploadPartCopy
    s3.put_object(Bucket="probe", Key="pc/src", Body=part)
    mp = s3.create_multipart_upload(Bucket="probe", Key="pc/dst")
    attempt("UploadPartCopy bytes=0-9", lambda: s3.upload_part_copy(
        Bucket="probe", Key="pc/dst", UploadId=mp["UploadId"], PartNumber=1,
        CopySource={"Bucket": "probe", "Key": "pc/src"},
        CopySourceRange="bytes=0-9")["CopyPartResult"]["ETag"]
        == '"%s"' % hashlib.md5(part[:10]).hexdigest())
    attempt("UploadPartCopy x-amz-copy-source-if-match wrong", lambda: s3.upload_part_copy(
        Bucket="probe", Key="pc/dst", UploadId=mp["UploadId"], PartNumber=1,
        CopySource={"Bucket": "probe", "Key": "pc/src"}, CopySourceIfMatch='"0000"'))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=[k for k in servers.KINDS if not servers.native(k)],
                    default=servers.DEFAULT)
    args = ap.parse_args(argv)
    servers.select(args.server)
    with servers.server_class(args.server)(buckets=["probe"]) as srv:
        fact("server", "%s at %s" % (srv.kind, srv.endpoint))
        s3 = srv.client(retries=0)
        raw = Raw(srv)
        for probe in (lambda: probe_listing(srv, s3), lambda: probe_signing(srv, raw),
                      lambda: probe_put_integrity(srv, s3, raw),
                      lambda: probe_reads(srv, s3, raw), lambda: probe_multipart(srv, s3, raw)):
            try:
                probe()
            except Exception as e:  # noqa: BLE001 - one failed probe, the next still runs
                fact("PROBE FAILED", "%s: %s" % (type(e).__name__, str(e)[:200]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
