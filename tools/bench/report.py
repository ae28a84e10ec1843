"""Summaries, targets, Markdown, JSON, chart and the doc/benchmarks.md update for bench.py."""

import json
import os
import re
import statistics

DOC_START = "<!-- bench:latest:start (written by tools/bench/bench.py --update-doc) -->"
DOC_END = "<!-- bench:latest:end -->"
DOC_MARKERS_SWIFT = ("<!-- bench:swift:start (written by tools/bench/bench.py --server swift "
                     "--update-doc) -->", "<!-- bench:swift:end -->")

COLORS = {"objmount": "#2ca02c", "s3fs": "#1f77b4", "rclone": "#ff7f0e", "curl": "#7f7f7f",
          "curl-direct": "#c7c7c7"}

# Issue 6's targets, as ratios at 10 ms: (case, against, at least, what)
TARGETS = [
    ("seq1", "s3fs", 2.0, "sequential read >= 2x s3fs-fuse"),
    ("seq1", "rclone", 2.0, "sequential read >= 2x rclone"),
    ("seq1", "curl", 0.7, "sequential read >= 70% of the limit"),
    ("seq4", "s3fs", 2.0, "sequential read >= 2x s3fs-fuse"),
    ("seq4", "rclone", 2.0, "sequential read >= 2x rclone"),
    ("seq4", "curl", 0.7, "sequential read >= 70% of the limit"),
    ("cat", "s3fs", 2.0, "sequential read >= 2x s3fs-fuse"),
    ("cat", "rclone", 2.0, "sequential read >= 2x rclone"),
    ("cat", "curl", 0.7, "sequential read >= 70% of the limit"),
    ("small8", "s3fs", 3.0, "8-reader small files >= 3x s3fs-fuse"),
    ("small8", "rclone", 3.0, "8-reader small files >= 3x rclone"),
    ("ls", "s3fs", 10.0, "`ls -l` >= 10x s3fs-fuse"),
    ("find", "s3fs", 10.0, "`find` >= 10x s3fs-fuse"),
    ("ckpt", "s3fs", 1.5, "checkpoint write >= 1.5x s3fs-fuse"),
    ("rand4k", "s3fs", 1.0, "random 4 KiB reads no worse than s3fs-fuse"),
    ("rand4k", "rclone", 1.0, "random 4 KiB reads no worse than rclone"),
]
TARGET_LATENCY = 10

# Issue 14's targets: CPU seconds (user+sys) of the filesystem process per
# GiB moved, objmount against s3fs-fuse in the same run, at every latency
# measured (CPU per byte hardly depends on latency): (case, at most x s3fs's)
CPU_TARGETS = [
    ("seq1", 0.8, "sequential read CPU/GiB <= 0.8x s3fs-fuse's"),
    ("seq4", 0.8, "4-stream sequential read CPU/GiB <= 0.8x s3fs-fuse's"),
    ("ckpt", 1.0, "checkpoint write CPU/GiB (verified) <= s3fs-fuse's"),
]


def summarize(runs):
    """Medians per (latency, case, peer) over the runs that succeeded."""
    groups = {}
    for r in runs:
        groups.setdefault((r["latency_ms"], r["case"], r["peer"]), []).append(r)
    out = []
    for (lat, case, peer), rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        s = {"latency_ms": lat, "case": case, "peer": peer, "runs": len(rs), "ok": len(ok),
             "errors": [r["error"] for r in rs if "error" in r]}
        keys = set()
        for r in ok:
            keys.update(k for k, v in r.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)
                        and k not in ("run", "latency_ms"))
        for k in sorted(keys):
            vals = [r[k] for r in ok if isinstance(r.get(k), (int, float))]
            if vals:
                s[k] = statistics.median(vals)
        if len(ok) > 1 and "value" in s:
            s["min"] = min(r["value"] for r in ok)
            s["max"] = max(r["value"] for r in ok)
        for field in ("requests", "own_requests"):
            reqs = [r[field] for r in ok if r.get(field)]
            if reqs:
                kinds = set().union(*reqs)
                s[field] = {k: statistics.median([q.get(k, 0) for q in reqs]) for k in kinds}
        out.append(s)
    return out


def speedup(case_info, ours, theirs):
    """How many times better ours is than theirs (>1: ours better)."""
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return ours / theirs if case_info["higher_is_better"] else theirs / ours


