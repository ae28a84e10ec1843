"""Raw, SigV4-signed HTTP requests for tests that must see exactly what a
server or the fault proxy sends (no retries, no SDK error handling)."""

import http.client
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from . import procs, servers


class _Signer(S3SigV4Auth):
    def __init__(self, creds, region, payload_hash=None):
        super().__init__(creds, "s3", region)
        self.forced = payload_hash

    def payload(self, request):
        return self.forced if self.forced is not None else super().payload(request)


def sign_headers(method, url, body=b"", headers=None, payload_hash=None,
                 access_key=None, secret_key=None, region="us-east-1"):
    """Headers (dict) for a SigV4-signed request to url (path already encoded);
    the selected test server's keys unless given."""
    access_key = access_key if access_key is not None else servers.access_key()
    secret_key = secret_key if secret_key is not None else servers.secret_key()
    r = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    _Signer(Credentials(access_key, secret_key), region, payload_hash).add_auth(r)
    return dict(r.headers.items())


class Response:
    def __init__(self, status, headers, body, error=None):
        self.status = status
        self.headers = headers
        self.body = body
        self.error = error  # exception raised while reading the body, if any

    def header(self, name):
        return self.headers.get(name.lower())

    @property
    def code(self):
        s = self.body.decode("utf-8", "replace")
        if "<Code>" in s:
            return s.split("<Code>", 1)[1].split("</Code>", 1)[0]
        return ""


def request(endpoint, method, path, body=b"", headers=None, sign=True,
            payload_hash=None, timeout=30, conn=None):
    """Send one request; path is the raw (encoded) path + query below the
    endpoint (whose own path prefix, e.g. /s3, is prepended). Returns a
    Response; a body cut short is returned with .error set (IncompleteRead,
    ConnectionResetError, ...). conn: reuse an http.client connection."""
    u = urllib.parse.urlsplit(endpoint)
    full = u.path.rstrip("/") + path
    hdrs = dict(headers or {})
    if sign:
        hdrs = sign_headers(method, "%s://%s%s" % (u.scheme, u.netloc, full), body, hdrs,
                            payload_hash)
    own = conn is None
    if own:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, full, body=body, headers=hdrs)
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        error = None
        chunks = []
        try:
            while True:
                chunk = resp.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except http.client.IncompleteRead as e:
            chunks.append(e.partial)
            error = e
        except (ConnectionError, OSError) as e:
            error = e
        data = b"".join(chunks)
        expected = headers.get("content-length")
        if (error is None and expected is not None and method != "HEAD"
                and resp.status not in (204, 304) and len(data) < int(expected)):
            error = http.client.IncompleteRead(data, int(expected) - len(data))
        return Response(resp.status, headers, data, error)
    finally:
        if own:
            conn.close()
