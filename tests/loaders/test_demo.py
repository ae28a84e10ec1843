"""tools/demo.py (the body of the README's main job, tools/demo.sh) runs to
the end, and a Ctrl-C in the middle of its DataLoader epoch leaves nothing
mounted, running or on disk. Small data set (2 classes x 8 images).

The demo starts its own server, a local AIStore cluster (its default),
whatever server the pass selected: the test runs in one pass only
(tests/matrix.py)."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("torchvision")

from harness.procs import REPO_ROOT  # noqa: E402

DEMO = [sys.executable, os.path.join(REPO_ROOT, "tools", "demo.py"), "--classes", "2",
        "--per-class", "8"]


def start():
    """The demo in its own session, as a terminal's foreground job: Ctrl-C
    reaches the whole process group (demo.py and its DataLoader workers).
    A thread passes its output lines on (p.output; None at the end)."""
    p = subprocess.Popen(DEMO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, bufsize=1)
    p.output = queue.Queue()

    def pump():
        for line in p.stdout:
            p.output.put(line)
        p.output.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return p


def leftovers(work, port):
    """Processes naming the demo's work directory or the AIStore proxy's
    port (the daemon, the proxy and targets, whose configuration lies in
    the work directory), and mounts under the work directory."""
    procs = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if work in cmd or "127.0.0.1:%s" % port in cmd:
            procs.append("%s: %s" % (d, cmd))
    with open("/proc/mounts") as f:
        mounts = [line for line in f if work in line]
    return procs, mounts


def lines_until(p, lines, deadline):
    """p's output lines, each appended to lines as it comes; the demo's
    process group is killed and the test fails at the deadline, whether or
    not lines still come (a demo that hung once waited for the CI's
    limit)."""
    while True:
        try:
            line = p.output.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
            raise AssertionError("the demo did not end in time (killed):\n" + "".join(lines))
        if line is None:
            return
        lines.append(line)
        yield line


def finish(p, lines, timeout=120):
    for _ in lines_until(p, lines, time.monotonic() + timeout):
        pass
    return p.wait(timeout=30)


def read_until(p, lines, pattern, timeout=120):
    for line in lines_until(p, lines, time.monotonic() + timeout):
        if re.search(pattern, line):
            return
    raise AssertionError("the demo ended before %r:\n%s" % (pattern, "".join(lines)))


def names(lines):
    text = "".join(lines)
    work = re.search(r"work directory (\S+)", text).group(1)
    port = re.search(r"proxy on http://127\.0\.0\.1:(\d+)", text).group(1)
    return work, port


def check_clean(work, port, lines):
    time.sleep(0.3)
    procs, mounts = leftovers(work, port)
    assert not procs and not mounts, "left behind: %s %s\n%s" % (procs, mounts, "".join(lines))
    assert not os.path.exists(work), "work directory %s left\n%s" % (work, "".join(lines))


def test_demo_runs_to_the_end_and_stops_everything():
    p = start()
    lines = []
    rc = finish(p, lines)
    text = "".join(lines)
    assert rc == 0, text
    assert re.search(r"epoch 1, from the bucket: +16 images in .* images/s", text), text
    assert "every image decoded to the pixels uploaded" in text
    # objmountctl stats: GetObject requests, failed, retries, redirects (a
    # prefetch cancelled at close counts as failed: not checked here)
    gets = re.search(r"GetObject +(\d+) +\d+ +\d+ +(\d+) ", text)
    assert gets and int(gets.group(2)) > 0, "no redirected GETs:\n" + text
    # the checkpoint's writes went through the proxy's 307s too
    summary = re.search(r"redirects followed: (\d+) in \d+ requests \((.*)\)", text)
    assert summary and int(summary.group(1)) > 0, text
    assert re.search(r"(PutObject|UploadPart) [1-9]", summary.group(2)), text
    assert "nothing left running" in text
    check_clean(*names(lines), lines)


def test_demo_ctrl_c_during_the_epoch_leaves_nothing():
    p = start()
    lines = []
    try:
        read_until(p, lines, r"^\[4/6\] DataLoader")
        time.sleep(0.3)
        os.killpg(p.pid, signal.SIGINT)
        rc = finish(p, lines, timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    text = "".join(lines)
    assert rc == 130, text
    assert "interrupted" in text and "nothing left running" in text, text
    check_clean(*names(lines), lines)
