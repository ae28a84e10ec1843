#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer, then run each for SECONDS (default 60).
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     e.g. tools/fuzz.sh 600 url xml_list
#
# Each target starts from its committed seeds (tests/fuzz/corpus/NAME) plus
# what earlier runs found (build-fuzz/corpus/NAME, not committed). A crash,
# leak, sanitizer report or timeout stops that target; its input is saved as
# build-fuzz/artifacts/NAME-crash-* and the script exits 1 after running the
# rest. Reproduce with: build-fuzz/tests/fuzz/fuzz_NAME FILE
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-60}
[[ $# -gt 0 ]] && shift
targets=("$@")
((${#targets[@]})) || targets=(xml_list ais_list xml_error headers content_range url options creds sidecar ctl
    manifest shard_tar shard_index)

build="$root/build-fuzz"
command -v clang >/dev/null 2>&1 || { echo "fuzz.sh: clang is missing (tools/bootstrap.sh installs it)" >&2; exit 2; }
if [[ ! -f "$build/build.ninja" ]]; then
    CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
        -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$build" >/dev/null

mkdir -p "$build/artifacts"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# FUZZ_JOBS targets at a time (default: the number of cores); each target's
# line is printed when it ends
parallel=${FUZZ_JOBS:-$(nproc)}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
fuzz_one() {
    local t=$1
    local exe="$build/tests/fuzz/fuzz_$t"
    local corpus="$build/corpus/$t"
    mkdir -p "$corpus"
    local log="$build/fuzz-$t.log"
    # -timeout: one input taking 10 s is a hang; the outer timeout bounds a stuck run
    if timeout $((seconds + 60)) "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
        "$corpus" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
        local runs
        runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
        echo "fuzz $t: ok, ${runs:-?} inputs in ${seconds}s, corpus $(ls "$corpus" | wc -l)"
    else
        touch "$results/$t.failed"
        echo "fuzz $t: FAILED (log: $log)"
        grep -aE 'ERROR:|runtime error|SUMMARY|Test unit written' "$log" | head -5 | sed 's/^/    /'
    fi
}
for t in "${targets[@]}"; do
    [[ -x "$build/tests/fuzz/fuzz_$t" ]] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
done
for t in "${targets[@]}"; do
    while (($(jobs -rp | wc -l) >= parallel)); do
        wait -n || true
    done
    fuzz_one "$t" >"$results/$t.out" 2>&1 && cat "$results/$t.out" &
done
wait
failed=()
for t in "${targets[@]}"; do
    [[ -e "$results/$t.failed" ]] && failed+=("$t")
done
if ((${#failed[@]})); then
    echo "fuzz.sh: failures in: ${failed[*]}" >&2
    exit 1
fi
