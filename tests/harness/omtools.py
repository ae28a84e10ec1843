"""objmount's own programs, driven from pytest."""

import os
import subprocess

import pytest

from . import procs, servers

BUILD_DIR = os.environ.get("OBJMOUNT_BUILD_DIR",
                           os.path.join(procs.REPO_ROOT, "build"))


def tool(name):
    path = os.path.join(BUILD_DIR, "tools", name)
    if not os.path.exists(path):
        pytest.fail("%s is not built (run: meson setup build && ninja -C build)" % path)
    return path


class OmS3:
    """Runs build/tools/om-s3 against an endpoint with the test credentials."""

    def __init__(self, endpoint, env=None):
        self.endpoint = endpoint
        self.env = dict(os.environ)
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AIS_AUTHN_TOKEN", "AWS_ENDPOINT_URL",
                    "AIS_ENDPOINT"):
            self.env.pop(var, None)
        self.env.update({"AWS_ACCESS_KEY_ID": servers.access_key(),
                         "AWS_SECRET_ACCESS_KEY": servers.secret_key()})
        if env:
            self.env.update(env)

    def run(self, bucket, *args, opts="", check=True, stdin=None, timeout=120):
        o = "endpoint=%s,retry_base=0.02,retry_max=0.2" % self.endpoint
        if opts:
            o += "," + opts
        cmd = [tool("om-s3"), "-o", o, "--stats", bucket] + [str(a) for a in args]
        p = subprocess.run(cmd, env=self.env, capture_output=True, timeout=timeout, input=stdin)
        if check and p.returncode != 0:
            raise AssertionError("om-s3 %s failed (%d): %s" % (
                " ".join(map(str, args)), p.returncode, p.stderr.decode(errors="replace")))
        return p

    @staticmethod
    def stats(p):
        for line in p.stderr.decode().splitlines():
            if line.startswith("stats "):
                return {k: int(v) for k, v in (f.split("=") for f in line.split()[1:])}
        raise AssertionError("no stats line in: %r" % p.stderr)

    @staticmethod
    def fields(p):
        line = p.stdout.decode().strip().splitlines()[-1]
        return dict(f.split("=", 1) for f in line.split())
