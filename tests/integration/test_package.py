"""The Debian package: `dpkg-buildpackage -us -uc -b` builds objmount_*.deb
from the tracked files of this tree (in a copy, bounded in time); lintian
finds no error; the package holds the programs where mount(8) and PATH find
them, the man pages, the bash completion and objmount@.service, and depends
on fuse3 and the shared libraries it links.

Then the package is used the way an installed one is, without touching the
machine: it is unpacked (dpkg -x) and laid over /usr in a private mount
namespace (unshare -m, a read-only overlay), where, with no environment but
PATH as at boot, `mount -t objmount` mounts a bucket through the installed
/usr/sbin/mount.objmount and /usr/bin/objmount, an fstab line with
`_netdev,x-systemd.automount` mounts through `mount -a -T FSTAB`, the
installed objmountctl sees both, `systemd-analyze verify` accepts the
installed unit with its man pages, and the completion loads. Every mount is
undone before the namespace ends (a lazy unmount on any exit)."""

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import textwrap

import pytest

from harness import admin
from harness.mount import _stop_pid, daemon_pids, payload, seed

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_TIMEOUT = 900  # seconds; about 10 s on an idle machine

needs = [t for t in ("dpkg-buildpackage", "dh", "unshare") if not shutil.which(t)]
pytestmark = pytest.mark.skipif(bool(needs), reason="not installed: %s (tools/bootstrap.sh)"
                                % " ".join(needs))


def tracked_files():
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                        "--exclude-standard"], capture_output=True, timeout=60)
    if r.returncode != 0:
        pytest.skip("not a git checkout: %s" % r.stderr.decode(errors="replace"))
    return [f for f in r.stdout.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT,
                                                                                         f))]


