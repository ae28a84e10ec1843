"""Bash completion of objmountctl (tools/completion/objmountctl, installed
by the package): subcommands, options per subcommand, mount points of
objmount mounts only, BUCKET[:PREFIX] after `uploads list|abort` and
`doctor`, objmount's option names after -o. Driven by bash itself, with a
mounts file of our own (_OBJMOUNTCTL_MOUNTS) so that the answer does not
depend on what else is mounted."""

import os
import re
import shlex
import subprocess

import pytest

from harness.omtools import BUILD_DIR

COMPLETION = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "completion",
                          "objmountctl")

MOUNTS = """\
sysfs /sys sysfs rw,nosuid 0 0
data /mnt/data fuse.objmount rw,nosuid,nodev,user_id=0,group_id=0 0 0
ds:/imagenet/train /mnt/my\\040train fuse.objmount ro,user_id=0,group_id=0 0 0
other /mnt/other fuse.s3fs rw 0 0
/dev/sda1 /srv ext4 rw 0 0
"""


def readline_words(line):
    """Split like bash with the default COMP_WORDBREAKS: spaces separate
    words, a colon is a word of its own, and a line ending in a space has an
    empty current word (one ending in a colon has ":" as its current word)."""
    words = re.findall(r":|[^ :]+", line)
    if line.endswith(" ") or not words:
        words.append("")
    return words


def complete(line, tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    words = readline_words(line)
    script = "source %s\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\nCOMP_LINE=%s\nCOMP_POINT=%d\n" \
             "_objmountctl\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n" % (
                 shlex.quote(COMPLETION), " ".join(shlex.quote(w) for w in words),
                 len(words) - 1, shlex.quote(line), len(line))
    env = dict(os.environ, _OBJMOUNTCTL_MOUNTS=str(mounts),
               PATH=BUILD_DIR + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return sorted(w for w in r.stdout.split("\n") if w)


def test_readline_words_split_like_readline():
    assert readline_words("objmountctl uploads list ds:im") == [
        "objmountctl", "uploads", "list", "ds", ":", "im"]
    assert readline_words("objmountctl ") == ["objmountctl", ""]
    assert readline_words("objmountctl doctor ds:") == ["objmountctl", "doctor", "ds", ":"]


def test_script_is_valid_bash():
    r = subprocess.run(["bash", "-n", COMPLETION], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("line,want", [
    ("objmountctl ", ["--help", "cache", "doctor", "manifest", "prefetch", "recover", "stats",
                      "status", "unmount", "uploads"]),
    ("objmountctl prefetch /x --", ["--append", "--file"]),
    ("objmountctl manifest ", ["build", "show"]),
    ("objmountctl manifest build ds --", ["--output", "--threads"]),
    ("objmountctl manifest show x.omm --", ["--keys"]),
    ("objmountctl cache ", ["drop", "stats", "warm"]),
    ("objmountctl cache warm --", ["--threads"]),
    ("objmountctl st", ["stats", "status"]),
    ("objmountctl status -", ["--json"]),
    ("objmountctl stats -", ["--json", "--prometheus", "--watch"]),
    ("objmountctl unmount --", ["--timeout"]),
    ("objmountctl uploads ", ["abort", "list"]),
    ("objmountctl recover ", ["drop", "list", "push"]),
    ("objmountctl recover push -", ["--all", "--force", "-o"]),
])
def test_subcommands_and_options(line, want, tmp_path):
    assert complete(line, tmp_path) == want


def test_mount_points_are_objmount_mounts_only(tmp_path):
    assert complete("objmountctl stats ", tmp_path) == ["/mnt/data", "/mnt/my\\ train"]
    assert complete("objmountctl unmount /mnt/m", tmp_path) == ["/mnt/my\\ train"]
    assert complete("objmountctl stats --json ", tmp_path) == ["/mnt/data", "/mnt/my\\ train"]
    # one mount point only
    assert complete("objmountctl stats /mnt/data ", tmp_path) == []
    assert complete("objmountctl cache stats ", tmp_path) == ["/mnt/data", "/mnt/my\\ train"]


def test_buckets_after_uploads_and_doctor(tmp_path):
    assert complete("objmountctl uploads list ", tmp_path) == ["data", "ds", "ds:imagenet/train"]
    assert complete("objmountctl uploads abort --older-than 1d d", tmp_path) == [
        "data", "ds", "ds:imagenet/train"]
    assert complete("objmountctl doctor ds", tmp_path) == ["ds", "ds:imagenet/train"]
    assert complete("objmountctl manifest build ds", tmp_path) == ["ds", "ds:imagenet/train"]
    # after the colon readline replaces only what follows it
    assert complete("objmountctl uploads list ds:im", tmp_path) == ["imagenet/train"]
    assert complete("objmountctl doctor ds:", tmp_path) == ["imagenet/train"]
    assert complete("objmountctl uploads list data ", tmp_path) == []


def test_option_names_after_dash_o(tmp_path):
    got = complete("objmountctl doctor data -o end", tmp_path)
    assert got == ["endpoint="], got
    got = complete("objmountctl uploads list data -o ro,end", tmp_path)
    assert got == ["ro,endpoint="], got
