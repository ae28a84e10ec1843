"""The pinned Go programs of tools/go-servers.lock, where tools/bootstrap.sh
builds them: $OBJMOUNT_GO_CACHE (default ~/.cache/objmount/go)/NAME-VERSION/NAME."""

import os

from .procs import REPO_ROOT, ServerNotInstalled

LOCK = os.path.join(REPO_ROOT, "tools", "go-servers.lock")


def cache_dir():
    return os.environ.get("OBJMOUNT_GO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "objmount", "go")


def pinned():
    """{name: (package, version, tags)} from the lock file."""
    out = {}
    with open(LOCK) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and not parts[0].startswith("#"):
                out[parts[0]] = tuple(parts[1:])
    return out


def version(name):
    return pinned()[name][1]


def path(name):
    """The built program, or ServerNotInstalled saying how to build it."""
    p = os.path.join(cache_dir(), "%s-%s" % (name, version(name)), name)
    if not os.access(p, os.X_OK):
        raise ServerNotInstalled("%s %s is not built (%s missing): run tools/bootstrap.sh"
                                 % (name, version(name), p))
    return p
