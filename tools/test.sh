#!/usr/bin/env bash
# Run every test of objmount from a fresh clone: install what is missing,
# build, the layers check (tools/layers.sh), unit tests, unit tests under
# AddressSanitizer + UBSan, then the libFuzzer targets for a short bounded
# time (OBJMOUNT_FUZZ_SECONDS, default 12 per target), then the integration,
# fault and loader tests against each real S3 server: s3rver, then OpenStack
# Swift with s3api.
#
#   tools/test.sh                  everything, both servers
#   tools/test.sh --server swift   the Python suites against one server only
#   tools/test.sh -k EXPR          pass EXPR to pytest (unit tests still run)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/tools/bootstrap.sh"

build="$root/build"
asan="$root/build-asan"

echo "== build"
[[ -f "$build/build.ninja" ]] || meson setup "$build" --buildtype=debugoptimized >/dev/null
ninja -C "$build"

echo "== layers: no upward call or include, no circle between files (doc/architecture.md)"
"$root/tools/layers.sh" "$build"

echo "== unit tests"
meson test -C "$build" --suite unit --print-errorlogs

echo "== unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
[[ -f "$asan/build.ninja" ]] ||
    meson setup "$asan" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C "$asan"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    meson test -C "$asan" --suite unit --print-errorlogs

echo "== fuzz targets, ${OBJMOUNT_FUZZ_SECONDS:-12} s each (tools/fuzz.sh for longer runs)"
"$root/tools/fuzz.sh" "${OBJMOUNT_FUZZ_SECONDS:-12}"

export OBJMOUNT_BUILD_DIR="$build"
servers=(s3rver swift)
for a in "$@"; do
    [[ $a == --server || $a == --server=* ]] && servers=(given)
done
status=0
for s in "${servers[@]}"; do
    server_arg=()
    [[ $s == given ]] || server_arg=(--server "$s")
    echo "== integration, fault and loader tests against ${s/given/the given server}"
    /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=15 "$root/tests" \
        "${server_arg[@]}" "$@" ||
        status=1
done
exit $status
