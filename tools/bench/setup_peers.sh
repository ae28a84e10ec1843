#!/bin/bash
# Build (once) the Python environment of the loader libraries that
# tools/bench/loaders.py and tools/bench/dlio.py compare objmount with.
#
#   tools/bench/setup_peers.sh          build if needed, print the venv's python
#   tools/bench/setup_peers.sh --check  only say whether it is built (exit 1 if not)
#
# The venv is ~/.cache/objmount/peers-venv-HASH, HASH the first 12 hex digits
# of the SHA-256 of tools/bench/requirements-peers.txt: a changed pin builds
# a new venv, an unchanged one costs nothing. ~/.cache/objmount/peers-venv
# links to the newest. It is made from Debian's /usr/bin/python3 with
# --system-site-packages (Debian's torch, numpy, h5py, Pillow: see the
# requirements file for why) and filled with pip --no-deps from PyPI only;
# the system Python's own site-packages are never written. tools/test.sh
# never calls this. Needs Debian's Open MPI for DLIO's mpi4py (installed
# here with apt-get when libmpi.so.40 is missing).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements-peers.txt
cache=${OBJMOUNT_CACHE:-$HOME/.cache/objmount}
hash=$(sha256sum "$req" | cut -c1-12)
venv=$cache/peers-venv-$hash
py=$venv/bin/python

if [ -f "$venv/.complete" ]; then
    echo "$py"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "peers venv not built: run tools/bench/setup_peers.sh" >&2
    exit 1
fi

for m in torch numpy h5py PIL psutil; do
    /usr/bin/python3 -c "import $m" 2>/dev/null || {
        echo "setup_peers: Debian's python3 lacks $m (tools/bootstrap.sh installs it)" >&2
        exit 1
    }
done
if ! ldconfig -p | grep -q 'libmpi\.so\.40 '; then
    echo "setup_peers: installing Debian's Open MPI for DLIO's mpi4py" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openmpi-bin libopenmpi3 >&2
fi

start=$(date +%s)
rm -rf "$venv"
mkdir -p "$cache"
/usr/bin/python3 -m venv --system-site-packages "$venv" >&2
# --no-deps: requirements-peers.txt lists every package; none may replace
# Debian's numpy or pull a CUDA torch. The download cache keeps a rebuild
# (a changed pin) from fetching the large wheels again.
"$venv/bin/pip" install --no-deps --disable-pip-version-check -q \
    --cache-dir "$cache/pip" -r "$req" >&2

# Each library must import (a missing runtime dependency fails here, not in
# the middle of a benchmark run).
"$py" - >&2 <<'PY'
import importlib, sys
fails = []
for m in ("s3torchconnector", "s3dlio", "nvidia.dali.fn", "aistore.sdk", "aistore.pytorch",
          "torch.utils.data", "numpy", "h5py", "mpi4py.MPI", "hydra", "pandas"):
    try:
        importlib.import_module(m)
    except Exception as e:  # noqa: BLE001
        fails.append("%s: %s: %s" % (m, type(e).__name__, e))
if fails:
    sys.exit("setup_peers: imports failed:\n  " + "\n  ".join(fails))
PY
touch "$venv/.complete"
ln -sfn "$venv" "$cache/peers-venv"
echo "setup_peers: built $venv in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)" \
     "(pip download cache $(du -sh "$cache/pip" | cut -f1))" >&2
echo "$py"
