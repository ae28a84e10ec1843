"""Prefetch across files (issue 25): a reader that walks a directory in the
listing's order gets the next files fetched ahead of its opens, and a loader
that knows its shuffled order hands it to the mount (OM_IOC_PREFETCH on the
directory, `objmountctl prefetch`).

Every test reads through the fault proxy with a first-byte delay on GETs, so
a file not fetched ahead costs a visible round trip; the assertions are on
what was fetched and opened (stats, the proxy's request counts), never on
time: speed is tools/bench's."""

import os
import random

import pytest

from harness import admin
from harness.admin import ctl
from harness.hint import hint
from harness.mount import MiB, check_bytes, payload, seed, wait_for

def dataset(prefix, n, size=lambda i: 20000 + 97 * i):
    return {"%s/s%04d.jpg" % (prefix, i): payload("%s/%d" % (prefix, i), size(i)) for i in range(n)}


@pytest.fixture
def proxied(mount, faultproxy):
    """mount(bucket, opts) through the fault proxy with 20 ms before each
    GET's first byte; the proxy's counts zeroed once mounted, and kept per
    key (FaultProxy.key_requests)."""
    def make(bucket, opts=""):
        m = mount(bucket, opts, endpoint=faultproxy.endpoint)
        faultproxy.set_faults(latency={"first_byte_ms": 20, "kind": "GetObject"}, count_keys=".")
        faultproxy.reset_stats()
        return m
    return make


def gets(faultproxy):
    """GETs of objects: on AIStore a redirected GET reaches the proxy twice
    (the 307 and the target's leg, hops_by_kind): counted once."""
    r = faultproxy.stats()["requests"]
    return r["by_kind"].get("GetObject", 0) - r["hops_by_kind"].get("GetObject", 0)


def read_file(path):
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return f.read()


def fetched_ahead(faultproxy, key, timeout=15):
    """Wait (up to timeout) until the proxy has seen a GET of key: the
    prefetch took it before any open (keys counted by the proxy: the
    proxied fixture's count_keys)."""
    return wait_for(lambda: faultproxy.key_requests(key, "GetObject") >= 1, timeout)


def read_when_fetched_ahead(m, faultproxy, objects, keys):
    """Read each key through the mount once the prefetch has fetched it
    from the store: the state is waited for (with a deadline), so what is
    fetched ahead does not depend on how fast this machine is against the
    resolver; a file never fetched ahead of its open fails."""
    for key in keys:
        assert fetched_ahead(faultproxy, key), "%s was not fetched ahead of its open: %s" % (
            key, faultproxy.stats()["requests"])
        check_bytes(read_file(m.join(key)), objects[key], key)


