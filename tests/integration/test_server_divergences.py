"""Where real S3 servers differ, objmount behaves the same on each.

Run against every server kind (tests/matrix.py);
each test names the divergence it pins (doc/decisions.md, "Test servers"):
  - Swift answers CopyObject's x-amz-copy-source-if-match with 412 for a
    multipart (SLO) source whose ETag is unchanged, and gives the copy another
    ETag (a plain MD5): rename and chmod of such a file must still work, and
    the renamed file must read back (the reader checks the ETag of every GET).
  - keys over 1024 bytes are refused by the server: ENAMETOOLONG, early.
  - multipart ETags are md5-of-md5s-N on versitygw, Swift and AIStore's S3
    API (proved by the ETag or by AIStore's checksum), "v1-..." for an
    object AIStore's native API stored (MULTIPART_ETAG says which where).
"""

import errno
import hashlib
import os
import re
import stat

import pytest

from harness import admin
from harness.mount import MiB, check_bytes, check_object, payload, read_all


def multipart_etag(data, part):
    digests = b"".join(hashlib.md5(data[i:i + part]).digest() for i in range(0, len(data), part))
    return "%s-%d" % (hashlib.md5(digests).hexdigest(), (len(data) + part - 1) // part)


# What each server kind shows for a file of three 5 MiB parts written
# through the mount: the ETag its S3 API gives (S3's MD5 of the parts' MD5s
# "-3", or AIStore's "v1-<hex>-<time>" for an object its native API
# stored) and the proof the commit took (writes.verified_* in stats).
MULTIPART_ETAG = {
    "versitygw": ("md5-of-parts", "verified_multipart"),
    "swift": ("md5-of-parts", "verified_multipart"),
    # the S3 API's ETag, which proves the parts the mount sent with no pass
    # over the file (the checksum AIStore states beside it would need one)
    "aistore": ("md5-of-parts", "verified_multipart"),
    "aistore-proxy": ("md5-of-parts", "verified_multipart"),
    "ais": ("ais-v1", "verified_checksum"),
}
VERIFIED = ("verified_md5", "verified_multipart", "verified_checksum", "verified_size_only",
            "verified_read")


def version_of(s3client, s3server, bucket, key):
    """The version the mount keeps of key (xattr user.objmount.etag): the
    ETag of the S3 API, or through AIStore's native API its version and
    checksum, "VERSION:XXHASH"."""
    if s3server.kind == "ais":
        status, _ = s3server.native("HEAD", "/v1/objects/%s/%s" % (bucket, key))
        assert status == 200, status
        h = {k.lower(): v for k, v in s3server.last_headers.items()}
        return "%s:%s" % (h["ais-version"], h["ais-checksum-value"])
    return s3client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')


def test_rename_and_chmod_of_a_multipart_file_written_through_the_mount(rw_mount, bucket,
                                                                        s3client, s3server,
                                                                        cache_dir):
    want = payload("mp-rename", 12 * MiB + 3)
    m = rw_mount(bucket)
    with open(m.join("ckpt.bin"), "wb") as f:
        f.write(want)
    etag = s3client.head_object(Bucket=bucket, Key="ckpt.bin")["ETag"].strip('"')
    form, proof = MULTIPART_ETAG[s3server.kind]
    if form == "md5-of-parts":
        assert etag == multipart_etag(want, 5 * MiB), etag
    else:
        assert re.fullmatch(r"v1-[0-9a-f]+-[0-9a-z]+", etag), etag
    writes = admin.stats_json(m.path)["writes"]
    assert {k: writes[k] for k in VERIFIED} == {k: int(k == proof) for k in VERIFIED}, writes
    os.rename(m.join("ckpt.bin"), m.join("renamed.bin"))
    check_object(s3client, bucket, "renamed.bin", want)
    # the inode now carries the copy's ETag: reading it is not "another version"
    check_bytes(read_all(m.join("renamed.bin")), want, "renamed multipart file")
    assert os.getxattr(m.join("renamed.bin"), "user.objmount.etag").decode() == \
        version_of(s3client, s3server, bucket, "renamed.bin")
    os.chmod(m.join("renamed.bin"), 0o600)
    assert stat.S_IMODE(os.stat(m.join("renamed.bin")).st_mode) == 0o600
    check_object(s3client, bucket, "renamed.bin", want)
    check_bytes(read_all(m.join("renamed.bin")), want, "renamed file after chmod")
    os.rename(m.join("renamed.bin"), m.join("again.bin"))
    check_bytes(read_all(m.join("again.bin")), want, "file renamed twice")
    assert sorted(os.listdir(m.path)) == ["again.bin"]
    # a read-write mount makes its recovery directory at start: nothing in it
    assert os.listdir(os.path.join(cache_dir, "recovery")) == []


def test_a_copy_refused_with_412_is_made_again_when_the_etag_is_unchanged(rw_mount, bucket,
                                                                         s3client, faultproxy):
    """Swift's answer, made by the proxy on either server: the first CopyObject
    answers 412 PreconditionFailed; the source's ETag is unchanged, so the
    copy is made again (guarded by If-Unmodified-Since) and the rename works."""
    want = payload("412", 3 * MiB + 1)
    s3client.put_object(Bucket=bucket, Key="src.bin", Body=want)
    m = rw_mount(bucket, "log_level=info", endpoint=faultproxy.endpoint)
    os.stat(m.join("src.bin"))
    faultproxy.set_faults(errors={"status": 412, "code": "PreconditionFailed",
                                  "kind": "CopyObject", "nth": 1})
    faultproxy.reset_stats()
    os.rename(m.join("src.bin"), m.join("dst.bin"))
    kinds = faultproxy.stats()["requests"]["by_kind"]
    assert kinds.get("CopyObject") == 2, kinds
    check_object(s3client, bucket, "dst.bin", want)
    check_bytes(read_all(m.join("dst.bin")), want, "file renamed after a 412")
    assert "src.bin" not in os.listdir(m.path)
    assert "x-amz-copy-source-if-unmodified-since" in m.log, m.log[-2000:]


def test_keys_over_1024_bytes_are_enametoolong(rw_mount, bucket, s3client):
    m = rw_mount(bucket)
    path = m.path
    for c in "abcd":
        path = os.path.join(path, c * 250)
        os.mkdir(path)  # 1004 bytes of key so far
    for fn, args in ((os.mkdir, (os.path.join(path, "x" * 250),)),
                     (lambda p: open(p, "wb").close(), (os.path.join(path, "e" * 250),)),
                     (os.symlink, ("target", os.path.join(path, "f" * 250)))):
        with pytest.raises(OSError) as ei:
            fn(*args)
        assert ei.value.errno == errno.ENAMETOOLONG, ei.value
    with open(os.path.join(path, "short"), "wb") as f:
        f.write(b"x")
    with pytest.raises(OSError) as ei:
        os.rename(os.path.join(path, "short"), os.path.join(path, "g" * 250))
    assert ei.value.errno == errno.ENAMETOOLONG
    keys = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert all(len(k.encode()) <= 1024 for k in keys), keys
    assert any(k.endswith("/short") for k in keys), keys


def test_doctor_names_the_server_and_its_traps(bucket, s3server):
    o = "endpoint=%s,retry_base=0.02,retry_max=0.2" % s3server.endpoint
    p = admin.ctl(["doctor", bucket, "-o", o], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    swift = "[info] server: OpenStack Swift" in p.stdout
    assert swift == (s3server.kind == "swift"), p.stdout
    if swift:
        assert "15 minutes off its clock" in p.stdout, p.stdout
    # parts under 5 MiB: every S3 implementation refuses them (EntityTooSmall);
    # uploads use 5 MiB parts whatever part_size says, and doctor says so
    p = admin.ctl(["doctor", bucket, "-o", o + ",part_size=1M"], timeout=120)
    assert p.returncode == 0 and "[info] part_size" in p.stdout, p.stdout
    assert "EntityTooSmall" in p.stdout, p.stdout
