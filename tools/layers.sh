#!/usr/bin/env bash
# Check that objmount's sources keep their layers (doc/architecture.md):
#
#   tools/layers.sh [BUILD_DIR]        BUILD_DIR defaults to ./build, built
#
# (a) every call and every #include that goes from a lower layer to a higher
#     one ("upward"), (b) every circle between files: A uses something
#     defined in B and B (directly or through others) uses something in A,
#     and (c) every om_s3_*/om_ais_* symbol used, or backend header
#     included, above src/store/ (only the store names its backends).
# Prints each violation and exits 1 if there is any; prints one line
# "layers: N files, no upward calls, no circles" and exits 0 when clean.
#
# Who defines what comes from the object files of BUILD_DIR, not from the
# text: `nm --defined-only` and `nm -u` on each object listed in its
# compile_commands.json give the exact symbols (functions and data) each
# file defines and uses, so a macro or a comment cannot fool it. A symbol a
# tool uses resolves first to the files of the same program, then to the
# core library. Includes are read from the sources: "objmount/X.h" belongs to
# the folder that holds X.c, a local "Y_int.h" to its own folder.
#
# The layer order below is the one of doc/architecture.md; change both
# together. A file may use its own folder and any folder below it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd) || {
    echo "layers.sh: no build directory ${1:-$root/build} (meson setup + ninja first)" >&2
    exit 2
}
[[ -f "$build/compile_commands.json" ]] || {
    echo "layers.sh: $build has no compile_commands.json (not a meson build directory)" >&2
    exit 2
}
command -v nm >/dev/null || { echo "layers.sh: nm (binutils) is missing" >&2; exit 2; }

exec /usr/bin/python3 - "$root" "$build" <<'EOF'
import json, os, re, subprocess, sys

# Top layer first. "tools" are the other programs (objmountctl, om-s3, ...),
# "main" is src/main.c; every other name is a folder of src/.
LAYERS = ["tools", "main", "fuse", "ctl", "conf", "read", "ns", "write", "shard", "cache",
          "store", "http", "base"]
RANK = {name: i for i, name in enumerate(LAYERS)}

root, build = sys.argv[1], sys.argv[2]
problems = []


def rel(path):
    return os.path.relpath(path, root)


def layer_of(path):
    """The layer of a source file (path relative to root), or None."""
    parts = path.split("/")
    if parts[0] == "tools" and len(parts) == 2:
        return "tools"
    if path == "src/main.c":
        return "main"
    if parts[0] == "src" and len(parts) == 3:
        return parts[1]
    return None


# ---- the files: every C source and header of src/, include/objmount/, tools/
files = []
for top in ("src", "include/objmount", "tools"):
    for d, dirs, names in os.walk(os.path.join(root, top)):
        dirs[:] = [] if top == "tools" else sorted(dirs)  # tools/bench etc. are not programs
        files += [rel(os.path.join(d, n)) for n in sorted(names) if n.endswith((".c", ".h"))]

# include/objmount/X.h belongs to the folder that holds X.c
module_folder = {}
for f in files:
    if f.startswith("src/") and f.endswith(".c"):
        module_folder.setdefault(os.path.basename(f)[:-2], layer_of(f))


def layer(path):
    if path.startswith("include/objmount/"):
        name = os.path.basename(path)[:-2]
        return module_folder.get(name)
    return layer_of(path)


for f in files:
    if layer(f) is None:
        problems.append("unplaced: %s belongs to no layer (a new folder? add it to LAYERS "
                        "in tools/layers.sh and to doc/architecture.md)" % f)
    elif layer(f) not in RANK:
        problems.append("unplaced: %s is in folder %s, which is not in the layer order "
                        "(tools/layers.sh LAYERS, doc/architecture.md)" % (f, layer(f)))

# ---- edges: (from, to) -> set of what (symbols, or the include line)
edges = {}


def add_edge(a, b, what):
    if a != b:
        edges.setdefault((a, b), set()).add(what)


inc_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
for f in files:
    with open(os.path.join(root, f), errors="replace") as fh:
        text = fh.read()
    for name in inc_re.findall(text):
        here = os.path.join(os.path.dirname(f), name)
        if os.path.exists(os.path.join(root, here)):
            target = os.path.normpath(here)
        elif os.path.exists(os.path.join(root, "include", name)):
            target = os.path.join("include", name)
        else:
            continue  # a generated or system header
        add_edge(f, target, "#include \"%s\"" % name)

# objects from compile_commands.json: source -> (program, object)
with open(os.path.join(build, "compile_commands.json")) as fh:
    commands = json.load(fh)
objects = {}
for e in commands:
    src = rel(os.path.normpath(os.path.join(e["directory"], e["file"])))
    if src in files:
        out = os.path.join(e["directory"], e["output"])
        objects[src] = (os.path.dirname(e["output"]), out)
