"""Summaries, Markdown, JSON, chart and the doc/benchmarks.md update for bench.py."""

import json
import os
import re
import statistics

DOC_START = "<!-- bench:latest:start (written by tools/bench/bench.py --update-doc) -->"
DOC_END = "<!-- bench:latest:end -->"

COLORS = {"objmount": "#2ca02c", "s3fs": "#1f77b4", "rclone": "#ff7f0e", "curl": "#7f7f7f",
          "curl-direct": "#c7c7c7"}


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
        reqs = [r["requests"] for r in ok if r.get("requests")]
        if reqs:
            kinds = set().union(*reqs)
            s["requests"] = {k: statistics.median([q.get(k, 0) for q in reqs]) for k in kinds}
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
        if peer != subject:
            continue
        row = {"latency_ms": lat, "case": case}
        for other in against + (limit,):
            o = idx.get((lat, case, other))
            row["vs_" + other] = speedup(cases[case], s.get("value"), o and o.get("value"))
        out.append(row)
    return out


def fmt_value(v, unit):
    if v is None:
        return "—"
    if unit == "s":
        return "%.2f s" % v if v < 100 else "%.0f s" % v
    return "%.0f" % v if v >= 100 else "%.1f" % v


def fmt_ratio(r):
    return "—" if r is None else "%.2f×" % r


def cell(s, unit):
    if s is None:
        return "—"
    if "value" not in s:
        err = s["errors"][0] if s["errors"] else "failed"
        return "FAIL (%s)" % err.split(":")[0][:40]
    txt = fmt_value(s["value"], unit)
    if s["errors"]:
        txt += " (%d/%d failed)" % (len(s["errors"]), s["runs"])
    return txt


def markdown(result):
    meta = result["meta"]
    cases = meta["cases"]
    peers = meta["peers_run"]
    mount_peers = [p for p in peers if meta["peer_kind"][p] == "mount"]
    refs = [p for p in peers if meta["peer_kind"][p] == "reference"]
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in result["summary"]}
    rat = {(r["latency_ms"], r["case"]): r for r in result["ratios"]}
    lats = meta["latencies_ms"]
    L = []
    L.append("Run %s on %s (%d CPUs, %s), objmount tree %s; median of %d run%s per figure; "
             "injected latency is per request, before the first byte. Load average "
             "%.1f before, %.1f after."
             % (meta["started"], meta["host"], meta["cpus"], meta["kernel"], meta["commit"],
                meta["runs"], "" if meta["runs"] == 1 else "s",
                meta.get("loadavg_before", [0])[0], meta.get("loadavg_after", [0])[0]))
    L.append("")
    head = ["case", "latency"] + mount_peers + refs
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
            for p in mount_peers + refs:
                row.append(cell(idx.get((lat, cname, p)), c["unit"]))
            r = rat.get((lat, cname), {})
            row += [fmt_ratio(r.get("vs_" + o)) for o in cmp]
            if "objmount" in peers and "curl" in peers:
                v = r.get("vs_curl")
                row.append("—" if v is None else "%.0f%%" % (100 * v))
            L.append("| " + " | ".join(row) + " |")
    L.append("")
    L.append("Ratios are how many times better objmount is (>1: objmount faster; for `ls -l` "
             "the inverse of the time ratio). `curl` is the reference limit through the same "
             "proxy: the best of one GET stream and 8 parallel ranged GETs for the large object, "
             "keep-alive GETs with 1 or 8 parallel transfers for small objects, and "
             "ListObjectsV2 pages one after the other for the listing.")
    for p in refs:
        if p == "curl-direct":
            L.append("`curl-direct` is the same against s3rver without the proxy "
                     "(0 ms only): the proxy's own cost.")
    # resources
    L.append("")
    L.append("CPU seconds (user+sys) and peak RSS (VmHWM) of the filesystem process, per run:")
    L.append("")
    head = ["case", "latency"] + mount_peers
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for lat in lats:
        for cname, c in cases.items():
            row = [cname, "%d ms" % lat]
            for p in mount_peers:
                s = idx.get((lat, cname, p))
                if s and "cpu_s" in s:
                    row.append("%.2f s, %.0f MiB" % (s["cpu_s"], s.get("peak_rss_mib", 0)))
                else:
                    row.append("—")
            L.append("| " + " | ".join(row) + " |")
    # requests
    L.append("")
    L.append("S3 requests per run as seen by the proxy (GET / HEAD / LIST / other):")
    L.append("")
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for lat in lats:
        for cname, c in cases.items():
            row = [cname, "%d ms" % lat]
            for p in mount_peers:
                s = idx.get((lat, cname, p))
                q = s and s.get("requests")
                row.append(fmt_requests(q) if q else "—")
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
    return "\n".join(L) + "\n"


def fmt_requests(q):
    get = q.get("GetObject", 0)
    head = q.get("HeadObject", 0) + q.get("HeadBucket", 0)
    lst = q.get("ListObjectsV2", 0) + q.get("ListObjects", 0)
    other = sum(q.values()) - get - head - lst
    return "%d / %d / %d / %d" % (get, head, lst, other)


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
    """Grouped bars per case (one panel per case), peers side by side per latency.
    Returns False when matplotlib (Debian: python3-matplotlib) is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    meta = result["meta"]
    cases = meta["cases"]
    peers = meta["peers_run"]
    lats = meta["latencies_ms"]
    idx = {(s["latency_ms"], s["case"], s["peer"]): s for s in result["summary"]}
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4.2), squeeze=False)
    width = 0.8 / max(1, len(peers))
    for ax, (cname, c) in zip(axes[0], cases.items()):
        for i, p in enumerate(peers):
            xs, ys = [], []
            for j, lat in enumerate(lats):
                s = idx.get((lat, cname, p))
                if s and "value" in s:
                    xs.append(j + (i - (len(peers) - 1) / 2) * width)
                    ys.append(s["value"])
            ax.bar(xs, ys, width, label=p, color=COLORS.get(p))
        ax.set_xticks(range(len(lats)))
        ax.set_xticklabels(["%d ms" % lat for lat in lats])
        ax.set_title(c["title"].replace("`", ""), fontsize=9)
        ax.set_ylabel(c["unit"] + ("" if c["higher_is_better"] else " (lower is better)"))
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("objmount vs s3fs-fuse vs rclone mount (s3rver through the fault proxy, "
                 "%s)" % meta["started"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def update_doc(doc_path, md_body, chart_src=None, chart_name="benchmarks-latest.png"):
    """Replace the text between the DOC_START/DOC_END markers of doc_path."""
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
