"""A private versitygw (Versity S3 Gateway, posix backend) for tests.

    from harness.vgwserver import VersityServer
    with VersityServer(buckets=["data"]) as srv:
        s3 = srv.client()

The pinned versitygw of tools/go-servers.lock (built by tools/bootstrap.sh)
serves one fresh directory (dir/data: a folder per bucket, a file per
object, metadata in user xattrs) on 127.0.0.1 and a free port, with its
internal IAM in dir/iam, keep-alive on (off by default in versitygw: every
answer would close its connection), and the root keys below. It verifies
SigV4 and Content-MD5 and gives MD5 ETags, as AWS does. Like any server
that keeps objects as files, it cannot hold an object `a` and an object
`a/b` at once.
"""

import hashlib
import os
import urllib.error
import urllib.request

from . import gobin
from .procs import ServerError, free_ports
from .serverbase import Server

ACCESS_KEY = "objmount-vgw-access"
SECRET_KEY = "objmount-vgw-secret-0123456789"
HEALTH = "/objmount-health"


class VersityServer(Server):
    kind = "versitygw"
    prefix = "objmount-versitygw-"
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY
    file_dir_conflict = True

    def __init__(self, buckets=(), copy_limit=None, **kw):
        """copy_limit: versitygw's --copy-object-threshold (largest source
        of a CopyObject, 5 GiB by default as on AWS), lowered by tests of
        what a client does past that limit."""
        super().__init__(buckets, **kw)
        self.copy_limit = copy_limit

    def _launch(self):
        self.data_dir = os.path.join(self.dir, "data")
        iam = os.path.join(self.dir, "iam")
        os.mkdir(self.data_dir)
        os.mkdir(iam)
        self.port = free_ports(1)[0]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        cmd = [gobin.path("versitygw"), "--port", "127.0.0.1:%d" % self.port,
               "--access", self.access_key, "--secret", self.secret_key,
               "--region", self.region, "--iam-dir", iam, "--keep-alive", "--quiet",
               "--health", HEALTH]
        if self.copy_limit is not None:
            cmd += ["--copy-object-threshold", str(self.copy_limit)]
        cmd += ["posix", self.data_dir]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ROOT_", "VGW_", "AWS_"))}
        self.proc = self._popen(cmd, env=env)
        self.pid = self.proc.pid

    def _wait_until_ready(self):
        def ready():
            try:
                urllib.request.urlopen(self.endpoint + HEALTH, timeout=2).read()
            except urllib.error.HTTPError as e:
                raise ServerError("versitygw health check answered %d" % e.code)
            return True
        self._wait(ready, "waiting for its health check on " + self.endpoint)

    def store_objects(self, bucket, objects):
        """Write {key: bytes} straight into the bucket's directory, as
        versitygw's posix backend keeps a PUT (the file, its MD5 ETag in
        the user.etag xattr): test set-up of thousands of small objects
        without thousands of signed PUTs. Returns the keys left for the
        caller to PUT (directory markers, names a file system cannot hold
        as they are)."""
        root = os.path.join(self.data_dir, bucket)
        if not os.path.isdir(root):
            raise ServerError("store_objects: no bucket %s" % bucket)
        rest = {}
        for key, body in objects.items():
            parts = key.split("/")
            if key.startswith(".") or any(p in ("", ".", "..") for p in parts):
                rest[key] = body
                continue
            where = os.path.join(root, *parts[:-1])
            path = os.path.join(where, parts[-1])
            try:
                os.makedirs(where, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(body)
                    os.setxattr(f.fileno(), "user.etag", hashlib.md5(body).hexdigest().encode())
            except (NotADirectoryError, IsADirectoryError, FileExistsError):
                rest[key] = body
        return rest
