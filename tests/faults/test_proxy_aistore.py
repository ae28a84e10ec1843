"""AIStore emulation of tools/faultproxy: gateway 307s, target, one-page lists."""

import hashlib
import http.client
import os
import re
import urllib.parse

from harness import rawhttp
from harness.mount import seed


def follow(resp, method, body=b"", headers=None):
    """Re-send a request to a 307's Location, re-signed (as objmount must)."""
    loc = urllib.parse.urlsplit(resp.header("location"))
    endpoint = "%s://%s" % (loc.scheme, loc.netloc)
    path = loc.path + ("?" + loc.query if loc.query else "")
    return rawhttp.request(endpoint, method, path, body=body, headers=headers)


def test_get_through_gateway_is_redirected(faultproxy, s3client, bucket):
    s3client.put_object(Bucket=bucket, Key="dir/a b+c.jpg", Body=b"jpeg")
    path = "/%s/dir/a%%20b%%2Bc.jpg" % bucket
    r = rawhttp.request(faultproxy.gateway_endpoint, "GET", path + "?response-content-type=x%2Fy")
    assert r.status == 307 and r.code == "TemporaryRedirect"
    loc = urllib.parse.urlsplit(r.header("location"))
    assert (loc.hostname, loc.port) == ("127.0.0.1", faultproxy.target_port)
    assert loc.path == "/s3" + path  # the original path, as sent
    q = urllib.parse.parse_qs(loc.query)
    assert q["response-content-type"] == ["x/y"] and set(q) == {"response-content-type", "pid", "utm"}
    assert re.fullmatch(r"\d+", q["utm"][0]) and q["pid"][0]
    got = follow(r, "GET")
    assert got.status == 200 and got.body == b"jpeg"
    assert got.header("content-type") == "x/y"
    assert faultproxy.redirects_issued() == 1


def test_target_refuses_requests_that_were_not_redirected(faultproxy, s3client, bucket):
    r = rawhttp.request(faultproxy.target_endpoint, "PUT", "/s3/%s/k" % bucket, body=b"data")
    assert r.status == 400 and r.code == "BadRequest"
    r = rawhttp.request(faultproxy.target_endpoint, "GET", "/s3/%s/k" % bucket)
    assert r.status == 400
    assert "Contents" not in s3client.list_objects_v2(Bucket=bucket)
    assert faultproxy.stats()["target_refused"] == 2


def test_put_is_redirected_and_target_ignores_authorization(faultproxy, s3client, bucket):
    conn = http.client.HTTPConnection("127.0.0.1", faultproxy.gateway_port, timeout=10)
    body = os.urandom(300000)
    r = rawhttp.request(faultproxy.gateway_endpoint, "PUT", "/%s/obj" % bucket, body=body, conn=conn)
    assert r.status == 307
    # the gateway dropped the body it did not want; the connection is still good
    r2 = rawhttp.request(faultproxy.gateway_endpoint, "HEAD", "/%s" % bucket, conn=conn)
    assert r2.status == 200
    conn.close()
    got = follow(r, "PUT", body=body, headers={"Authorization": "garbage"})
    assert got.status == 200 and got.header("etag") == '"%s"' % hashlib.md5(body).hexdigest()
    assert s3client.get_object(Bucket=bucket, Key="obj")["Body"].read() == body


def test_expect_continue_put_gets_redirect_without_body(faultproxy, bucket):
    hdrs = rawhttp.sign_headers("PUT", faultproxy.gateway_endpoint + "/%s/k" % bucket,
                                payload_hash="UNSIGNED-PAYLOAD")
    conn = http.client.HTTPConnection("127.0.0.1", faultproxy.gateway_port, timeout=10)
    conn.putrequest("PUT", "/s3/%s/k" % bucket, skip_host=True)
    conn.putheader("Host", "127.0.0.1:%d" % faultproxy.gateway_port)
    for k, v in hdrs.items():
        conn.putheader(k, v)
    conn.putheader("Content-Length", "1000000")
    conn.putheader("Expect", "100-continue")
    conn.endheaders()
    resp = conn.getresponse()  # answered before any body byte was sent
    assert resp.status == 307 and resp.getheader("connection") == "close"
    resp.read()
    conn.close()