def ratios(summary, cases, subject="objmount", against=("s3fs", "rclone"), limit="curl"):
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in summary}
    out = []
    for (lat, case, peer), s in sorted(idx.items()):
        if peer != subject or case not in cases:
            continue
        row = {"latency_ms": lat, "case": case}
        for other in against:
            o = idx.get((lat, case, other))
            row["vs_" + other] = speedup(cases[case], s.get("value"), o and o.get("value"))
        o = idx.get((lat, cases[case].get("ref_of") or case, limit))
        row["vs_" + limit] = speedup(cases[case], s.get("value"), o and o.get("value"))
        out.append(row)
    return out


def target_latency(meta):
    lats = meta["latencies_ms"]
    return TARGET_LATENCY if TARGET_LATENCY in lats else max(lats)


def targets(result):
    """Issue 6's targets with met / missed / not measured, at 10 ms."""
    meta = result["meta"]
    lat = target_latency(meta)
    rat = {(r["latency_ms"], r["case"]): r for r in result["ratios"]}
    out = []
    for case, other, need, what in TARGETS:
        if case not in meta["cases"]:
            continue
        got = rat.get((lat, case), {}).get("vs_" + other)
        out.append({"target": what, "case": case, "against": other, "need": need,
                    "ratio": got, "latency_ms": lat,
                    "met": None if got is None else got >= need})
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in result["summary"]}
    for case, most, what in CPU_TARGETS:
        if case not in meta["cases"]:
            continue
        ours = idx.get((lat, case, "objmount"), {}).get("cpu_s_per_gib")
        theirs = idx.get((lat, case, "s3fs"), {}).get("cpu_s_per_gib")
        got = ours / theirs if ours and theirs else None
        out.append({"target": what, "case": case, "against": "s3fs", "need": most,
                    "ratio": got, "latency_ms": lat, "cpu": True,
                    "met": None if got is None else got <= most})
    # memory: the largest median peak RSS of objmount over every case and latency
    rows = [s for s in result["summary"] if s["peer"] == "objmount" and "peak_rss_mib" in s]
    budget = [s["budget_mib"] for s in rows if s.get("budget_mib")]
    if rows and budget:
        worst = max(rows, key=lambda s: s["peak_rss_mib"])
        out.append({"target": "objmount peak RSS below its memory budget", "case": worst["case"],
                    "against": "budget", "need": 1.0, "latency_ms": worst["latency_ms"],
                    "rss_mib": worst["peak_rss_mib"], "budget_mib": min(budget),
                    "ratio": min(budget) / worst["peak_rss_mib"],
                    "met": worst["peak_rss_mib"] < min(budget)})
    return out


# -- Markdown -------------------------------------------------------------------------
def fmt_num(v):
    if v is None:
        return "—"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def fmt_value(v, unit):
    if v is None:
        return "—"
    if unit == "s":
        return "%.2f s" % v if v < 100 else "%.0f s" % v
    return fmt_num(v)


def fmt_ratio(r):
    return "—" if r is None else "%.2f×" % r


def cell(s, unit, case):
    if s is None:
        return "—"
    if "value" not in s:
        err = s["errors"][0] if s["errors"] else "failed"
        return "FAIL (%s)" % err.split(":")[0][:40]
    txt = fmt_value(s["value"], unit)
    if case.startswith("rand") and "mibps" in s:
        txt += " (%s MiB/s)" % fmt_num(s["mibps"])
    if case == "ckpt" and "close_mibps" in s:
        txt += " (close: %s)" % fmt_num(s["close_mibps"])
    if s["errors"]:
        txt += " (%d/%d failed)" % (len(s["errors"]), s["runs"])
    return txt