stale = [s for s, (_, o) in objects.items()
         if not os.path.exists(o) or os.path.getmtime(o) < os.path.getmtime(os.path.join(root, s))]
missing = [f for f in files if f.endswith(".c") and f not in objects]
if stale or missing:
    for s in stale:
        print("layers: %s is not built or older than its source (ninja -C %s)" % (s, build),
              file=sys.stderr)
    for s in missing:
        print("layers: %s is not in %s/compile_commands.json (meson.build?)" % (s, build),
              file=sys.stderr)
    sys.exit(2)


def nm(args):
    """object -> symbols, from one nm over every object (-A names the object)."""
    objs = sorted(o for _, o in objects.values())
    out = subprocess.run(["nm", "-A"] + args + objs, capture_output=True, text=True, check=True)
    syms = {o: set() for o in objs}
    for line in out.stdout.splitlines():
        obj, _, rest = line.rpartition(":")  # "OBJECT:ADDRESS TYPE NAME"
        if rest.split():
            syms[obj].add(rest.split()[-1])
    if not any(syms.values()):
        sys.exit("layers: nm printed no symbols for %d objects" % len(objs))
    return syms


all_defined, all_used = nm(["-g", "--defined-only"]), nm(["-u"])
defined = {src: all_defined[obj] for src, (_, obj) in objects.items()}
used = {src: all_used[obj] for src, (_, obj) in objects.items()}
CORE = "libobjmount-core.a.p"
owner = {}  # (program, symbol) -> file
for src, (prog, _) in objects.items():
    for s in defined[src]:
        owner[(prog, s)] = src
for src, (prog, _) in objects.items():
    for s in used[src]:
        b = owner.get((prog, s)) or owner.get((CORE, s))
        if b:
            add_edge(src, b, s)

# ---- (a) upward calls and includes
for (a, b), what in sorted(edges.items()):
    la, lb = layer(a), layer(b)
    if la in RANK and lb in RANK and RANK[lb] < RANK[la]:
        kind = "include" if all(w.startswith("#include") for w in what) else "call"
        problems.append("upward %s: %s (%s) -> %s (%s): %s" %
                        (kind, a, la, b, lb, ", ".join(sorted(what))))

# ---- (c) backends: only the store names a backend. Above src/store/ nothing
# calls an om_s3_* or om_ais_* symbol or includes a backend's header; the
# layers above go through om_store_* (curl's vtls rule).
BACKEND_PREFIXES = ("om_s3_", "om_ais_")
BACKEND_HEADERS = ("s3.h", "ais.h", "xml.h", "sigv4.h")
for (a, b), what in sorted(edges.items()):
    if layer(a) == "store" or layer(b) != "store":
        continue
    named = sorted(w for w in what if w.startswith(BACKEND_PREFIXES) or
                   (w.startswith("#include") and w.split("/")[-1].rstrip('"') in BACKEND_HEADERS))
    if named:
        problems.append("backend named above the store: %s (%s) -> %s: %s (use om_store_*)" %
                        (a, layer(a), b, ", ".join(named)))

# ---- (b) circles: strongly connected components of the file graph (Tarjan)
succ = {}
for (a, b) in edges:
    succ.setdefault(a, []).append(b)
index, low, onstack, stack, sccs = {}, {}, set(), [], []
counter = [0]


def strongconnect(v):
    work = [(v, iter(sorted(succ.get(v, []))))]
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); onstack.add(v)
    while work:
        node, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1
                stack.append(w); onstack.add(w)
                work.append((w, iter(sorted(succ.get(w, [])))))
                break
            if w in onstack:
                low[node] = min(low[node], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop(); onstack.discard(w); comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))


for v in sorted({x for e in edges for x in e}):
    if v not in index:
        strongconnect(v)

for comp in sorted(sccs):
    inside = set(comp)
    lines = ["circle among %d files: %s" % (len(comp), " ".join(comp))]
    for (a, b), what in sorted(edges.items()):
        if a in inside and b in inside:
            back = " (and back)" if (b, a) in edges else ""
            lines.append("    %s -> %s%s: %s" % (a, b, back, ", ".join(sorted(what))))
    problems.append("\n".join(lines))

for p in problems:
    print(p)
if problems:
    ups = sum(p.startswith("upward") for p in problems)
    named = sum(p.startswith("backend named") for p in problems)
    print("layers: %d upward, %d circles, %d backends named above the store, %d unplaced "
          "(doc/architecture.md)" % (ups, len(sccs), named, len(problems) - ups - named - len(sccs)))
    sys.exit(1)
print("layers: %d files, no upward calls, no circles, no backend named above the store"
      % len(files))
EOF
