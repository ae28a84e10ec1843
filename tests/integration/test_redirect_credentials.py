"""Credentials follow a redirect only to hosts the user named (issue 13).

A gateway on 127.0.0.1 answers every request with a 307 to a target on
127.0.0.2 (another host), as an AIStore gateway does; both record the headers
they receive. om-s3 drives objmount's own client through them."""

import http.server
import re
import socketserver
import threading

import pytest

from harness.omtools import OmS3

BODY = b"0123456789abcdef"
CRED_HEADERS = ("authorization", "x-amz-security-token")


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(host, handler_fn):
    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _any(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            seen.append({k.lower(): v for k, v in self.headers.items()})
            handler_fn(self)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any

    srv = _Server((host, 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def _target(h):
    rng = h.headers.get("Range")
    body, status, extra = BODY, 200, {}
    m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng or "")
    if m:
        a, b = int(m.group(1)), min(int(m.group(2)), len(BODY) - 1)
        body, status = BODY[a:b + 1], 206
        extra["Content-Range"] = "bytes %d-%d/%d" % (a, b, len(BODY))
    h.send_response(status)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("ETag", '"e7d1b0f0c0a0d0e0f000000000000001"')
    h.send_header("Last-Modified", "Wed, 12 Oct 2009 17:50:00 GMT")
    for k, v in extra.items():
        h.send_header(k, v)
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


@pytest.fixture
def gateway_and_target():
    try:
        tgt, tgt_seen = _serve("127.0.0.2", _target)
    except OSError as e:
        pytest.skip("127.0.0.2 is not usable here: %s" % e)
    tport = tgt.server_address[1]

    def redirect(h):
        h.send_response(307)
        h.send_header("Location", "http://127.0.0.2:%d%s%spid=p1&utm=17" % (
            tport, h.path, "&" if "?" in h.path else "?"))
        h.send_header("Content-Length", "0")
        h.end_headers()

    gw, gw_seen = _serve("127.0.0.1", redirect)
    yield "http://127.0.0.1:%d/s3" % gw.server_address[1], gw_seen, tgt_seen
    gw.shutdown()
    tgt.shutdown()


def _bearer_client(endpoint):
    return OmS3(endpoint, env={"AIS_AUTHN_TOKEN": "secret-bearer-token",
                               "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""})


def _creds(headers):
    return {k: v for k, v in headers.items() if k in CRED_HEADERS}


def test_bearer_token_goes_to_the_gateway_only(gateway_and_target):
    endpoint, gw_seen, tgt_seen = gateway_and_target
    om = _bearer_client(endpoint)
    p = om.run("bkt", "get", "k", 0, 16)
    assert p.stdout == BODY
    assert gw_seen and all(h.get("authorization") == "Bearer secret-bearer-token" for h in gw_seen)
    assert tgt_seen and all(not _creds(h) for h in tgt_seen)
    assert all("secret-bearer-token" not in str(h) for h in tgt_seen)


def test_bearer_token_never_goes_over_http_to_another_host(gateway_and_target):
    endpoint, gw_seen, tgt_seen = gateway_and_target
    om = _bearer_client(endpoint)
    om.run("bkt", "head", "k", opts="redirect_hosts=127.0.0.2")
    assert tgt_seen and all(not _creds(h) for h in tgt_seen)


def test_sigv4_and_session_token_stay_with_the_endpoint(gateway_and_target):
    endpoint, gw_seen, tgt_seen = gateway_and_target
    om = OmS3(endpoint, env={"AWS_SESSION_TOKEN": "secret-session-token"})
    p = om.run("bkt", "get", "k", 0, 16)
    assert p.stdout == BODY
    assert all(h["authorization"].startswith("AWS4-HMAC-SHA256 ") for h in gw_seen)
    assert all(h["x-amz-security-token"] == "secret-session-token" for h in gw_seen)
    assert tgt_seen and all(not _creds(h) for h in tgt_seen)


def test_redirect_hosts_lets_sigv4_reach_a_named_target(gateway_and_target):
    endpoint, gw_seen, tgt_seen = gateway_and_target
    om = OmS3(endpoint, env={"AWS_SESSION_TOKEN": "secret-session-token"})
    om.run("bkt", "head", "k", opts="redirect_hosts=127.0.0.0/30")
    assert tgt_seen
    for h in tgt_seen:
        assert h["authorization"].startswith("AWS4-HMAC-SHA256 ")
        assert "Credential=%s/" % om.env["AWS_ACCESS_KEY_ID"] in h["authorization"]
        assert h["x-amz-security-token"] == "secret-session-token"


def test_invalid_redirect_hosts_is_refused(gateway_and_target):
    endpoint, _, _ = gateway_and_target
    p = OmS3(endpoint).run("bkt", "head", "k", opts="redirect_hosts=10.0.0.0/99", check=False)
    assert p.returncode != 0 and b"redirect_hosts" in p.stderr
