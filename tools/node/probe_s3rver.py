#!/usr/bin/python3
"""Measure how the installed s3rver behaves towards an S3 client.

Starts a private s3rver (tests/harness/s3server.py), runs each probe with raw
signed HTTP requests (botocore's SigV4 signer, no retries) and prints one line
per fact. The facts in tools/node/README.md come from this script:

    /usr/bin/python3 tools/node/probe_s3rver.py
"""

import base64
import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))

from botocore.auth import S3SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from harness.s3server import S3Server  # noqa: E402

EMPTY_SHA = hashlib.sha256(b"").hexdigest()


class Signer(S3SigV4Auth):
    """botocore's S3 SigV4 signer, with an optional forced payload hash."""

    def __init__(self, creds, region, payload_hash=None):
        super().__init__(creds, "s3", region)
        self.forced = payload_hash

    def payload(self, request):
        return self.forced if self.forced is not None else super().payload(request)


class Raw:
    def __init__(self, srv):
        self.srv = srv
        self.creds = Credentials(srv.access_key, srv.secret_key)

    def req(self, method, path, body=b"", headers=None, sign=True, secret=None,
            payload_hash=None, sign_host=None, send_host=None):
        url = self.srv.endpoint + path
        headers = dict(headers or {})
        if sign:
            r = AWSRequest(method=method, url=url, data=body, headers=headers)
            if sign_host:
                r.headers["Host"] = sign_host
            creds = self.creds if secret is None else Credentials(self.srv.access_key, secret)
            Signer(creds, self.srv.region, payload_hash).add_auth(r)
            headers = dict(r.headers.items())
            if sign_host:
                headers["Host"] = "127.0.0.1:%d" % self.srv.port
            if send_host:
                headers["Host"] = send_host
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=30)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data


def code_of(body):
    s = body.decode("utf-8", "replace")
    if "<Code>" in s:
        return s.split("<Code>", 1)[1].split("</Code>", 1)[0]
    return ""


def fact(name, value):
    print("%-58s %s" % (name, value), flush=True)


