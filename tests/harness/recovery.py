"""objmount's staging and recovery directories, read as a user would.

    from harness.recovery import entries, read_sidecar, recovery_entries
    entries(cache_dir, "staging")      # sorted file names in CACHE_DIR/staging
    recovery_entries(cache_dir)        # [(data path, sidecar dict)] in recovery/
    read_sidecar(path)                 # one sidecar as a dict of strings; size an int

A sidecar is text: a first line "objmount-sidecar 1", then one "name=value"
line per field, values percent-encoded where they hold '%', control bytes
or non-ASCII bytes (keys may hold newlines). doc/decisions.md describes it.
"""

import os
import urllib.parse

SIDECAR_SUFFIX = ".sidecar"


def entries(cache_dir, sub):
    d = os.path.join(cache_dir, sub)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def read_sidecar(path):
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    assert lines[0] == b"objmount-sidecar 1", "not a sidecar: %r" % lines[:2]
    out = {}
    for ln in lines[1:]:
        if not ln:
            continue
        name, sep, value = ln.partition(b"=")
        assert sep, "a sidecar line without '=': %r" % ln
        out[name.decode()] = urllib.parse.unquote_to_bytes(value).decode("utf-8", "replace")
    for num in ("size", "pid", "mode"):
        if num in out:
            out[num] = int(out[num])
    return out


def recovery_entries(cache_dir, key=None):
    """Every (data path, sidecar) in CACHE_DIR/recovery (for key, when
    given), sorted by file name; a data file without a sidecar fails."""
    found = []
    d = os.path.join(cache_dir, "recovery")
    for n in entries(cache_dir, "recovery"):
        if not n.endswith(".data"):
            continue
        data = os.path.join(d, n)
        side = data[:-len(".data")] + SIDECAR_SUFFIX
        assert os.path.exists(side), "no sidecar beside %s: %s" % (data, os.listdir(d))
        meta = read_sidecar(side)
        if key is None or meta.get("key") == key:
            found.append((data, meta))
    return found
