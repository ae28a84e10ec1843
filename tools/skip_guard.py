#!/usr/bin/python3
"""Fail when a test never runs: skipped in every server pass that collected it.

    tools/skip_guard.py PASS.xml...

Reads the JUnit XML of each pass of tools/test.sh (one per server kind) and
prints every test that was skipped in all the passes it was collected in
(a test the matrix deselects on a kind is not collected there), with its
reasons, then exits 1. A skip for a reason that holds on the CI machine
itself (a missing device, a module, a permission) would otherwise leave a
test that never runs looking green. Reasons listed in ALLOWED are let
through; each says why it cannot hold on the machines the test command is
made for.
"""

import sys
import xml.etree.ElementTree as ET

# (substring of the skip message, why it may skip everywhere)
ALLOWED = ()


def results(path):
    """{test id: skip message or None (ran)} of one pass."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = "%s::%s" % (case.get("classname"), case.get("name"))
        skip = case.find("skipped")
        out[tid] = None if skip is None else (skip.get("message") or "skipped")
    return out


def main(paths):
    passes = [results(p) for p in paths]
    seen = {}
    for r in passes:
        for tid, why in r.items():
            seen.setdefault(tid, []).append(why)
    never = {tid: whys for tid, whys in seen.items() if all(w is not None for w in whys)}
    never = {tid: whys for tid, whys in never.items()
             if not any(a in w for w in whys for a, _ in ALLOWED)}
    for tid, whys in sorted(never.items()):
        print("never ran: %s\n    %s" % (tid, "\n    ".join(sorted(set(whys)))))
    print("skip guard: %d tests in %d passes; %d never ran" % (len(seen), len(passes), len(never)))
    return 1 if never else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
