"""The test matrix: which test file runs against which server, in one place.

tools/test.sh runs one pytest pass per server kind of harness/servers.py;
tests/conftest.py reads this table and, in each pass, keeps the files that
run on that kind. A file runs on a kind when the kind is in its row. A file
that does not run on an AIStore kind although it uses a server says why in
SKIPS (shown as a skip reason, naming the AIStore behaviour); a file that
runs ONCE needs no server of its own kind (a synthetic server, the built
package, objmount's own programs and options) and runs in the versitygw
pass only. Every test file must have a row: a new file without one fails
the collection, so no file is left out by accident.

Groups:
  EVERY  the read, write and namespace files, the loaders: every kind,
         AIStore's S3 API in both redirect modes and both checksum types,
         and AIStore's native API (ais://)
  S3     the S3 protocol itself (om-s3, boto3, the fault proxy's S3 faults):
         every kind with an S3 API
  PLAIN  S3 servers without redirects (s3fs-fuse peers, request counts)
  ONCE   versitygw only
  AIS    the AIStore kinds only (what AIStore does where S3 servers differ)
"""

EVERY = ("versitygw", "swift", "aistore", "aistore-proxy", "ais")
S3 = ("versitygw", "swift", "aistore", "aistore-proxy")
PLAIN = ("versitygw", "swift")
ONCE = ("versitygw",)
AIS = ("aistore", "aistore-proxy", "ais")

FILES = {
    # read
    "integration/test_mount_read.py": EVERY,
    "integration/test_mount_concurrency.py": EVERY,
    "integration/test_mount_consistency.py": EVERY,
    "integration/test_mount_memory.py": EVERY,
    "integration/test_read_memory.py": EVERY,
    "integration/test_prefetch_files.py": EVERY,
    "integration/test_data_cache.py": EVERY,
    "integration/test_shards.py": EVERY,
    "integration/test_integrity.py": EVERY,
    # write
    "integration/test_write_roundtrip.py": EVERY,
    "integration/test_write_semantics.py": EVERY,
    "integration/test_write_safety.py": EVERY,
    "integration/test_write_hashing.py": EVERY,
    "integration/test_write_h5py_torch.py": EVERY,
    "integration/test_commit_model.py": EVERY,
    "integration/test_exerciser.py": EVERY,
    "integration/test_exerciser_processes.py": EVERY,
    # namespace
    "integration/test_mount_namespace.py": EVERY,
    "integration/test_ns_ops.py": EVERY,
    "integration/test_ns_meta.py": EVERY,
    "integration/test_ns_tools.py": EVERY,
    "integration/test_server_divergences.py": EVERY,
    "integration/test_conflicts.py": EVERY,
    "integration/test_aistore.py": AIS,
    # loaders
    "loaders/test_arrays.py": EVERY,
    "loaders/test_checkpoints.py": EVERY,
    "loaders/test_images.py": EVERY,
    "loaders/test_streams.py": EVERY,
    "loaders/test_demo.py": ONCE,
    # the S3 protocol and the fault proxy's S3 faults
    "integration/test_s3_client.py": S3,
    "integration/test_upload_part_copy.py": S3,
    "integration/test_redirect_credentials.py": S3,
    "faults/test_client_faults.py": S3,
    "faults/test_mount_faults.py": S3,
    "faults/test_write_faults.py": S3,
    "faults/test_log_secrets.py": EVERY,
    "faults/test_proxy_s3rver.py": S3,
    # S3 servers without redirects
    "integration/test_ns_s3fs.py": PLAIN,
    "integration/test_mount_requests.py": PLAIN,
    # once
    "faults/test_proxy_faults.py": ONCE,
    "faults/test_proxy_aistore.py": ONCE,
    "integration/test_completion.py": ONCE,
    "integration/test_ctl_admin.py": ONCE,
    "integration/test_ctl_errors.py": ONCE,
    "integration/test_ctl_json.py": ONCE,
    "integration/test_ctl_live.py": ONCE,
    "integration/test_helper_install.py": ONCE,
    "integration/test_helper_mount.py": ONCE,
    "integration/test_manifest.py": ONCE,
    "integration/test_manifest_scale.py": ONCE,
    "integration/test_meta_budget.py": ONCE,
    "integration/test_mount_cli.py": ONCE,
    "integration/test_package.py": ONCE,
    "integration/test_service.py": ONCE,
    "integration/test_synthbucket.py": ONCE,
}

# Why a file that uses a server does not run on an AIStore kind.
SKIPS = {
    ("integration/test_ns_s3fs.py", "aistore"):
        "s3fs-fuse does not follow AIStore's 307 redirects (its GETs fail)",
    ("integration/test_ns_s3fs.py", "aistore-proxy"):
        "s3fs-fuse writes directory markers `dir/`, which AIStore stores as `dir`",
    ("integration/test_ns_s3fs.py", "ais"):
        "s3fs-fuse speaks S3 only, not AIStore's native API",
    ("integration/test_mount_requests.py", "aistore"):
        "counts requests at the fault proxy, which AIStore's 307s bypass",
    ("integration/test_mount_requests.py", "aistore-proxy"):
        "counts S3 request kinds of a plain S3 server; the same counts on AIStore "
        "differ only by the redirect steps that test_mount_faults covers",
    ("integration/test_mount_requests.py", "ais"):
        "counts S3 request kinds; the native API's requests are other ones",
}


def runs(path, kind):
    """(True, None) when path (relative to tests/) runs on kind; (False,
    reason) when it is skipped there with a reason; (False, None) when it
    is deselected (a file that runs once, on another kind)."""
    kinds = FILES.get(path)
    if kinds is None:
        raise KeyError("%s has no row in tests/matrix.py: say which servers it runs on" % path)
    if kind in kinds:
        return True, None
    reason = SKIPS.get((path, kind))
    if reason is None and kind == "ais" and kinds == S3:
        reason = "tests the S3 protocol; the ais:// mount speaks AIStore's native API"
    return False, reason
