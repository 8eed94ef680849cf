#!/usr/bin/env python3
"""Lists import cycles among spillway's modules.

A module is a top-level folder or file of src/ (`model`, `engine`, `store`, `storage`, `lts`,
`post`, `cli`, `checkpoint`, `error`, `sys`, ...); module A depends on module B when a file of
A names `crate::B` (in a `use` or a path). A cycle is a strongly connected component of more
than one module. Inside a folder the same is done one level down (e.g. `store::comback` and
`store::delta`), with `super::` paths resolved. Exit code 1 when there is a cycle.

    tools/import_cycles.py            # from the repository root
"""
import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def module_of(rel):
    """('store/comback/cache.rs') -> ['store', 'comback'] (folders and file stem)."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts


def refs(text, module):
    """Module paths a file names: `crate::a::b` and, resolved against the file's own
    module path, `super::a` (one level up from the file's module)."""
    text = re.sub(r"//[^\n]*", "", text)
    out = set()
    for m in re.finditer(r"\bsuper::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
        out.add(tuple(module[:-1]) + tuple(m.group(1).split("::")))
    for m in re.finditer(r"crate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
        out.add(tuple(m.group(1).split("::")))
    # use crate::{a, b::c}
    for m in re.finditer(r"crate::\{([^}]*)\}", text):
        for item in m.group(1).split(","):
            item = item.strip()
            if item and re.match(r"[a-z_]", item):
                out.add(tuple(item.split("::")))
    return out


def scc(graph):
    index, low, stack, on, res, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            res.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return [c for c in res if len(c) > 1]


def main():
    files = {}
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[os.path.relpath(p, SRC)] = open(p, encoding="utf-8").read()
    top = {module_of(r)[0] for r in files if module_of(r)[0] not in ("lib", "main")}
    cycles = []
    for depth in (1, 2):
        graph = defaultdict(set)
        for rel, text in files.items():
            mod = module_of(rel)
            if mod[0] in ("lib", "main") or len(mod) < depth:
                continue
            src = tuple(mod[:depth])
            graph[src]
            for r in refs(text, mod):
                if r[0] not in top:
                    continue
                dst = tuple(r[:depth]) if len(r) >= depth else None
                if depth == 2 and (dst is None or dst[0] != src[0]):
                    continue
                if dst is None or len(dst) < depth:
                    continue
                # Only modules that exist (not items like crate::store::Insert).
                if depth == 2 and not any(module_of(f)[:2] == list(dst) for f in files):
                    continue
                if dst != src:
                    graph[src].add(dst)
        for c in scc(graph):
            cycles.append(sorted("::".join(m) for m in c))
    for c in cycles:
        print("cycle:", " <-> ".join(c))
    if not cycles:
        print("no import cycles among src/ modules")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
