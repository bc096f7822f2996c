#!/usr/bin/env python3
"""Source file sizes: no non-test Rust file over --max lines (issue 40 asks
800), and the median, 90th percentile and largest printed.

    python3 .ci/file-sizes.py [--max 800] [ROOT ...]   # default: host plugins sdk

Non-test files are the `.rs` files under a crate's `src/`, except unit-test
files (`tests.rs`, which hold a module's `#[cfg(test)] mod tests;`) and
anything under `tests/` or a `target` directory.
"""
import statistics
import sys
from pathlib import Path


def files(roots):
    for root in roots:
        for f in sorted(Path(root).rglob("*.rs")):
            parts = f.parts
            if "src" not in parts or "tests" in parts or f.name == "tests.rs":
                continue
            if any(p.startswith("target") for p in parts):
                continue
            yield f


def main(argv):
    limit, roots = 800, []
    args = iter(argv)
    for a in args:
        if a == "--max":
            limit = int(next(args))
        else:
            roots.append(a)
    sizes = {f: len(f.read_text().splitlines()) for f in files(roots or ["host", "plugins", "sdk"])}
    ordered = sorted(sizes.values())
    p90 = ordered[int(len(ordered) * 0.9)]
    print(f"{len(sizes)} files: median {statistics.median(ordered):g} lines, 90th percentile {p90}")
    for f, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {n:5} {f}")
    over = [(f, n) for f, n in sizes.items() if n > limit]
    for f, n in over:
        print(f"{f}: {n} lines, over {limit}: split it by responsibility (docs/architecture.md)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