def targets_markdown(result):
    L = []
    t = result.get("targets") or []
    if not t:
        return L
    lat = t[0]["latency_ms"]
    met = sum(1 for x in t if x["met"])
    judged = sum(1 for x in t if x["met"] is not None)
    L.append("Targets of issues 6 and 14 at %d ms (ratio = how many times better objmount "
             "is; for CPU, objmount's CPU per GiB over s3fs-fuse's; %d of %d met):"
             % (lat, met, judged))
    L.append("")
    L.append("| target | case | needed | measured | verdict |")
    L.append("|---|---|---|---|---|")
    titles = result["meta"]["cases"]
    for x in t:
        if x["against"] == "budget":
            meas = "%.0f MiB peak RSS (%s, %d ms) vs %.0f MiB budget" % (
                x["rss_mib"], x["case"], x["latency_ms"], x["budget_mib"])
            need = "RSS < budget"
        elif x.get("cpu"):
            meas = "—" if x["ratio"] is None else "%.2f× s3fs's CPU/GiB" % x["ratio"]
            need = "≤ %.1f×" % x["need"]
        elif x["against"] == "curl":
            meas = "—" if x["ratio"] is None else "%.0f%% of the limit" % (100 * x["ratio"])
            need = "≥ %.0f%%" % (100 * x["need"])
        else:
            meas = "—" if x["ratio"] is None else "%.2f× %s" % (x["ratio"], x["against"])
            need = "≥ %.1f×" % x["need"]
        if x["met"] is None:
            verdict = "not measured"
        elif x["met"]:
            verdict = "**met**"
        elif x["against"] == "budget" or x.get("cpu"):
            verdict = "**missed**"
        else:
            verdict = "**missed** (%.0f%% of the target)" % (100 * x["ratio"] / x["need"])
        case = x["case"]
        title = titles.get(case, {}).get("title", case).replace("|", "/")
        L.append("| %s | %s | %s | %s | %s |" % (x["target"], title if x["against"] != "budget"
                                                  else "all cases", need, meas, verdict))
    return L


SERVER_NAMES = {
    "versitygw": "versitygw v1.7.0 (posix backend)",
    "swift": "OpenStack Swift 2.30 with s3api (all in one, Debian 12)",
    "aistore": "AIStore v1.5.0, 1 proxy + 2 targets, S3 API (307s to the targets, sent back "
               "through the fault proxy)",
    "aistore-proxy": "AIStore v1.5.0, 1 proxy + 2 targets, S3 API with S3-Reverse-Proxy",
    "s3rver": "s3rver 3.7.1 (patched; the test server before versitygw)",
}


