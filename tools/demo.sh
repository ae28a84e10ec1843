#!/usr/bin/env bash
# The main job: install what is missing, build, start a local S3 server, and
# show objmount's client at work on a small dataset through AIStore-style
# redirects. Ctrl-C at any point leaves nothing running.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/tools/bootstrap.sh"
[[ -f build/build.ninja ]] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build >/dev/null

work=$(mktemp -d /tmp/objmount-demo.XXXXXX)
state="$work/s3rver.json"
proxy_pid=
cleanup() {
    trap - EXIT INT TERM
    [[ -n "$proxy_pid" ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
    [[ -f "$state" ]] && /usr/bin/python3 tests/harness/s3server.py stop --state-file "$state"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

echo "== starting a local S3 server (s3rver) on a free loopback port"
/usr/bin/python3 tests/harness/s3server.py start --state-file "$state" --bucket demo >"$work/srv"
endpoint=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$work/srv")
echo "   $endpoint"

echo "== starting the fault proxy in AIStore mode (every object request answered with 307)"
node tools/faultproxy/faultproxy.js --upstream "$endpoint" --listen 127.0.0.1:0 \
    --gateway 127.0.0.1:0 --target 127.0.0.1:0 --control 127.0.0.1:0 \
    --port-file "$work/ports" >"$work/proxy.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 100); do [[ -s "$work/ports" ]] && break; sleep 0.1; done
gateway=$(/usr/bin/python3 -c 'import json,sys; print("http://127.0.0.1:%d/s3" % json.load(open(sys.argv[1]))["gateway"])' "$work/ports")
echo "   AIStore-style gateway: $gateway"

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
om() { build/tools/om-s3 -o "endpoint=$gateway" "$@"; }

echo "== writing 20 files of 100 KiB and one 24 MiB file (multipart) through the gateway"
mkdir -p "$work/data"
for i in $(seq -w 1 20); do head -c 102400 /dev/urandom >"$work/data/img_$i.jpg"; done
head -c $((24 << 20)) /dev/urandom >"$work/data/shard.tar"
for f in "$work"/data/img_*.jpg; do om demo put "train/$(basename "$f")" "$f" >/dev/null; done
om --stats demo mpu train/shard.tar "$work/data/shard.tar" 8M

echo "== listing (the gateway answers with one page)"
om demo list --prefix train/ --delimiter / | head -5
echo "   ..."

echo "== reading everything back and comparing byte for byte"
t0=$(date +%s%N)
for f in "$work"/data/img_*.jpg; do
    om demo get "train/$(basename "$f")" | cmp - "$f"
done
om --stats demo get train/shard.tar | cmp - "$work/data/shard.tar"
t1=$(date +%s%N)
echo "   all identical ($(( (t1 - t0) / 1000000 )) ms)"
echo "== done"
