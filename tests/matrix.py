"""The test matrix: which test file runs against which server, in one place.

tools/test.sh runs one pytest pass per server kind of harness/servers.py;
tests/conftest.py reads this table and, in each pass, keeps the files that
run on that kind. A file runs on a kind when the kind is in its row. A file
that does not run on an AIStore kind although it uses a server says why in
SKIPS (shown as a skip reason, naming the AIStore behaviour); a file that
runs ONCE needs no server of its own kind (the built package, objmount's
own programs and options) and runs in the versitygw pass only; one that
starts a server of its own (a synthetic bucket, the demo's AIStore) runs
ELSEWHERE, in the pass with the least work (which pass does not matter to
it; the test command's time does). Every test file must have a row: a new file without one fails
the collection, so no file is left out by accident.

Groups:
  EVERY  the read, write and namespace files, the loaders: every kind,
         AIStore's S3 API in both redirect modes and both checksum types,
         and AIStore's native API (ais://)
  S3     the S3 protocol itself (om-s3, boto3, the fault proxy's S3 faults):
         every kind with an S3 API
  STRESS long runs of the read and write paths (the exercisers, memory
         under many readers): versitygw and AIStore's S3 API with
         redirects; the other kinds run the same paths in the read and
         write files
  PLAIN  S3 servers without redirects (s3fs-fuse peers, request counts,
         the fault proxy's S3 faults, the servers' S3 facts)
  ONCE   versitygw only
  ELSEWHERE  files with a server of their own: AIStore's reverse-proxy
         pass only, the shortest
  AIS    the AIStore kinds only (what AIStore does where S3 servers differ)
"""

EVERY = ("versitygw", "swift", "aistore", "aistore-proxy", "ais")
S3 = ("versitygw", "swift", "aistore", "aistore-proxy")
STRESS = ("versitygw", "aistore")
PLAIN = ("versitygw", "swift")
ONCE = ("versitygw",)
ELSEWHERE = ("aistore-proxy",)
AIS = ("aistore", "aistore-proxy", "ais")

FILES = {
    # read
    "integration/test_mount_read.py": EVERY,
    "integration/test_mount_concurrency.py": EVERY,
    "integration/test_mount_consistency.py": EVERY,
    "integration/test_mount_memory.py": EVERY,
    "integration/test_read_memory.py": STRESS,
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
    "integration/test_exerciser.py": STRESS,
    "integration/test_exerciser_processes.py": STRESS,
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
    "loaders/test_dali_style.py": EVERY,
    "loaders/test_demo.py": ELSEWHERE,
    # the S3 protocol and the fault proxy's S3 faults
    "integration/test_s3_client.py": S3,
    "integration/test_upload_part_copy.py": PLAIN,
    "integration/test_redirect_credentials.py": S3,
    "faults/test_client_faults.py": PLAIN,
    "faults/test_mount_faults.py": PLAIN,
    "faults/test_write_faults.py": PLAIN,
    "faults/test_log_secrets.py": EVERY,
    "faults/test_aistore_targets.py": AIS,
    "faults/test_aistore_checkpoint.py": AIS,
    "faults/test_server_facts.py": PLAIN,
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
    "integration/test_manifest_scale.py": ELSEWHERE,
    "integration/test_meta_budget.py": ONCE,
    "integration/test_mount_cli.py": ONCE,
    "integration/test_package.py": ONCE,
    "integration/test_service.py": ONCE,
    "integration/test_synthbucket.py": ELSEWHERE,
}

STRESS_WHY = ("a stress file: the same read and write paths run here in the read and write "
              "files; it runs on versitygw and aistore to keep the test command within 20 "
              "minutes")
FAULTS_WHY = ("the fault proxy's S3 faults are set and counted per S3 operation; through a real "
              "AIStore each operation is two requests at the proxy (the cluster's proxy and the "
              "target it redirects to), so these cases do not arise as written; faults between "
              "objmount and a real cluster: tests/faults/test_aistore_checkpoint.py and "
              "test_aistore_targets.py")
FACTS_WHY = ("pins S3 servers' answers; AIStore's own (ETag form, markers, 501 on UploadPartCopy, "
             "redirects, delimiter, 404 on delete) are pinned by tests/integration/test_aistore.py")