def markdown(result):
    meta = result["meta"]
    cases = meta["cases"]
    peers = meta["peers_run"]
    mount_peers = [p for p in peers if meta["peer_kind"][p] == "mount"]
    refs = [p for p in peers if meta["peer_kind"][p] == "reference"]
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in result["summary"]}
    rat = {(r["latency_ms"], r["case"]): r for r in result["ratios"]}
    lats = meta["latencies_ms"]
    loads = [r["load1"] for r in result["runs"] if "load1" in r]
    L = []
    # a result without "server" is from before it was recorded: s3rver then
    server = meta.get("server", "s3rver")
    L.append("Server: %s." % SERVER_NAMES.get(server, server))
    L.append("Run %s on %s (%d CPUs, %s), objmount tree %s; median of %d run%s per figure "
             "(%s); injected latency is per request, before the first byte. Load average "
             "%.1f before, %.1f after%s; took %.0f min."
             % (meta["started"], meta["host"], meta["cpus"], meta["kernel"], meta["commit"],
                meta["runs"], "" if meta["runs"] == 1 else "s",
                "--quick sizes" if meta.get("quick") else "full sizes",
                meta.get("loadavg_before", [0])[0], meta.get("loadavg_after", [0])[0],
                ", %.1f-%.1f (median %.1f) during the runs" % (min(loads), max(loads),
                                                               statistics.median(loads))
                if loads else "", meta.get("duration_s", 0) / 60))
    if meta.get("out_of_time") or meta.get("interrupted"):
        L.append("")
        L.append("**Incomplete run** (%s): figures missing below were not measured."
                 % ("--max-minutes reached" if meta.get("out_of_time") else "interrupted"))
    L.append("")
    L.append("Command: `%s`" % meta.get("command", "?"))
    L.append("")
    L += targets_markdown(result)
    L.append("")
    head = ["case", "latency"] + mount_peers + ["limit" if p == "curl" else p for p in refs]
    cmp = [o for o in ("s3fs", "rclone") if o in peers and "objmount" in peers]
    head += ["objmount vs %s" % o for o in cmp]
    if "objmount" in peers and "curl" in peers:
        head.append("objmount / limit")
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for lat in lats:
        for cname, c in cases.items():
            row = ["%s (%s%s)" % (c["title"], c["unit"], "" if c["higher_is_better"]
                                  else ", lower is better"), "%d ms" % lat]
            for p in mount_peers:
                row.append(cell(idx.get((lat, cname, p)), c["unit"], cname))
            for p in refs:
                s = idx.get((lat, cname, p))
                if s is None and c.get("ref_of"):
                    s = idx.get((lat, c["ref_of"], p))
                    row.append("(%s)" % cell(s, c["unit"], cname) if s else "—")
                else:
                    row.append(cell(s, c["unit"], cname))
            r = rat.get((lat, cname), {})
            row += [fmt_ratio(r.get("vs_" + o)) for o in cmp]
            if "objmount" in peers and "curl" in peers:
                v = r.get("vs_curl")
                row.append("—" if v is None else "%.0f%%" % (100 * v))
            L.append("| " + " | ".join(row) + " |")
    L.append("")
    L.append("Ratios are how many times better objmount is (>1: objmount faster; for `ls -l` "
             "and `find` the inverse of the time ratio). Random reads: IOPS (MiB/s). "
             "Checkpoint: MiB/s until the object is complete in the bucket (close: MiB/s until "
             "close() returned). The limit (`curl`) goes through the same proxy: the better of "
             "one GET stream and 8 parallel ranged GETs for the large object (shown in "
             "parentheses for the 4-stream and cat rows, which share it), ranged GETs one after "
             "the other on one connection for random reads, keep-alive GETs with 1 or 8 "
             "parallel transfers for small objects, and ListObjectsV2 pages one after the "
             "other for `ls -l` (one folder) and `find` (the whole tree, no delimiter). "
             "The DataLoader and the checkpoint write have no limit row.")
    if "curl-direct" in refs:
        L.append("`curl-direct` is the same against the server without the proxy "
                 "(0 ms only): the proxy's own cost.")
    # checkpoint details
    if "ckpt" in cases:
        L.append("")
        L.append("Checkpoint write: seconds until close() returned / until the object was "
                 "complete in the bucket:")
        L.append("")
        L.append("| latency | " + " | ".join(mount_peers) + " |")
        L.append("|---|" + "---|" * len(mount_peers))
        for lat in lats:
            row = ["%d ms" % lat]
            for p in mount_peers:
                s = idx.get((lat, "ckpt", p))
                if s and "close_s" in s:
                    row.append("%.1f s / %.1f s" % (s["close_s"], s["seconds"]))
                else:
                    row.append("—")
            L.append("| " + " | ".join(row) + " |")
    # resources
    L.append("")
    L.append("CPU seconds (user+sys) and peak RSS (VmHWM) of the filesystem process, per run "
             "(with CPU seconds per GiB the proxy carried, where data moved); "
             "objmount's read-buffer budget (`memory_limit`) and the peak of its read buffers "
             "from `objmountctl stats`:")
    L.append("")
    head = ["case", "latency"] + mount_peers
    if "objmount" in mount_peers:
        head.append("objmount buffers peak / budget")
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for lat in lats:
        for cname, c in cases.items():
            row = [cname, "%d ms" % lat]
            for p in mount_peers:
                s = idx.get((lat, cname, p))
                if s and "cpu_s" in s:
                    per = (" (%.2f s/GiB)" % s["cpu_s_per_gib"]) if "cpu_s_per_gib" in s else ""
                    row.append("%.2f s%s, %.0f MiB" % (s["cpu_s"], per, s.get("peak_rss_mib", 0)))
                else:
                    row.append("—")
            if "objmount" in mount_peers:
                s = idx.get((lat, cname, "objmount"))
                if s and "budget_mib" in s:
                    row.append("%.0f / %.0f MiB" % (s.get("buffers_peak_mib", 0),
                                                    s["budget_mib"]))
                else:
                    row.append("—")
            L.append("| " + " | ".join(row) + " |")
    # requests
    L.append("")
    L.append("S3 requests per run as seen by the proxy (GET / HEAD / LIST / PUT+parts / "
             "other) and MiB the proxy sent to the filesystem (read cases) or received from it "
             "(checkpoint):")
    L.append("")
    head = ["case", "latency"] + mount_peers + (["limit"] if "curl" in refs else [])
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for lat in lats:
        for cname, c in cases.items():
            row = [cname, "%d ms" % lat]
            for p in mount_peers + (["curl"] if "curl" in refs else []):
                s = idx.get((lat, cname, p))
                q = s and s.get("requests")
                txt = fmt_requests(q) if q else "—"
                mib = s and (s.get("mib_from_fs") if cname == "ckpt" else s.get("mib_to_fs"))
                if q and mib is not None:
                    txt += ", %s MiB" % fmt_num(mib)
                row.append(txt)
            L.append("| " + " | ".join(row) + " |")
    fails = [(s["latency_ms"], s["case"], s["peer"], e) for s in result["summary"]
             for e in s["errors"]]
    if fails:
        L.append("")
        L.append("Failures:")
        L.append("")
        for lat, cname, p, e in fails:
            L.append("- %s, %s, %d ms: %s" % (p, cname, lat, e.replace("\n", " ")[:300]))
    skipped = meta.get("skipped_peers") or {}
    if skipped:
        L.append("")
        for p, why in skipped.items():
            L.append("- %s not measured: %s" % (p, why))
    L.append("")
    L.append("Data: " + "; ".join(meta.get("datasets", {}).values()) + ".")
    return "\n".join(L) + "\n"


