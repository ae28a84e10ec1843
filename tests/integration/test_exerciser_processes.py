"""omfsx -P (issue 22; tools/omfsx.c): processes as programs use a file in
the mount, checked against the exerciser's model. Beside test_exerciser.py
in a file of its own, so that the test command's pytest-xdist workers (one
file per worker at a time) run the long parts side by side."""

import os
import subprocess

from harness.mount import MiB
from harness.omtools import tool


def test_omfsx_processes(rw_mount, bucket, s3client, tmp_path):
    """omfsx -P (issue 22): dup2 and close of the original, children that
    hold the descriptor and exec, writes past 5 TiB that must fail with
    EFBIG and leave the last commit stored, 5,000 operations per file;
    what is stored at the end is the model."""
    models = str(tmp_path / "models")
    os.mkdir(models)
    with rw_mount(bucket) as m:
        cmd = [tool("omfsx"), "-q", "-P", "-s", "22", "-n", "5000", "-f", "2",
               "-S", str(2 * MiB), "-w", str(128 * 1024), "-m", models, m.path]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, "omfsx failed:\n%s\n%s" % (p.stdout[-6000:], p.stderr[-6000:])
    # the two files ran every operation and left a model each: a run that
    # wrote no model would compare nothing
    assert p.stdout.strip().endswith("survived: 5000 5000 of 5000 operations"), p.stdout
    names = sorted(os.listdir(models))
    assert names == ["fsx0", "fsx1"], names
    stored = [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert stored == names, stored
    for name in names:
        with open(os.path.join(models, name), "rb") as f:
            want = f.read()
        got = s3client.get_object(Bucket=bucket, Key=name)["Body"].read()
        assert len(got) == len(want), name
        assert got == want, name