PART_COPY_WHY = ("AIStore answers UploadPartCopy with 501; objmount learns it at the mount and "
                 "uploads unchanged parts again (test_aistore.py::"
                 "test_upload_part_copy_answers_501_and_appends_upload_the_whole)")

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
for _k in ("swift", "aistore-proxy", "ais"):
    for _f in ("integration/test_read_memory.py", "integration/test_exerciser.py",
               "integration/test_exerciser_processes.py"):
        SKIPS[(_f, _k)] = STRESS_WHY
for _k in ("aistore", "aistore-proxy", "ais"):
    for _f in ("faults/test_client_faults.py", "faults/test_mount_faults.py",
               "faults/test_write_faults.py"):
        SKIPS[(_f, _k)] = FAULTS_WHY
    SKIPS[("faults/test_server_facts.py", _k)] = FACTS_WHY
    SKIPS[("integration/test_upload_part_copy.py", _k)] = PART_COPY_WHY


# Single tests that do not run on some kinds although their file does, each
# with the server behaviour that makes its case impossible there (not a
# failure of objmount: what objmount does about the behaviour is tested
# elsewhere, named in the reason). Keys: (file, test name or name prefix
# ending in '*'); values: {kind: reason}. conftest fails the pass when an
# entry matches no test of a file it collected, so none outlives its test.
META_S3 = ("AIStore's S3 API stores no x-amz-meta-* (modes, owners, times, s3fs-style symlinks, "
           "content types): objmount keeps them while the mount holds the file "
           "(writes.meta_not_stored, test_write_semantics); ais:// stores them")
META_SETUP = ("its set-up or its check goes through AIStore's S3 API, which stores no "
              "x-amz-meta-*; ais:// keeps what it stores itself (test_write_semantics, "
              "test_aistore.py)")
MARKER = ("AIStore stores a key `dir/` as `dir`: no directory markers, so an empty directory "
          "lasts only while the mount holds it (test_aistore.py::"
          "test_a_dir_marker_is_stored_as_a_file_so_mkdir_stores_none)")
CLASH = ("its set-up stores a file `a` beside objects under `a/`, which a server keeping keys "
         "as paths refuses (versitygw: ObjectParentIsFile; AIStore: ErrMv); what objmount does "
         "about it: test_conflicts.py")
NAMES = ("AIStore's S3 API cuts names at '?' and, where it redirects, at ';' (objmount refuses both there: "
         "test_aistore.py::test_names_with_a_semicolon_or_question_mark)")
ETAGS = ("checks MD5 ETags; AIStore with xxhash2 gives `v1-...` ETags and objmount proves writes "
         "by its checksum (test_aistore.py::test_etag_form_and_the_proof_of_a_write)")
HOPS = ("counts requests per operation at the fault proxy, which sees each redirected AIStore "
        "request twice (the cluster's proxy and the target, --hop-redirects)")
NATIVE_FAULTS = ("sets its faults per S3 operation at the fault proxy; the native API's "
                 "requests are other ones")
PREFETCH_XX = ("counts GETs at the fault proxy, which sees each redirected request twice; and a "
               "file AIStore's S3 API lists without a version (xxhash2) may be fetched twice, by "
               "its lookup and by the prefetch (a known gap, doc/aistore.md)")
VERSIONS = ("names the versions it expects by their S3 ETags; ais:// names them by AIStore's "
            "version and checksum")
S3_ONLY = "tests an S3 behaviour; ais:// speaks AIStore's native API"

_ALL_AIS = ("aistore", "aistore-proxy", "ais")
_S3_AIS = ("aistore", "aistore-proxy")


def _on(kinds, reason):
    return {k: reason for k in kinds}


