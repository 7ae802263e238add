#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The house's measures (issue 23), repeatable by anyone:

    python3 tests/house.py [--all] [ROOT]

Prints, for the C sources git tracks in daemon/, client/ and proto/ of ROOT
(default: this checkout; --all: tests/ and bench/ too):
lines per folder, files over 800 lines, functions over 100 lines (a
function that keeps its length says why in a comment line starting
"Long:" within its first three lines, and is listed apart), and circles
inside a folder: files of one folder that reach each other, through calls
to functions defined in the other (a file names a function another file of
its folder defines, outside comments and strings), in both directions,
directly or around a longer loop. Exit status 0; it measures, it does not
judge (tests/layout_check.sh judges the include rules).
"""
import collections
import os
import re
import subprocess
import sys

LONG = 100
BIG = 800


def sources(root, everything):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.c", "*.h"],
                         capture_output=True, text=True, check=True).stdout
    top = ("daemon/", "client/", "proto/")
    return [p for p in out.split() if everything or p.startswith(top)]


def strip(text):
    """Comments and strings blanked, lines kept."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'
                  r"'(?:\\.|[^'\\\n])*'", blank, text, flags=re.S)


DEF = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")


def functions(text):
    """(name, first line, line count, why-long) of each definition in the
    house style: the name at the start of a line, the body's braces at the
    start of lines."""
    lines = text.split("\n")
    clean = strip(text).split("\n")
    out = []
    i = 0
    while i < len(clean):
        m = DEF.match(clean[i])
        if m and not clean[i].rstrip().endswith(";"):
            j = i
            while j < len(clean) and not clean[j].startswith("{"):
                if clean[j].rstrip().endswith(";"):
                    break
                j += 1
            if j < len(clean) and clean[j].startswith("{"):
                k = j + 1
                while k < len(clean) and not clean[k].startswith("}"):
                    k += 1
                why = any("Long:" in lines[x] for x in range(j, min(j + 4,
                                                                    k)))
                out.append((m.group(1), i + 1, k - i + 1, why))
                i = k
        i += 1
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = sources(root, "--all" in sys.argv[1:])
    text = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8",
                  errors="replace") as fh:
            text[f] = fh.read()

    per = collections.Counter()
    for f in files:
        per[os.path.dirname(f) or "."] += text[f].count("\n")
    print("lines of C per folder:")
    for d in sorted(per):
        print(f"  {per[d]:7d}  {d}")
    print(f"  {sum(per.values()):7d}  in all")

    big = sorted(((text[f].count("\n"), f) for f in files
                  if text[f].count("\n") > BIG), reverse=True)
    print(f"files over {BIG} lines: {len(big)}")
    for n, f in big:
        print(f"  {n:6d}  {f}")

    longs, kept = [], []
    defined = collections.defaultdict(dict)  # folder -> name -> file
    for f in files:
        if not f.endswith(".c"):
            continue
        for name, line, n, why in functions(text[f]):
            defined[os.path.dirname(f)][name] = f
            if n > LONG:
                (kept if why else longs).append((n, f"{f}:{line}", name))
    longs.sort(reverse=True)
    kept.sort(reverse=True)
    print(f"functions over {LONG} lines: {len(longs)} "
          f"(and {len(kept)} that say why they keep their length)")
    for n, where, name in longs + kept:
        print(f"  {n:5d}  {name}  {where}")

    # Calls between the files of a folder; circles are the strongly
    # connected groups of more than one file.
    circles = []
    for folder, names in sorted(defined.items()):
        fs = sorted({f for f in names.values()})
        edges = {f: set() for f in fs}
        pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") \
            if names else None
        for f in fs:
            for m in pat.finditer(strip(text[f])):
                g = names[m.group(1)]
                if g != f:
                    edges[f].add(g)
        circles += [(folder, c) for c in scc(edges) if len(c) > 1]
    print(f"circles inside a folder: {len(circles)}")
    for folder, c in circles:
        print(f"  {folder}: " + " <-> ".join(os.path.basename(f)
                                             for f in sorted(c)))
    return 0


def scc(edges):
    """Tarjan's strongly connected components."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
