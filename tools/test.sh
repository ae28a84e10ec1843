#!/usr/bin/env bash
# Run every test of objmount from a fresh clone: install what is missing,
# build, the layers check (tools/layers.sh), unit tests, unit tests under
# AddressSanitizer + UBSan, then the libFuzzer targets for a short bounded
# time (OBJMOUNT_FUZZ_SECONDS, default 12 per target), then the integration,
# fault and loader tests against each server kind of tests/harness/servers.py
# (versitygw, OpenStack Swift with s3api, AIStore's S3 API with redirects
# and xxhash2, AIStore's S3 API through its reverse proxy with md5, AIStore's
# native API), all at once (OBJMOUNT_TEST_SERIAL=1: one after the other),
# each on OBJMOUNT_TEST_WORKERS (default 2) pytest-xdist workers.
# tests/matrix.py says which test file runs on which server.
#
#   tools/test.sh                  everything, every server
#   tools/test.sh --server swift   the Python suites against one server only
#   tools/test.sh -k EXPR          pass EXPR to pytest (unit tests still run)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# each header says how far into the run it is printed
phase() { printf '== %s (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

"$root/tools/bootstrap.sh"

build="$root/build"
asan="$root/build-asan"

phase "build"
[[ -f "$build/build.ninja" ]] || meson setup "$build" --buildtype=debugoptimized >/dev/null
ninja -C "$build"

phase "layers: no upward call or include, no circle between files (doc/architecture.md)"
"$root/tools/layers.sh" "$build"

phase "unit tests"
meson test -C "$build" --suite unit --print-errorlogs

phase "unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
[[ -f "$asan/build.ninja" ]] ||
    meson setup "$asan" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C "$asan"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    meson test -C "$asan" --suite unit --print-errorlogs

phase "fuzz targets, ${OBJMOUNT_FUZZ_SECONDS:-12} s each (tools/fuzz.sh for longer runs)"
"$root/tools/fuzz.sh" "${OBJMOUNT_FUZZ_SECONDS:-12}"

export OBJMOUNT_BUILD_DIR="$build"
servers=(versitygw swift aistore aistore-proxy ais)
for a in "$@"; do
    [[ $a == --server || $a == --server=* ]] && servers=(given)
done
# Each pass runs its test files on OBJMOUNT_TEST_WORKERS pytest-xdist workers
# (default 2; 1 runs them in one process), a file whole on one worker so its
# module fixtures are built once; every worker starts its own servers.
workers=${OBJMOUNT_TEST_WORKERS:-2}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
run_pass() {
    local s=$1
    shift
    local server_arg=() xdist=()
    [[ $s == given ]] || server_arg=(--server "$s")
    ((workers > 1)) && xdist=(-n "$workers" --dist loadfile)
    /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=15 "${xdist[@]}" \
        --junitxml="$results/$s.xml" "$root/tests" "${server_arg[@]}" "$@"
}

status=0
if ((${#servers[@]} > 1)) && [[ -z ${OBJMOUNT_TEST_SERIAL:-} ]]; then
    # The passes against the servers run at once (each has its own
    # servers, ports, mount points and buckets; the few machine-wide things,
    # such as /sbin/mount.objmount, are taken under a lock by the harness);
    # each pass's output is printed whole when it ends.
    # OBJMOUNT_TEST_SERIAL=1 runs them one after the other.
    logs=$results
    pids=()
    for s in "${servers[@]}"; do
        run_pass "$s" "$@" >"$logs/$s.log" 2>&1 &
        pids+=($!)
    done
    phase "integration, fault and loader tests: ${servers[*]} at once"
    for i in "${!servers[@]}"; do
        rc=0
        wait "${pids[$i]}" || rc=$?
        phase "integration, fault and loader tests against ${servers[$i]} (exit $rc)"
        cat "$logs/${servers[$i]}.log"
        ((rc == 0)) || status=1
    done
else
    for s in "${servers[@]}"; do
        phase "integration, fault and loader tests against ${s/given/the given server}"
        run_pass "$s" "$@" || status=1
    done
fi
if ((${#servers[@]} > 1)) && (($# == 0)); then
    # every pass of the whole suite ran: a test skipped in all of them never
    # runs anywhere (tools/skip_guard.py)
    phase "skip guard: no test skipped on every server"
    /usr/bin/python3 "$root/tools/skip_guard.py" "$results"/*.xml || status=1
fi
phase "done, exit $status"
exit $status