TESTS = {
    # namespace
    ("integration/test_mount_namespace.py", "test_marker_only_directories_are_empty_directories"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_mount_namespace.py", "test_marker_directory_stat_is_cold_lookup"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_mount_namespace.py", "test_directory_wins_over_file_of_same_name"):
        _on(("versitygw",) + _ALL_AIS, CLASH),
    ("integration/test_mount_namespace.py", "test_cold_lookup_prefers_directory_over_file"):
        _on(("versitygw",) + _ALL_AIS, CLASH),
    ("integration/test_mount_namespace.py", "test_keys_with_spaces_and_unicode_are_listed_and_read"):
        _on(_ALL_AIS, NAMES + "; the set-up stores them through its S3 API"),
    ("integration/test_mount_namespace.py", "test_stat_fields_match_objects"):
        _on(_ALL_AIS, "AIStore keeps no modification time for an object objmount did not write: "
                      "its listings give the last access time (a read moves it) and a HEAD the "
                      "file's time on the target, so listed and looked-up times differ "
                      "(doc/aistore.md)"),
    ("integration/test_mount_namespace.py", "test_odd_names_are_skipped"):
        {"ais": "injects entries into S3 listings (ListObjectsV2 XML); ais:// lists in JSON"},
    ("integration/test_ns_ops.py", "test_mkdir_stores_a_marker_with_directory_metadata"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_ns_ops.py", "test_rmdir_deletes_the_marker_and_refuses_non_empty_directories"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_ns_ops.py", "test_rename_directory_moves_every_key"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_ns_ops.py", "test_rename_file_is_a_server_side_copy_and_delete"):
        dict(_on(("aistore", "ais"), HOPS), **{"aistore-proxy": META_S3}),
    ("integration/test_ns_ops.py", "test_rename_copies_through_this_host_when_copy_answers_501*"):
        dict(_on(_S3_AIS, META_S3), ais=NATIVE_FAULTS),
    ("integration/test_ns_meta.py", "test_metadata_change_of_a_closed_file_is_a_self_copy"):
        dict(_on(_S3_AIS, META_S3), ais=S3_ONLY),
    ("integration/test_ns_meta.py", "test_directory_metadata_is_stored_on_its_marker"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_ns_meta.py", "test_stat_of_one_name_shows_its_stored_metadata*"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_ls_l_costs_no_head_per_file_and_metadata_shows_after_attr_timeout"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_a_file_replaced_by_a_symlink_gets_a_new_inode"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_find_type_l_finds_listed_symlinks_with_metadata_head"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_symlink_is_stored_as_s3fs_does"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_symlink_written_like_s3fs_reads_back"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_rename_of_a_symlink_moves_the_link"):
        dict(_on(_S3_AIS, META_S3), ais=META_SETUP),
    ("integration/test_ns_meta.py", "test_xattrs_name_the_object"):
        dict(_on(_S3_AIS, META_S3), ais=VERSIONS),
    ("integration/test_ns_tools.py", "test_rsync_a_round_trips"):
        dict(_on(_S3_AIS, META_S3), ais=MARKER),
    ("integration/test_ns_tools.py", "test_close_then_chmod_utime_rename_at_once_keeps_all"):
        _on(_S3_AIS, META_S3),
    ("integration/test_ns_tools.py", "test_a_files_own_time_outlives_its_name_and_attributes_expiring"):
        _on(_S3_AIS, META_S3),
    ("integration/test_ns_tools.py", "test_git_init_commit_fsck_and_clone"):
        _on(_S3_AIS, META_S3),
    ("integration/test_ns_tools.py", "test_cp_a_round_trips"): _on(_ALL_AIS, MARKER),
    ("integration/test_ns_tools.py", "test_tar_x_round_trips"): _on(_ALL_AIS, MARKER),
    ("integration/test_ns_tools.py",
     "test_a_tree_the_kernel_forgot_shows_its_own_times_modes_and_links"): _on(_ALL_AIS, MARKER),
    ("integration/test_ns_tools.py", "test_mv_trees_into_inside_and_out_of_the_mount"):
        _on(_ALL_AIS, MARKER),
    ("integration/test_ns_tools.py", "test_rsync_out_of_a_fresh_mount_round_trips"):
        _on(_ALL_AIS, MARKER),
    # read
    ("integration/test_prefetch_files.py", "test_a_directory_read_in_order_is_fetched_ahead"):
        {"aistore": PREFETCH_XX},
    ("integration/test_prefetch_files.py", "test_every_other_file_in_order_is_a_stride"):
        {"aistore": PREFETCH_XX},
    ("integration/test_prefetch_files.py", "test_a_reader_stopping_halfway_wastes_at_most_a_tenth"):
        {},
    ("integration/test_prefetch_files.py", "test_random_opens_fetch_nothing_ahead"):
        {"aistore": HOPS},
    ("integration/test_prefetch_files.py", "test_a_hinted_shuffled_order_is_fetched_ahead"):
        {"aistore": PREFETCH_XX},
    ("integration/test_prefetch_files.py", "test_a_hint_with_missing_changed_and_odd_names"):
        {},
    ("integration/test_integrity.py", "test_a_read_never_mixes_two_versions*"): {"ais": VERSIONS},
    ("integration/test_integrity.py", "test_recover_push_refuses_an_object_changed_since_staging[overwrite]"):
        dict(_on(("aistore",), ETAGS), ais=VERSIONS),
    ("integration/test_integrity.py", "test_a_commit_failing_verification_leaves_no_corrupt_object[single-put-new-key]"):
        {"aistore": HOPS, "ais": NATIVE_FAULTS},
    ("integration/test_integrity.py", "test_a_commit_failing_verification_leaves_no_corrupt_object[single-put-overwrite]"):
        {"aistore": HOPS, "ais": NATIVE_FAULTS},
    # write
    ("integration/test_write_roundtrip.py", "test_1gib_cp_round_trip_is_byte_identical"):
        {"aistore-proxy": "a 1 GiB multipart copy through AIStore's S3 API runs in the aistore "
                          "pass (the reverse proxy forwards the same requests); the write "
                          "files' multipart tests run here (time of the test command)"},
    ("integration/test_write_hashing.py", "test_each_byte_is_hashed_once_or_twice_by_the_servers_etag_form"):
        _on(("aistore", "ais"), ETAGS),
    ("integration/test_write_hashing.py", "test_verify_read_hashes_the_whole_object_and_the_read_back"):
        _on(("aistore", "ais"), ETAGS),
    ("integration/test_write_safety.py", "test_a_rename_failing_its_delete_keeps_the_old_name_only"):
        dict(_on(_S3_AIS, HOPS), ais=NATIVE_FAULTS),
    ("integration/test_write_safety.py", "test_a_rename_failing_its_copy_keeps_the_file_it_would_replace"):
        {"ais": NATIVE_FAULTS},
    # the S3 protocol
    ("integration/test_s3_client.py", "test_put_then_boto3_reads_identical*"): {"aistore": ETAGS},
    ("integration/test_s3_client.py", "test_odd_keys_round_trip*"): _on(_S3_AIS, NAMES),
    ("integration/test_s3_client.py", "test_if_match_detects_a_changed_object"):
        _on(_S3_AIS, "AIStore ignores If-Match on GET: objmount finds the change by comparing the "
                     "answer's version (EIO, a log line), not by the server's 412"),
    ("integration/test_s3_client.py", "test_listing_1100_keys_across_pages"):
        _on(_S3_AIS, "AIStore answers a listing in one page whatever max-keys asks"),
    ("integration/test_s3_client.py", "test_delimiter_listing_reports_nested_prefixes"):
        {},
    ("integration/test_s3_client.py", "test_copy_delete_and_metadata"): _on(_S3_AIS, META_S3),
    ("integration/test_s3_client.py", "test_wrong_secret_is_a_clear_error"):
        _on(_S3_AIS, "AIStore with authentication off (its default) ignores SigV4: a wrong "
                     "secret is not refused"),
    ("integration/test_s3_client.py", "test_connections_reused_across_requests"):
        _on(_S3_AIS, "AIStore redirects each object request to a target: connections go to the "
                     "proxy and to every target"),
    ("integration/test_server_divergences.py", "test_a_copy_refused_with_412_is_made_again_when_the_etag_is_unchanged"):
        dict(_on(_S3_AIS, "AIStore's CopyObject ignores x-amz-copy-source-if-match: Swift's "
                          "412 cannot arise"), ais=S3_ONLY),
    ("integration/test_server_divergences.py", "test_doctor_names_the_server_and_its_traps"):
        {"ais": S3_ONLY},
}
TESTS = {k: v for k, v in TESTS.items() if v}


def _matches(pattern, name):
    if "[" in pattern:  # one parameter set
        return name == pattern
    base = name.split("[", 1)[0]
    if pattern.endswith("*"):
        return base.startswith(pattern[:-1])
    return base == pattern


def test_skip(path, name, kind):
    """The reason the single test name of path does not run on kind, or
    None; with the TESTS key that gave it."""
    for (p, pattern), kinds in TESTS.items():
        if p == path and kind in kinds and _matches(pattern, name):
            return kinds[kind], (p, pattern)
    return None, None


def unused_skips(path, names, kind):
    """TESTS keys for path and kind that match none of names."""
    return [(p, pat) for (p, pat), kinds in TESTS.items()
            if p == path and kind in kinds and not any(_matches(pat, n) for n in names)]


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
