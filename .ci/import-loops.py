#!/usr/bin/env python3
"""Import loops inside each crate: modules (files) that reach each other
through `crate::`, `super::` and `self::` paths (in code, not comments),
outside `#[cfg(test)]` blocks. Prints each loop (a strongly connected component of more than one
module) and a count per crate.

    python3 .ci/import-loops.py [CRATE_DIR ...]   # default: host/*/

With --depth N a module counts as its first N path segments (1: a folder
such as `controller/` is one node, so `controller/metrics.rs` importing
`webhook` and `webhook` importing `controller` is a loop). With --max
CRATE=N (repeatable) it fails when a crate has more than N loops (issue
40 asks zero for weft-dag and weft-plugin).
"""
import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(
    r"\buse\s+(crate|super|self)::(?:([A-Za-z_][A-Za-z0-9_:]*)::)?\{([^;]*)\};", re.S
)


def modules(src: Path) -> dict:
    """Module path (tuple) -> file, for src/lib.rs or src/main.rs trees."""
    out = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        if f.parent == src and f.stem == "main" and (src / "lib.rs").exists():
            continue  # a binary beside the library: its own crate
        out[tuple(parts)] = f
    return out


def non_test(text: str) -> str:
    """The file without comments (doc links are not imports) and without
    its `#[cfg(test)] mod ... { }` blocks."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def top_level(group: str) -> list:
    """The comma-separated items of a `{...}` use group, nested groups whole."""
    items, depth, cur = [], 0, ""
    for ch in group:
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur.strip())
    return [i for i in items if i]


def resolve(mods: dict, here: tuple, root: str, rest: list) -> tuple | None:
    base = {"crate": (), "self": here, "super": here[:-1]}[root]
    while rest and rest[0] == "super":
        base, rest = base[:-1], rest[1:]
    path = base + tuple(rest)
    while path and path not in mods:
        path = path[:-1]
    return path


def grouped(graph: dict, depth: int) -> dict:
    """The graph with each module cut to its first `depth` segments."""
    out = {}
    for v, ws in graph.items():
        g = out.setdefault(v[:depth], set())
        g.update(w[:depth] for w in ws if w[:depth] != v[:depth])
    for ws in list(out.values()):
        for w in ws:
            out.setdefault(w, set())
    return out


def edges(mods: dict) -> dict:
    graph = {m: set() for m in mods}
    for here, f in mods.items():
        text = non_test(f.read_text())
        refs = [(r, p.strip(":").split("::")) for r, p in PATH.findall(text)]
        for root, prefix, group in USE_GROUP.findall(text):
            head = prefix.split("::") if prefix else []
            for item in top_level(group):
                item = item.split("::")[0].split(" as ")[0].strip()
                if item and item not in ("self", "*"):
                    refs.append((root, head + [item]))
        # `super::x` inside an inline `mod y { }` may mean a sibling inline
        # module of this file (bindings.rs's worlds), not a file module.
        inline = set(re.findall(r"\bmod\s+(\w+)\s*\{", text))
        for root, parts in refs:
            if root in ("super", "self") and parts and parts[0] in inline:
                continue
            target = resolve(mods, here, root, parts)
            if target is not None and target != here and target != ():
                # A module reaching into its own child is its business.
                if target[: len(here)] != here:
                    graph[here].add(target)
    return graph


def loops(graph: dict) -> list:
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def main(argv):
    limits, dirs, depth = {}, [], None
    it = iter(argv)
    for a in it:
        if a == "--max":
            name, n = next(it).split("=")
            limits[name] = int(n)
        elif a == "--depth":
            depth = int(next(it))
        else:
            dirs.append(Path(a))
    root = Path(__file__).resolve().parent.parent
    dirs = dirs or sorted(p for p in (root / "host").iterdir() if (p / "src").is_dir())
    failed = False
    for d in dirs:
        graph = edges(modules(d / "src"))
        found = loops(grouped(graph, depth) if depth else graph)
        print(f"{d.name}: {len(found)} import loop(s)")
        for comp in found:
            names = ["::".join(m) or "lib" for m in comp]
            print(f"  {len(comp)} files: {', '.join(names)}")
        if d.name in limits and len(found) > limits[d.name]:
            print(f"  more than {limits[d.name]} allowed")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