def fmt_requests(q):
    get = q.get("GetObject", 0)
    head = q.get("HeadObject", 0) + q.get("HeadBucket", 0)
    lst = q.get("ListObjectsV2", 0) + q.get("ListObjects", 0)
    put = sum(v for k, v in q.items() if k in ("PutObject", "UploadPart",
                                                 "CreateMultipartUpload",
                                                 "CompleteMultipartUpload"))
    other = sum(q.values()) - get - head - lst - put
    return "%d / %d / %d / %d / %d" % (get, head, lst, put, other)


def settings_markdown(meta):
    L = ["| peer | version | settings |", "|---|---|---|"]
    for p in meta["peers_run"]:
        L.append("| %s | %s | `%s` |" % (p, meta["versions"].get(p, "?"),
                                         meta["settings"].get(p, "")))
    return "\n".join(L) + "\n"


def write_outputs(result, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = "# objmount benchmark\n\n" + markdown(result) + "\nPeers:\n\n" + settings_markdown(
        result["meta"])
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(md)
    chart = os.path.join(out_dir, "chart.png")
    if not write_chart(result, chart):
        chart = None
    return md, chart


def write_chart(result, path):
    """Grouped bars, one panel per case, peers side by side per latency.
    Returns False when matplotlib (Debian: python3-matplotlib) is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    meta = result["meta"]
    cases = meta["cases"]
    peers = [p for p in meta["peers_run"] if p != "curl-direct"]
    lats = meta["latencies_ms"]
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in result["summary"]}
    ncol = min(4, len(cases))
    nrow = -(-len(cases) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.9 * ncol, 3.3 * nrow), squeeze=False)
    width = 0.8 / max(1, len(peers))
    for n, (cname, c) in enumerate(cases.items()):
        ax = axes[n // ncol][n % ncol]
        for i, p in enumerate(peers):
            xs, ys = [], []
            for j, lat in enumerate(lats):
                s = idx.get((lat, cname, p))
                if s is None and p == "curl" and c.get("ref_of"):
                    s = idx.get((lat, c["ref_of"], p))
                if s and "value" in s:
                    xs.append(j + (i - (len(peers) - 1) / 2) * width)
                    ys.append(s["value"])
            ax.bar(xs, ys, width, label="limit (curl)" if p == "curl" else p,
                   color=COLORS.get(p))
        ax.set_xticks(range(len(lats)))
        ax.set_xticklabels(["%d ms" % lat for lat in lats])
        log_scale = cname.startswith("rand")  # s3fs's whole-object fill is 100x the others
        if log_scale:
            ax.set_yscale("log")
        ax.set_title(c["title"].replace("`", "") + (" (log scale)" if log_scale else ""),
                     fontsize=8.5)
        ax.set_ylabel(c["unit"] + ("" if c["higher_is_better"] else " (lower is better)"),
                      fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for n in range(len(cases), nrow * ncol):
        axes[n // ncol][n % ncol].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("objmount vs s3fs-fuse vs rclone mount (%s through the fault proxy, "
                 % result["meta"].get("server", "s3rver") +
                 "%s, median of %d)" % (meta["started"], meta["runs"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def update_doc(doc_path, md_body, chart_src=None, chart_name="benchmarks-latest.png",
               markers=(DOC_START, DOC_END)):
    """Replace the text between the markers (DOC_START/DOC_END) of doc_path."""
    DOC_START, DOC_END = markers  # noqa: N806
    with open(doc_path) as f:
        text = f.read()
    if DOC_START not in text or DOC_END not in text:
        raise RuntimeError("%s has no %s ... %s markers" % (doc_path, DOC_START, DOC_END))
    body = md_body
    if chart_src:
        import shutil

        shutil.copyfile(chart_src, os.path.join(os.path.dirname(doc_path), chart_name))
        body += "\n![latest benchmark chart](%s)\n" % chart_name
    new = re.sub(re.escape(DOC_START) + ".*?" + re.escape(DOC_END),
                 lambda _: DOC_START + "\n\n" + body.strip() + "\n\n" + DOC_END, text,
                 flags=re.S)
    with open(doc_path, "w") as f:
        f.write(new)