def test_a_directory_read_in_order_is_fetched_ahead(proxied, faultproxy, bucket, s3client):
    objects = dataset("val", 300)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = os.listdir(m.join("val"))  # the listing's order, as md5sum * or cp -r take it
    assert sorted(names) == sorted(k.split("/")[1] for k in objects)
    for name in names:
        check_bytes(read_file(m.join("val", name)), objects["val/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["order_streams"] == 1, st
    # all but the first three files (three evenly spaced opens make the
    # order) came fetched ahead: each open issues the next files before it
    # returns, so this count does not depend on the machine's speed
    assert st["hits"] == len(names) - 3, st
    # fetched once: at most 1.1 times the GETs of the files read
    assert gets(faultproxy) <= 1.1 * len(names), faultproxy.stats()["requests"]
    # what was fetched and never opened: at most a tenth of the bytes fetched
    assert st["files"] - st["hits"] <= 0.1 * st["files"], st


def test_every_other_file_in_order_is_a_stride(proxied, faultproxy, bucket, s3client):
    """A process reading every second file (one of two workers splitting a
    folder) is followed too, and the other half is not fetched."""
    objects = dataset("half", 200)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = os.listdir(m.join("half"))[::2]
    for name in names:
        check_bytes(read_file(m.join("half", name)), objects["half/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["hits"] == len(names) - 3, st  # as in directory order (no timing)
    assert st["files"] - st["hits"] <= 0.1 * st["files"], st
    assert gets(faultproxy) <= 1.1 * len(names)


def test_a_reader_stopping_halfway_wastes_at_most_a_tenth(proxied, faultproxy, bucket, s3client):
    objects = dataset("stop", 400)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = os.listdir(m.join("stop"))
    for name in names[:200]:
        check_bytes(read_file(m.join("stop", name)), objects["stop/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["files"] > 150, st
    assert st["files"] - st["hits"] <= 0.1 * st["files"], st
    # nobody opens the rest: after the 30 s wait it is given back and
    # counted as wasted, the same tenth
    assert wait_for(lambda: admin.stats_json(m.path)["memory"]["read_buffer_bytes"] == 0, 60), \
        admin.stats_json(m.path)["memory"]
    st = admin.stats_json(m.path)["prefetch"]
    assert 0 < st["wasted_bytes"] <= 0.1 * st["bytes"], st


def test_random_opens_fetch_nothing_ahead(proxied, faultproxy, bucket, s3client):
    """A shuffled loader without a hint: no order, so nothing is fetched."""
    objects = dataset("shuf", 150)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = os.listdir(m.join("shuf"))
    random.Random(3).shuffle(names)
    for name in names:
        check_bytes(read_file(m.join("shuf", name)), objects["shuf/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["files"] <= 0.1 * len(names), st
    assert gets(faultproxy) <= 1.1 * len(names)


def test_a_hinted_shuffled_order_is_fetched_ahead(proxied, faultproxy, bucket, s3client):
    objects = dataset("train", 300)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = sorted(k.split("/")[1] for k in objects)
    random.Random(11).shuffle(names)
    hint(m.join("train"), names)
    read_when_fetched_ahead(m, faultproxy, objects, ["train/" + n for n in names])
    st = admin.stats_json(m.path)["prefetch"]
    assert st["hinted"] == len(names), st
    # every file was fetched before its open (waited for above); the count
    # misses only a file whose open came between the resolver's lookup,
    # which fetched it whole, and its marking as prefetched
    assert st["hits"] >= 0.9 * len(names), st
    assert st["hint_skipped"] == 0, st
    assert gets(faultproxy) <= 1.1 * len(names)


def test_a_hint_with_missing_changed_and_odd_names(proxied, faultproxy, bucket, s3client):
    """Missing names, a directory, '..', a file renamed and a file rewritten
    after the hint fetched them are skipped or fetched again: the loader
    never sees an error, and never the bytes of a version the hint fetched
    and a write replaced. The two changed files are hinted first (the
    first hinted files are fetched at once), and the change waits until the
    proxy has seen both fetched: the race is checked to have happened."""
    objects = dataset("mix", 60)
    objects["mix/sub/inner.jpg"] = payload("inner", 5000)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = sorted(n for n in os.listdir(m.join("mix")) if n != "sub")
    rewritten, renamed = names[0], names[1]
    order = ([rewritten, renamed] + ["missing-%d.jpg" % i for i in range(5)]
             + ["sub", "../mix/" + names[0], "sub/inner.jpg"] + names[2:])
    hint(m.join("mix"), order)
    for name in (rewritten, renamed):
        assert fetched_ahead(faultproxy, "mix/" + name), \
            "the hint did not fetch %s before it changed" % name
    assert wait_for(lambda: admin.stats_json(m.path)["prefetch"]["hint_files"] >= 2), \
        admin.stats_json(m.path)["prefetch"]
    new = payload("rewritten", 33333)
    with open(m.join("mix", rewritten), "wb") as f:
        f.write(new)
    objects["mix/" + rewritten] = new
    os.rename(m.join("mix", renamed), m.join("mix", "renamed.jpg"))
    objects["mix/renamed.jpg"] = objects.pop("mix/" + renamed)
    check_bytes(read_file(m.join("mix", "sub", "inner.jpg")), objects["mix/sub/inner.jpg"], "inner")
    for name in names:
        if name == renamed:
            with pytest.raises(FileNotFoundError):
                read_file(m.join("mix", name))
            name = "renamed.jpg"
        check_bytes(read_file(m.join("mix", name)), objects["mix/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["hint_skipped"] >= 6, st  # 5 missing, the directory
    # the listing's order is read: the directory-order prefetch is issued by
    # each open before it returns (no timing), the hinted one runs beside it
    assert st["hits"] >= 0.8 * len(names), st


def test_objmountctl_prefetch_reads_a_list(proxied, faultproxy, bucket, s3client, tmp_path):
    objects = dataset("ctl", 120)
    seed(s3client, bucket, objects)
    m = proxied(bucket)
    names = sorted(k.split("/")[1] for k in objects)
    random.Random(5).shuffle(names)
    lst = tmp_path / "order.txt"
    lst.write_text("\n".join(names[:60]) + "\n")
    p = ctl(["prefetch", m.join("ctl"), "--file", str(lst)])
    assert p.returncode == 0, p.stderr
    assert "60 paths hinted" in p.stderr
    p = ctl(["prefetch", m.join("ctl"), "--append"], input="\n".join(names[60:]) + "\n")
    assert p.returncode == 0, p.stderr
    read_when_fetched_ahead(m, faultproxy, objects, ["ctl/" + n for n in names])
    st = admin.stats_json(m.path)["prefetch"]
    assert st["hinted"] == 120, st
    assert st["hits"] >= 0.9 * len(names), st  # as in the test above
    # a file, not a directory: a clear error
    p = ctl(["prefetch", m.join("ctl", names[0])])
    assert p.returncode != 0 and "directory" in p.stderr.lower(), p.stderr
    # not an objmount mount
    p = ctl(["prefetch", str(tmp_path)], input="x\n")
    assert p.returncode != 0 and "not an objmount mount" in p.stderr, p.stderr


def test_hinted_prefetch_stays_within_memory_limit(proxied, faultproxy, bucket, s3client):
    """Files larger than the budget's spare part hinted all at once: what is
    fetched ahead stays within memory_limit, and the files read are right."""
    objects = {"big/b%03d.bin" % i: payload("big/%d" % i, 3 * MiB + i) for i in range(60)}
    seed(s3client, bucket, objects)
    m = proxied(bucket, "memory_limit=64M")
    names = sorted(k.split("/")[1] for k in objects)
    hint(m.join("big"), names)
    # the resolver runs ahead as far as its window and memory let it: the
    # first hinted files are fetched before any open
    for name in names[:2]:
        assert fetched_ahead(faultproxy, "big/" + name), faultproxy.stats()["requests"]
    for name in names:
        check_bytes(read_file(m.join("big", name)), objects["big/" + name], name)
    mem = admin.stats_json(m.path)["memory"]
    assert mem["read_buffer_peak_bytes"] <= mem["read_buffer_limit_bytes"], mem


def test_prefetch_files_0_turns_it_off(proxied, faultproxy, bucket, s3client):
    objects = dataset("off", 60)
    seed(s3client, bucket, objects)
    m = proxied(bucket, "prefetch_files=0")
    names = os.listdir(m.join("off"))
    hint(m.join("off"), names)  # taken, ignored
    for name in names:
        check_bytes(read_file(m.join("off", name)), objects["off/" + name], name)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["files"] == 0 and st["hinted"] == 0, st
