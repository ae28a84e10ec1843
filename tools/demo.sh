#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is missing, build,
# then run the demo (tools/demo.py): a local AIStore cluster (one proxy, two
# targets; its S3 API answers every object request with a 307 to a target),
# a bucket seeded with an ImageFolder tree of JPEGs and an HDF5 file, objmount
# mounting it at the proxy, torch DataLoader epochs over the mount (images/s),
# h5py reads, a torch.save checkpoint written through the mount,
# `objmountctl stats` with the redirects followed, and a clean unmount and
# shutdown. Once installed and built: 14-16 CPU-seconds, 29-31 s on 2 cores at
# a load average of 10-12 from other work (43-58 s at 13-19).
#
#   tools/demo.sh [--server KIND | --direct] [-o OPTS] [--log FILE] [--classes N] [--per-class N]
#       --server KIND  aistore (default), aistore-proxy, ais, versitygw or swift
#       --direct       the same as --server versitygw: a plain S3 server, no redirects
#       -o OPTS        more objmount options (e.g. log_level=debug)
#       --log FILE     keep the daemon's log in FILE
#
# Ctrl-C at any point leaves nothing mounted or running: until the demo
# starts, nothing runs but the installer and the build; from then on
# tools/demo.py (which replaces this shell) unmounts and stops what it started.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== bootstrap (tools/bootstrap.sh: Debian packages and the pinned Go servers)"
"$root/tools/bootstrap.sh" | sed 's/^/   /'

echo "== build"
t0=$(date +%s%N)
if [[ ! -f build/build.ninja ]]; then
    out=$(meson setup build --buildtype=debugoptimized 2>&1) || { printf '%s\n' "$out"; exit 1; }
fi
out=$(ninja -C build 2>&1) || { printf '%s\n' "$out"; exit 1; }
echo "   ninja -C build: ok ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"

echo "== demo"
exec /usr/bin/python3 "$root/tools/demo.py" "$@"