def test_multipart_calls_are_redirected(faultproxy, s3client, bucket):
    gw = faultproxy.gateway_endpoint
    r = rawhttp.request(gw, "POST", "/%s/mp?uploads" % bucket)
    assert r.status == 307
    up = re.search(r"<UploadId>(.*)</UploadId>", follow(r, "POST").body.decode()).group(1)
    part = os.urandom(5 * 1024 * 1024)
    r = rawhttp.request(gw, "PUT", "/%s/mp?partNumber=1&uploadId=%s" % (bucket, up), body=part)
    assert r.status == 307 and "partNumber=1" in r.header("location")
    etag = follow(r, "PUT", body=part).header("etag")
    assert etag == '"%s"' % hashlib.md5(part).hexdigest()
    r = rawhttp.request(gw, "GET", "/%s/mp?uploadId=%s" % (bucket, up))
    assert r.status == 307 and follow(r, "GET").status == 200
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
           "</CompleteMultipartUpload>" % etag).encode()
    r = rawhttp.request(gw, "POST", "/%s/mp?uploadId=%s" % (bucket, up), body=xml)
    assert r.status == 307
    assert follow(r, "POST", body=xml).status == 200
    r = rawhttp.request(gw, "PUT", "/%s/mp2?partNumber=1&uploadId=%s" % (bucket, up),
                        headers={"x-amz-copy-source": "/%s/mp" % bucket})
    assert r.status == 307
    assert follow(r, "PUT", headers={"x-amz-copy-source": "/%s/mp" % bucket}).status == 501
    assert s3client.head_object(Bucket=bucket, Key="mp")["ContentLength"] == len(part)


def test_gateway_lists_everything_in_one_page(faultproxy, s3client, bucket):
    keys = ["k%05d" % i for i in range(1100)] + ["sub/a/1", "sub/b"]
    seed(s3client, bucket, dict.fromkeys(keys, b""))
    c = faultproxy.client(gateway=True)
    r = c.list_objects_v2(Bucket=bucket, MaxKeys=10)
    assert r["IsTruncated"] is False and "NextContinuationToken" not in r
    assert [o["Key"] for o in r["Contents"]] == sorted(keys)
    assert r["KeyCount"] == 1102
    r = c.list_objects_v2(Bucket=bucket, Delimiter="/", StartAfter="k00999")
    assert len(r["Contents"]) == 100 and [p["Prefix"] for p in r["CommonPrefixes"]] == ["sub/"]
    r = c.list_objects_v2(Bucket=bucket, Prefix="sub/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["sub/b"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["sub/a/"]
    st = faultproxy.stats()
    assert st["gateway_list_pages"] == 4 and st["redirects"] == 0


def test_non_md5_and_aws_multipart_etags(faultproxy, bucket):
    faultproxy.set_faults(aistore={"etag_non_md5": True, "multipart_etag": "aws"})
    gw = faultproxy.gateway_endpoint
    body = b"hello"
    r = follow(rawhttp.request(gw, "PUT", "/%s/single" % bucket, body=body), "PUT", body=body)
    shown = r.header("etag").strip('"')
    assert len(shown) == 40 and shown != hashlib.md5(body).hexdigest()
    h = follow(rawhttp.request(gw, "HEAD", "/%s/single" % bucket), "HEAD")
    assert h.header("etag") == r.header("etag")
    # If-Match with the ETag the target showed works
    g = follow(rawhttp.request(gw, "GET", "/%s/single" % bucket), "GET",
               headers={"If-Match": r.header("etag")})
    assert g.status == 200 and g.body == body
    listed = faultproxy.client(gateway=True).list_objects_v2(Bucket=bucket)["Contents"]
    assert listed[0]["ETag"] == r.header("etag")
    # multipart: md5 of the part md5s, "-N"
    up = re.search(r"<UploadId>(.*)</UploadId>", follow(
        rawhttp.request(gw, "POST", "/%s/mp?uploads" % bucket), "POST").body.decode()).group(1)
    parts = [os.urandom(5 * 1024 * 1024), b"tail"]
    etags = []
    for n, p in enumerate(parts, 1):
        q = "/%s/mp?partNumber=%d&uploadId=%s" % (bucket, n, up)
        etags.append(follow(rawhttp.request(gw, "PUT", q, body=p), "PUT", body=p).header("etag"))
    xml = ("<CompleteMultipartUpload>" + "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e)
        for n, e in enumerate(etags, 1)) + "</CompleteMultipartUpload>").encode()
    done = follow(rawhttp.request(gw, "POST", "/%s/mp?uploadId=%s" % (bucket, up), body=xml),
                  "POST", body=xml)
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-2"
    assert "<ETag>&quot;%s&quot;</ETag>" % want in done.body.decode()
    h = follow(rawhttp.request(gw, "HEAD", "/%s/mp" % bucket), "HEAD")
    assert h.header("etag") == '"%s"' % want


def test_faults_apply_on_the_target_too(faultproxy, s3client, bucket):
    data = os.urandom(100000)
    s3client.put_object(Bucket=bucket, Key="k", Body=data)
    faultproxy.set_faults(truncate={"bytes": 100, "listener": "target"})
    r = rawhttp.request(faultproxy.gateway_endpoint, "GET", "/%s/k" % bucket)
    assert r.status == 307
    got = follow(r, "GET")
    assert got.header("content-length") == "100000" and len(got.body) == 100
    assert got.error is not None
