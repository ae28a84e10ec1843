"""Man pages render, and `meson install` puts the programs and pages where
they belong, side by side so the installed mount helper finds the installed
daemon. Nothing is rebuilt (--no-rebuild): the test looks at the build the
other tests use."""

import os
import re
import shutil
import subprocess

import pytest

from harness.omtools import BUILD_DIR

PAGES = ["objmount.8", "mount.objmount.8", "objmountctl.8"]


@pytest.mark.parametrize("page", PAGES)
def test_man_page_renders_without_warnings(page):
    path = os.path.join(BUILD_DIR, page)
    assert os.path.exists(path), "%s is not generated into the build" % path
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), "groff warnings for %s:\n%s" % (page,
                                                                                     r.stderr)
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", path], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80"))
        assert r.returncode == 0, r.stderr
        text = r.stdout
        name = page[:-2]
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
            assert section in text, "%s lacks %s" % (page, section)
        assert name in text
        assert not re.search(r"@[A-Za-z_]+@", text), "an unsubstituted @VAR@ in %s" % page


def test_meson_install_puts_programs_and_pages_in_place(tmp_path):
    dest = str(tmp_path / "dest")
    r = subprocess.run(["meson", "install", "-C", BUILD_DIR, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    found = {}
    for d, _, files in os.walk(dest):
        for f in files:
            if "/bash-completion/" not in d:  # the completion is named after the program
                found.setdefault(f, []).append(os.path.join(d, f))
    for prog in ("objmount", "mount.objmount", "objmountctl"):
        assert len(found.get(prog, [])) == 1, "%s installed %s times: %s" % (
            prog, len(found.get(prog, [])), found.get(prog))
        assert os.access(found[prog][0], os.X_OK)
    for page in PAGES:
        paths = found.get(page, [])
        assert len(paths) == 1 and paths[0].endswith("/man8/" + page), (page, paths)
    prefix = os.path.dirname(os.path.dirname(found["objmountctl"][0]))
    assert os.path.exists(os.path.join(prefix, "share", "bash-completion", "completions",
                                       "objmountctl")), "no bash completion under %s" % prefix
    assert len(found.get("objmount@.service", [])) == 1 and found["objmount@.service"][0].endswith(
        "/lib/systemd/system/objmount@.service"), found.get("objmount@.service")
    # the daemon and objmountctl in bin, the helper in sbin where mount(8) looks,
    # and the installed helper runs the installed daemon
    helper, daemon = found["mount.objmount"][0], found["objmount"][0]
    assert helper.endswith("/sbin/mount.objmount"), helper
    assert daemon.endswith("/bin/objmount") and not daemon.endswith("/sbin/objmount"), daemon
    assert found["objmountctl"][0].endswith("/bin/objmountctl"), found["objmountctl"]
    assert os.path.dirname(os.path.dirname(helper)) == os.path.dirname(os.path.dirname(daemon))
    r = subprocess.run([helper, "b", str(tmp_path), "-f", "-o", "ro"], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.split("mount.objmount: ", 1)[-1].split()[0] == daemon, r.stderr