def main():
    with S3Server(buckets=["probe"]) as srv:
        s3 = srv.client(retries=0)
        raw = Raw(srv)

        # --- listing ----------------------------------------------------
        for i in range(1100):
            s3.put_object(Bucket="probe", Key="many/k%05d" % i, Body=b"x")
        try:
            pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket="probe", Prefix="many/"))
            fact("ListObjectsV2 1100 keys: pages / keys",
                 "%d / %d" % (len(pages), sum(p.get("KeyCount", 0) for p in pages)))
        except Exception as e:  # noqa: BLE001
            fact("ListObjectsV2 1100 keys", "ERROR %s" % e)
        for k in ("a/b/c.jpg", "deep/x/y/z.bin", "ord/a/x", "ord/a b", "ord/a.txt", "ord/a-1", "ord/a"):
            s3.put_object(Bucket="probe", Key=k, Body=b"x")
        r = s3.list_objects_v2(Bucket="probe", Prefix="a/", Delimiter="/")
        fact("prefix a/ delim / over a/b/c.jpg -> CommonPrefixes",
             [p["Prefix"] for p in r.get("CommonPrefixes", [])])
        r = s3.list_objects_v2(Bucket="probe", Prefix="deep/", Delimiter="/")
        fact("prefix deep/ over deep/x/y/z.bin -> CommonPrefixes",
             [p["Prefix"] for p in r.get("CommonPrefixes", [])])
        r = s3.list_objects_v2(Bucket="probe", Delimiter="/")
        fact("no prefix, delim / -> CommonPrefixes",
             [p["Prefix"] for p in r.get("CommonPrefixes", [])])
        r = s3.list_objects_v2(Bucket="probe", Prefix="ord/")
        fact("order of keys under ord/", [c["Key"] for c in r.get("Contents", [])])
        got = []
        for p in s3.get_paginator("list_objects_v2").paginate(
                Bucket="probe", Prefix="ord/", PaginationConfig={"PageSize": 1}):
            got += [c["Key"] for c in p.get("Contents", [])]
        fact("ord/ paged with max-keys 1 (5 keys expected)", got)

        # --- signing ----------------------------------------------------
        st, _, b = raw.req("GET", "/probe?list-type=2&max-keys=1", sign=False)
        fact("unsigned (anonymous) ListObjectsV2", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("GET", "/probe?list-type=2&max-keys=1", secret="WRONG")
        fact("SigV4 signed with wrong secret", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("GET", "/probe?list-type=2&max-keys=1",
                           sign_host="127.0.0.1:1")
        fact("SigV4 signed for another Host", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("GET", "/probe?list-type=2&max-keys=1")
        fact("SigV4 correct", "%d %s" % (st, code_of(b)))

        # --- PUT integrity ----------------------------------------------
        body = b"hello world"
        bad_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        st, _, b = raw.req("PUT", "/probe/md5", body=body, headers={"Content-MD5": bad_md5})
        fact("PUT with wrong Content-MD5", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("PUT", "/probe/sha", body=body,
                           payload_hash=hashlib.sha256(b"other").hexdigest())
        fact("PUT with wrong x-amz-content-sha256", "%d %s" % (st, code_of(b)))
        st, h, b = raw.req("PUT", "/probe/unsigned", body=body, payload_hash="UNSIGNED-PAYLOAD")
        fact("PUT with UNSIGNED-PAYLOAD", "%d etag=%s" % (st, h.get("etag")))
        st, h, b = raw.req("PUT", "/probe/stream", body=b"b;chunk-signature=x\r\nabcdefghijk\r\n0\r\n\r\n",
                           payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                           headers={"Content-Encoding": "aws-chunked",
                                    "x-amz-decoded-content-length": "11"})
        stored = b""
        if st == 200:
            stored = s3.get_object(Bucket="probe", Key="stream")["Body"].read()
        fact("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER", "%d %s stored=%r" % (st, code_of(b), stored[:40]))

        # --- metadata, copy ---------------------------------------------
        s3.put_object(Bucket="probe", Key="meta", Body=b"m", Metadata={"color": "blue"},
                      ContentType="image/jpeg")
        h = s3.head_object(Bucket="probe", Key="meta")
        fact("x-amz-meta round trip / content-type", "%s %s" % (h["Metadata"], h["ContentType"]))
        s3.put_object(Bucket="probe", Key="src a+b%c", Body=b"copyme")
        try:
            c = s3.copy_object(Bucket="probe", Key="dst", CopySource={"Bucket": "probe", "Key": "src a+b%c"})
            fact("CopyObject of key 'src a+b%c'", "ok etag=%s data=%r" % (
                c["CopyObjectResult"]["ETag"], s3.get_object(Bucket="probe", Key="dst")["Body"].read()))
        except Exception as e:  # noqa: BLE001
            fact("CopyObject of key 'src a+b%c'", "ERROR %s" % e)

        # --- multipart --------------------------------------------------
        part = os.urandom(5 * 1024 * 1024)
        mp = s3.create_multipart_upload(Bucket="probe", Key="mp")
        uid = mp["UploadId"]
        etags = []
        for n, data in ((1, part), (2, b"tail")):
            r = s3.upload_part(Bucket="probe", Key="mp", UploadId=uid, PartNumber=n, Body=data)
            etags.append(r["ETag"])
        fact("UploadPart ETags == md5(part)", etags == ['"%s"' % hashlib.md5(d).hexdigest() for d in (part, b"tail")])
        st, _, b = raw.req("GET", "/probe?uploads")
        fact("ListMultipartUploads (GET ?uploads)", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("GET", "/probe/mp?uploadId=" + uid)
        fact("ListParts (GET ?uploadId)", "%d %s" % (st, code_of(b)))
        r = s3.complete_multipart_upload(Bucket="probe", Key="mp", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": etags[1]}]})
        whole = hashlib.md5(part + b"tail").hexdigest()
        aws = hashlib.md5(hashlib.md5(part).digest() + hashlib.md5(b"tail").digest()).hexdigest() + "-2"
        kind = {'"%s"' % whole: "whole-object md5", '"%s"' % aws: "md5-of-md5s-N"}
        fact("CompleteMultipartUpload ETag", "%s (%s)" % (r["ETag"], kind.get(r["ETag"], "other")))
        h = s3.head_object(Bucket="probe", Key="mp")
        fact("HEAD after multipart ETag", "%s (%s)" % (h["ETag"], kind.get(h["ETag"], "other")))
        st, _, b = raw.req("POST", "/probe/mp?uploadId=" + uid, body=b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>")
        fact("Complete repeated after success", "%d %s" % (st, code_of(b)))
        mp = s3.create_multipart_upload(Bucket="probe", Key="mp2")
        st, _, b = raw.req("DELETE", "/probe/mp2?uploadId=" + mp["UploadId"])
        fact("AbortMultipartUpload", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("PUT", "/probe/mp3?partNumber=1&uploadId=nosuchupload", body=b"x")
        fact("UploadPart to unknown uploadId", "%d %s" % (st, code_of(b)))
        mp = s3.create_multipart_upload(Bucket="probe", Key="mp4")
        s3.upload_part(Bucket="probe", Key="mp4", UploadId=mp["UploadId"], PartNumber=1, Body=b"one")
        st, _, b = raw.req("POST", "/probe/mp4?uploadId=" + mp["UploadId"],
                           body=b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"00000000000000000000000000000000\"</ETag></Part></CompleteMultipartUpload>")
        fact("Complete with a wrong part ETag", "%d %s" % (st, code_of(b)))
        try:
            st, _, b = raw.req("POST", "/probe/mp4?uploadId=" + mp["UploadId"],
                               body=b"<CompleteMultipartUpload><Part><PartNumber>7</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>")
            fact("Complete naming a part never uploaded", "%d %s" % (st, code_of(b)))
        except Exception as e:  # noqa: BLE001
            fact("Complete naming a part never uploaded", "NO ANSWER (%s)" % type(e).__name__)
        alive = srv.proc.poll() is None
        fact("server process still alive after that", alive)
        if not alive:
            return

        # --- reads ------------------------------------------------------
        st, _, b = raw.req("HEAD", "/nosuchbucket")
        fact("HEAD missing bucket", "%d" % st)
        st, _, b = raw.req("HEAD", "/probe/nosuchkey")
        fact("HEAD missing key", "%d" % st)
        s3.put_object(Bucket="probe", Key="ten", Body=b"0123456789")
        etag = s3.head_object(Bucket="probe", Key="ten")["ETag"]
        st, _, b = raw.req("GET", "/probe/ten", headers={"If-Match": '"0000"'})
        fact("GET If-Match: wrong etag", "%d %s" % (st, code_of(b)))
        st, _, b = raw.req("GET", "/probe/ten", headers={"If-Match": etag})
        fact("GET If-Match: right etag", "%d" % st)
        st, _, b = raw.req("GET", "/probe/ten", headers={"If-None-Match": etag})
        fact("GET If-None-Match: right etag", "%d" % st)
        st, h, b = raw.req("GET", "/probe/ten", headers={"Range": "bytes=10-"})
        fact("GET Range bytes=10- on 10-byte object", "%d %s content-range=%s" % (st, code_of(b), h.get("content-range")))
        st, h, b = raw.req("GET", "/probe/ten", headers={"Range": "bytes=5-100"})
        fact("GET Range bytes=5-100 on 10-byte object", "%d %r content-range=%s" % (st, b, h.get("content-range")))
        st, h, b = raw.req("GET", "/probe/ten", headers={"Range": "bytes=-3"})
        fact("GET Range bytes=-3 (suffix)", "%d %r content-range=%s" % (st, b, h.get("content-range")))
        s3.put_object(Bucket="probe", Key="empty", Body=b"")
        try:
            st, h, b = raw.req("GET", "/probe/empty", headers={"Range": "bytes=0-"})
            fact("GET Range bytes=0- on empty object", "%d %s content-length=%s body=%d" % (
                st, code_of(b), h.get("content-length"), len(b)))
        except Exception as e:  # noqa: BLE001
            fact("GET Range bytes=0- on empty object", "BROKEN (%s)" % type(e).__name__)

        # --- interrupted PUT ----------------------------------------------
        s3.put_object(Bucket="probe", Key="victim", Body=b"A" * 1000)
        r = AWSRequest(method="PUT", url=srv.endpoint + "/probe/victim", data=b"B" * 100000,
                       headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
        Signer(raw.creds, srv.region, "UNSIGNED-PAYLOAD").add_auth(r)
        sock = socket.create_connection(("127.0.0.1", srv.port))
        head = "PUT /probe/victim HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % srv.port + "".join(
            "%s: %s\r\n" % kv for kv in r.headers.items()) + "Content-Length: 100000\r\n\r\n"
        sock.sendall(head.encode() + b"B" * 500)
        time.sleep(0.3)
        sock.close()
        time.sleep(0.5)
        o = s3.get_object(Bucket="probe", Key="victim")
        data = o["Body"].read()
        fact("object after a PUT cut off at 500 of 100000 bytes",
             "len=%d first=%r etag=%s" % (len(data), data[:1], o["ETag"]))

        probe_upload_part_copy(srv, s3, raw)


def probe_upload_part_copy(srv, s3, raw):
    """UploadPartCopy: S3's API reference, measured with boto3 and raw requests."""
    from botocore.exceptions import ClientError

    mib = 1024 * 1024
    src = os.urandom(12 * mib)
    s3.put_object(Bucket="probe", Key="pc/src a+b", Body=src)
    src_etag = s3.head_object(Bucket="probe", Key="pc/src a+b")["ETag"]
    copy_source = {"Bucket": "probe", "Key": "pc/src a+b"}

    def new_upload(key="pc/dst"):
        return s3.create_multipart_upload(Bucket="probe", Key=key)["UploadId"]

    def copy(**kw):
        args = dict(Bucket="probe", Key="pc/dst", PartNumber=1, CopySource=copy_source)
        args.update(kw)
        if "UploadId" not in args:
            args["UploadId"] = new_upload(args["Key"])
        try:
            r = s3.upload_part_copy(**args)
            return "200 ETag=%s" % r["CopyPartResult"]["ETag"]
        except ClientError as e:
            return "%d %s: %s" % (e.response["ResponseMetadata"]["HTTPStatusCode"],
                                  e.response["Error"]["Code"], e.response["Error"].get("Message"))

    # part 1 copied (bytes 0..5 MiB-1), part 2 uploaded, completed
    uid = new_upload()
    try:
        r = s3.upload_part_copy(Bucket="probe", Key="pc/dst", UploadId=uid, PartNumber=1,
                                CopySource=copy_source, CopySourceRange="bytes=0-%d" % (5 * mib - 1))
    except ClientError as e:
        fact("UploadPartCopy bytes=0-5MiB-1 of a 12 MiB object", "ERROR %s" % e)
        return
    p1 = r["CopyPartResult"]["ETag"]
    fact("UploadPartCopy part ETag == md5(copied bytes)",
         p1 == '"%s"' % hashlib.md5(src[:5 * mib]).hexdigest())
    new = os.urandom(2 * mib + 7)
    p2 = s3.upload_part(Bucket="probe", Key="pc/dst", UploadId=uid, PartNumber=2, Body=new)["ETag"]
    listed = s3.list_parts(Bucket="probe", Key="pc/dst", UploadId=uid)["Parts"]
    fact("ListParts: copied part's size, ETag",
         "%d %s" % (listed[0]["Size"], listed[0]["ETag"] == p1))
    c = s3.complete_multipart_upload(Bucket="probe", Key="pc/dst", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": p2}]})
    got = s3.get_object(Bucket="probe", Key="pc/dst")["Body"].read()
    want = src[:5 * mib] + new
    fact("copied part + uploaded part, completed: bytes right", got == want)
    fact("  its ETag", "whole-object md5" if c["ETag"] == '"%s"' % hashlib.md5(want).hexdigest()
         else c["ETag"])
    fact("UploadPartCopy without range (whole 12 MiB source)", copy().replace(
        src_etag, "md5(source)"))

    # the raw answer, signed with the empty payload's hash
    uid = new_upload()
    st, h, b = raw.req("PUT", "/probe/pc/dst?partNumber=1&uploadId=" + uid,
                       headers={"x-amz-copy-source": "/probe/pc/src%20a%2Bb?versionId=null",
                                "x-amz-copy-source-range": "bytes=10-19"})
    body = b.decode().split("?>", 1)[-1].strip().replace(hashlib.md5(src[10:20]).hexdigest(),
                                                           "md5(bytes 10-19)")
    fact("raw UploadPartCopy (leading /, %-encoded, ?versionId)", "%d %s" % (st, h.get("content-type")))
    fact("  body", body)
    fact("  ETag header on the answer", h.get("etag"))
    st, _, b = raw.req("PUT", "/probe/pc/dst?partNumber=1&uploadId=" + uid,
                       headers={"x-amz-copy-source": "probe/pc/src%20a%2Bb",
                                "x-amz-copy-source-if-match": '"0000"'})
    cond = b.decode().split("<Condition>", 1)[-1].split("</Condition>", 1)[0] \
        if b"<Condition>" in b else ""
    fact("raw UploadPartCopy, if-match wrong: status, Condition", "%d %s" % (st, cond))
    st, _, b = raw.req("PUT", "/probe/pc/dst?partNumber=1&uploadId=" + uid, body=b"hello",
                       headers={"x-amz-copy-source": "probe/pc/src%20a%2Bb",
                                "x-amz-copy-source-range": "bytes=0-9"})
    fact("UploadPartCopy with a 5-byte body (right hash)", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/pc/dst?partNumber=1&uploadId=" + uid, secret="WRONG",
                       headers={"x-amz-copy-source": "probe/pc/src%20a%2Bb"})
    fact("UploadPartCopy signed with a wrong secret", "%d %s" % (st, code_of(b)))
    st, _, b = raw.req("PUT", "/probe/pc/dst?partNumber=1&uploadId=" + uid,
                       payload_hash=hashlib.sha256(b"x").hexdigest(),
                       headers={"x-amz-copy-source": "probe/pc/src%20a%2Bb"})
    fact("UploadPartCopy, no body, payload hash of 'x'", "%d %s" % (st, code_of(b)))

    # conditions (RFC 7232 order; every failure 412)
    past, future = "Mon, 01 Jan 2001 00:00:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT"
    for name, kw in (
            ("if-match wrong ETag", {"CopySourceIfMatch": '"0000"'}),
            ("if-match right ETag", {"CopySourceIfMatch": src_etag}),
            ("if-none-match right ETag", {"CopySourceIfNoneMatch": src_etag}),
            ("if-none-match other ETag", {"CopySourceIfNoneMatch": '"0000"'}),
            ("if-unmodified-since 2001", {"CopySourceIfUnmodifiedSince": past}),
            ("if-modified-since 2100", {"CopySourceIfModifiedSince": future}),
            ("if-modified-since 2001", {"CopySourceIfModifiedSince": past}),
            ("if-match right + if-unmodified-since 2001",
             {"CopySourceIfMatch": src_etag, "CopySourceIfUnmodifiedSince": past}),
            ("if-none-match other + if-modified-since 2100",
             {"CopySourceIfNoneMatch": '"0000"', "CopySourceIfModifiedSince": future})):
        fact("UploadPartCopy x-amz-copy-source-" + name,
             copy(**kw).replace(src_etag, "md5(source)").split(":")[0])

    # ranges
    size = len(src)
    for rng in ("bytes=0-0", "bytes=%d-%d" % (size - 1, size - 1), "bytes=0-%d" % size,
                "bytes=%d-%d" % (size, size + 10), "bytes=5-", "bytes=-5", "bytes=9-3",
                "bytes=0-1,4-5", "0-9"):
        fact("UploadPartCopy range %s (of %d bytes)" % (rng, size), copy(CopySourceRange=rng))

    # what does not exist
    fact("UploadPartCopy missing source key", copy(CopySource={"Bucket": "probe", "Key": "pc/none"}))
    fact("UploadPartCopy missing source bucket", copy(CopySource={"Bucket": "nosuchbucket", "Key": "k"}))
    fact("UploadPartCopy unknown uploadId", copy(UploadId="0123abcd"))
    fact("UploadPartCopy uploadId of another key", copy(UploadId=new_upload("pc/other")))
    fact("UploadPartCopy partNumber 10001", copy(PartNumber=10001))

    # a whole source over 5 GiB (a sparse file put in place of a stored object)
    s3.put_object(Bucket="probe", Key="pc/huge", Body=b"x")
    with open(os.path.join(srv.data_dir, "probe", "pc", "huge._S3rver_object"), "r+b") as f:
        f.truncate(5 * 1024 * mib + 1)
    fact("UploadPartCopy whole source of 5 GiB + 1",
         copy(CopySource={"Bucket": "probe", "Key": "pc/huge"}))
    fact("UploadPartCopy 1 byte of a 5 GiB + 1 source",
         copy(CopySource={"Bucket": "probe", "Key": "pc/huge"},
              CopySourceRange="bytes=%d-%d" % (5 * 1024 * mib, 5 * 1024 * mib)))


if __name__ == "__main__":
    main()