def tree_digest(files):
    """SHA-256 over the names and bytes of the files the package is built from."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.encode() + b"\0")
        with open(os.path.join(ROOT, f), "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


# One build per tree: the passes against the servers (which run at
# once) and their workers share it, the first builds it under the lock.
DEB_CACHE = os.path.join(tempfile.gettempdir(), "objmount-test-deb")


def build_deb(top, files):
    src = top / "objmount"
    for f in files:
        dst = src / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), dst)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2")
    try:
        r = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("dpkg-buildpackage took more than %d s" % BUILD_TIMEOUT)
    assert r.returncode == 0, "dpkg-buildpackage failed:\n%s\n%s" % (r.stdout[-4000:],
                                                                      r.stderr[-4000:])
    debs = glob.glob(str(top / "objmount_*.deb"))
    assert len(debs) == 1, os.listdir(top)
    return debs[0]


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """Build the package in a copy of the tree; the path of objmount_*.deb.
    A package built from the same tracked bytes is taken from DEB_CACHE."""
    files = tracked_files()
    digest = tree_digest(files)
    top = tmp_path_factory.mktemp("deb")
    os.makedirs(DEB_CACHE, exist_ok=True)
    with open(os.path.join(DEB_CACHE, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = glob.glob(os.path.join(DEB_CACHE, digest, "objmount_*.deb"))
        if cached:
            return shutil.copy2(cached[0], str(top))
        built = build_deb(top, files)
        for old in os.listdir(DEB_CACHE):  # one tree's package is kept
            if old != "lock":
                shutil.rmtree(os.path.join(DEB_CACHE, old), ignore_errors=True)
        keep = os.path.join(DEB_CACHE, digest + ".new")
        os.makedirs(keep)
        shutil.copy2(built, keep)
        os.rename(keep, os.path.join(DEB_CACHE, digest))
        return built


def dpkg_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_package_contents_and_dependencies(deb):
    files = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                           check=True).stdout
    paths = {ln.split()[5].lstrip(".") for ln in files.splitlines()}
    for want in ("/usr/bin/objmount", "/usr/bin/objmountctl", "/usr/sbin/mount.objmount",
                 "/usr/share/man/man8/objmount.8.gz", "/usr/share/man/man8/objmountctl.8.gz",
                 "/usr/share/man/man8/mount.objmount.8.gz",
                 "/usr/share/bash-completion/completions/objmountctl",
                 "/lib/systemd/system/objmount@.service",
                 "/usr/share/doc/objmount/copyright",
                 "/usr/share/doc/objmount/json.md.gz", "/usr/share/doc/objmount/install.md.gz"):
        assert want in paths, "%s not in the package:\n%s" % (want, files)
    assert "/usr/sbin/objmount" not in paths
    deps = [d.strip().split()[0] for d in dpkg_field(deb, "Depends").split(",")]
    for want in ("fuse3", "libfuse3-3", "libcurl4", "libssl3", "libxml2", "libxxhash0", "libjansson4",
                 "libc6"):
        assert want in deps, deps
    assert dpkg_field(deb, "Package") == "objmount"


@pytest.mark.skipif(not shutil.which("lintian"), reason="lintian not installed")
def test_lintian_finds_no_error_or_warning(deb):
    r = subprocess.run(["lintian", "--fail-on", "error,warning", deb], capture_output=True,
                       text=True, timeout=600)
    tags = [ln for ln in r.stdout.splitlines() if ln[:2] in ("E:", "W:")]
    assert r.returncode == 0 and not tags, r.stdout + r.stderr


@pytest.fixture
def unpacked(deb, tmp_path):
    """The package unpacked, its /lib moved under /usr (this system has
    merged /usr, as Debian 12 does), ready to lay over /usr."""
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", deb, str(root)], check=True, timeout=120)
    if (root / "lib").is_dir():
        shutil.copytree(root / "lib", root / "usr" / "lib", dirs_exist_ok=True)
        shutil.rmtree(root / "lib")
    return root


def in_package_namespace(root, script, timeout=180):
    """Run a bash script in a private mount namespace where the package's
    /usr lies over the machine's and no FUSE mount of the machine's is
    left, with PATH only as environment. Mounts
    under /tmp made by the script must be undone by it (the prologue's trap
    lazily unmounts the ones listed in $MOUNTS on any exit)."""
    prologue = textwrap.dedent("""\
        set -euo pipefail
        # The namespace starts with copies of the machine's mounts. A copy of
        # another test's FUSE mount would keep its daemon alive after that
        # test unmounts it outside: drop the copies first (here only).
        awk '$3 ~ /^fuse/ {{ print $2 }}' /proc/self/mounts | while IFS= read -r m; do
            umount -l "$(printf '%b' "$m")" 2>/dev/null || true
        done
        MOUNTS=""
        cleanup() {{ for m in $MOUNTS; do umount -l "$m" 2>/dev/null || true; done; }}
        trap cleanup EXIT
        trap 'exit 1' TERM
        mount -t overlay objmount-package -o lowerdir={root}/usr:/usr /usr
        """).format(root=root)
    # timeout(1) inside, so that the trap undoes the mounts (and their daemons
    # exit) even when a step hangs; the outer bound is a last resort
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "timeout", "-k", "10",
                        str(timeout), "bash", "-c", prologue + script], capture_output=True,
                       text=True, timeout=timeout + 30,
                       env={"PATH": admin.CLEAN_PATH, "LC_ALL": "C.UTF-8"})
    return r


def test_installed_package_mounts_with_mount_t_and_fstab(unpacked, s3server, s3client, bucket,
                                                         tmp_path):
    want = payload("pkg", 200000)
    seed(s3client, bucket, {"train/a.bin": want, "top.txt": b"top\n"})
    creds = admin.write_credentials(str(tmp_path / "creds"))
    (tmp_path / "want.bin").write_bytes(want)
    m1, m2 = tmp_path / "m1", tmp_path / "m2"
    m1.mkdir()
    m2.mkdir()
    fstab = tmp_path / "fstab"
    opts = "endpoint=%s,credentials=%s,cache_dir=%s" % (s3server.endpoint, creds,
                                                        tmp_path / "cache")
    fstab.write_text("# objmount from fstab, as at boot\n"
                     "%s:/train  %s  objmount  _netdev,x-systemd.automount,ro,%s  0 0\n"
                     % (bucket, m2, opts))
    script = textwrap.dedent("""\
        test "$(command -v objmount)" = /usr/bin/objmount
        test -x /sbin/mount.objmount
        MOUNTS="{m1} {m2}"
        mount -t objmount {bucket} {m1} -o {opts}
        cmp {m1}/train/a.bin {want}
        cat {m1}/top.txt
        mount -a -T {fstab}
        cmp {m2}/a.bin {want}
        grep -E " ({m1}|{m2}) fuse.objmount " /proc/self/mounts
        objmountctl status --json > {out}/status.json
        umount {m1}
        umount {m2}
        if grep -E " ({m1}|{m2}) " /proc/self/mounts; then echo "still mounted"; exit 1; fi
        echo ok
        """).format(bucket=bucket, m1=m1, m2=m2, opts=opts, want=tmp_path / "want.bin",
                    fstab=fstab, out=tmp_path)
    try:
        r = in_package_namespace(unpacked, script)
    finally:
        for m in (m1, m2):  # daemons left by a step that failed or hung
            for pid in daemon_pids(str(m)):
                _stop_pid(pid)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.stdout + r.stderr
    assert "top" in r.stdout
    lines = [ln for ln in r.stdout.splitlines() if "fuse.objmount" in ln]
    assert len(lines) == 2 and any(" ro," in ln or " ro " in ln for ln in lines), lines
    status = json.load(open(tmp_path / "status.json"))
    mine = {o["mountpoint"]: o for o in status if o["mountpoint"] in (str(m1), str(m2))}
    assert mine[str(m1)]["bucket"] == bucket and mine[str(m1)]["read_only"] is False, mine
    assert mine[str(m2)]["prefix"].strip("/") == "train" and mine[str(m2)]["read_only"], mine


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_installed_unit_verifies_and_completion_loads(unpacked):
    script = textwrap.dedent("""\
        systemd-analyze verify /usr/lib/systemd/system/objmount@.service
        bash --norc -c 'source /usr/share/bash-completion/completions/objmountctl &&
                        complete -p objmountctl'
        man -w objmount objmountctl mount.objmount
        echo ok
        """)
    r = in_package_namespace(unpacked, script)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.stdout + r.stderr
    assert not r.stderr.strip(), r.stderr
    assert "complete -F _objmountctl objmountctl" in r.stdout
