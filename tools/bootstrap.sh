#!/usr/bin/env bash
# Install every build and test dependency of objmount on Debian 12, then the
# pinned Go servers (tools/go-servers.lock: versitygw, AIStore's aisnode and
# aisloader, built once from the Go module proxy into a cache). Idempotent:
# what is present is left alone. No npm package is installed: Node.js runs
# the fault proxy (tools/faultproxy), which uses its standard library only.
#
#   tools/bootstrap.sh            everything (build, tests, loaders, benchmarks)
#   tools/bootstrap.sh --check    report what is missing, install nothing
#
# Exits non-zero with a clear message when a package cannot be installed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

# Build: compiler, meson, the libraries objmount links.
build_pkgs=(gcc pkg-config meson ninja-build libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev
            libxml2-dev libxxhash-dev libjansson-dev check)
# Tests: the fault proxy runs on Node.js; data is seeded and checked with boto3;
# tree tools and s3fs-fuse check compatibility; the loaders are Debian's.
test_pkgs=(python3 python3-boto3 python3-pytest python3-pytest-xdist curl psmisc rsync git s3fs
           iproute2  # AIStore's intra-cluster address on the loopback device
           python3-pil python3-numpy python3-h5py python3-torch python3-torchvision
           dpkg-dev debhelper lintian systemd man-db  # the Debian package test
           gdb)  # the threads of a daemon that hangs, in the failure report
# Fuzzing (tools/fuzz.sh): clang with libFuzzer and the sanitizer runtimes.
fuzz_pkgs=(clang libclang-rt-14-dev llvm)
# Benchmarks: the peers and the tools that measure them.
bench_pkgs=(rclone fio python3-matplotlib)
# The second test server: OpenStack Swift with s3api, all in one (tests/harness/swiftserver.py).
swift_pkgs=(swift swift-proxy swift-object swift-container swift-account python3-swift memcached)

check_only=false
[[ "${1:-}" == "--check" ]] && check_only=true

say() { printf 'bootstrap: %s\n' "$*"; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

missing_pkgs() {
    # one dpkg-query for all of them (one per package took 2.5 s of every
    # demo run); a package dpkg does not know is simply not listed
    local p name status
    local -A have=()
    while read -r name status; do
        [[ $status == "install ok installed" ]] && have[${name%%:*}]=1
    done < <(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true)
    for p in "$@"; do
        [[ -n ${have[$p]:-} ]] || printf '%s\n' "$p"
    done
}

run_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run: $* (run this script as root or install sudo)"
    fi
}

command -v dpkg-query >/dev/null 2>&1 || die "this script needs Debian (dpkg-query not found)"

wanted=("${build_pkgs[@]}" "${test_pkgs[@]}" "${fuzz_pkgs[@]}" "${bench_pkgs[@]}" "${swift_pkgs[@]}")
# Node.js for the fault proxy: Debian's nodejs unless a node is already
# installed (e.g. from NodeSource).
if ! command -v node >/dev/null 2>&1; then
    wanted+=(nodejs)
fi

mapfile -t todo < <(missing_pkgs "${wanted[@]}")
if ((${#todo[@]})); then
    if $check_only; then
        say "missing Debian packages: ${todo[*]}"
        exit 1
    fi
    say "installing: ${todo[*]}"
    export DEBIAN_FRONTEND=noninteractive
    run_root apt-get update -qq || die "apt-get update failed (is the Debian archive reachable?)"
    # Swift's and memcached's packages start system services; the tests start
    # their own. A policy-rc.d exiting 101 keeps them stopped during the
    # install; one created here is removed afterwards.
    policy=/usr/sbin/policy-rc.d
    made_policy=false
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' | run_root tee "$policy" >/dev/null
        run_root chmod 755 "$policy"
        made_policy=true
    fi
    installed=true
    run_root apt-get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null || installed=false
    ! $made_policy || run_root rm -f "$policy"
    $installed || die "apt-get install failed for: ${todo[*]}"
    mapfile -t still < <(missing_pkgs "${todo[@]}")
    ((${#still[@]} == 0)) || die "packages still missing after install: ${still[*]}"
else
    say "Debian packages present"
fi

command -v node >/dev/null 2>&1 || die "node not found after installing nodejs"
[[ -e /dev/fuse ]] || say "warning: /dev/fuse is missing: FUSE mounts will fail"

# The Go servers of the tests and benchmarks (tools/go-servers.lock), each
# built once into $OBJMOUNT_GO_CACHE (default ~/.cache/objmount/go) as
# NAME-VERSION/NAME: a second run finds it and costs nothing. Built in a
# throw-away module with `go get PACKAGE@VERSION` and `go build`, as their
# Makefiles do (CGO off, -trimpath, their tags): `go install PKG@VERSION`
# refuses AIStore, whose module list the proxy does not serve.
go_cache=${OBJMOUNT_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/objmount/go}
go_missing=()
while read -r name pkg version tags; do
    [[ -z $name || $name == \#* ]] && continue
    [[ -x "$go_cache/$name-$version/$name" ]] || go_missing+=("$name $pkg $version $tags")
done <"$root/tools/go-servers.lock"
if ((${#go_missing[@]} == 0)); then
    say "Go servers present ($go_cache)"
elif $check_only; then
    say "Go servers missing in $go_cache: $(printf '%s; ' "${go_missing[@]}")"
    exit 1
else
    command -v go >/dev/null 2>&1 ||
        die "go not found: the Go servers need Go 1.26 or later (https://go.dev/dl, or the machine's own)"
    gov=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
    [[ $(printf '%s\n1.26\n' "${gov%%[!0-9.]*}" | sort -V | head -1) == 1.26 ]] ||
        die "go $gov is too old: the Go servers need Go 1.26 or later"
    for line in "${go_missing[@]}"; do
        read -r name pkg version tags <<<"$line"
        say "building $name $version from the Go module proxy (once; cached in $go_cache)"
        work=$(mktemp -d)
        printf 'module objmount.local/build\n\ngo 1.26\n' >"$work/go.mod"
        tagflag=()
        [[ $tags == - ]] || tagflag=(-tags "$tags")
        if (cd "$work" && go get "$pkg@$version" >"$work/log" 2>&1 &&
            CGO_ENABLED=0 go build -trimpath "${tagflag[@]}" -ldflags "-s -w -X main.build=$version" \
                -o "$work/$name" "$pkg" >>"$work/log" 2>&1); then
            mkdir -p "$go_cache/$name-$version"
            mv "$work/$name" "$go_cache/$name-$version/$name"
            rm -rf "$work"
        else
            tail -20 "$work/log" >&2
            rm -rf "$work"
            die "could not build $name $version (is the Go module proxy reachable?)"
        fi
    done
fi
say "ready"
