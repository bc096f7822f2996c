#!/usr/bin/env python3
"""Keep the shared cargo build-dir (`make`'s $(HOST_BUILD_DIR)) from growing
without bound, and say so clearly when the disk is too full to test.

Every clone on a machine shares one build-dir, so artifacts of the
workspace's own crates are left behind whenever their configuration
changes (features, profile, the lint wrapper): a test binary is 150 to
230 MB, and 112 of them per configuration filled the disk once (SeaweedFS
then refused every upload of the tests). Dependencies are left alone:
cargo reuses them across clones, and rebuilding them costs most.

For each workspace target name (from `cargo metadata`), this keeps the
newest set of artifacts and the sets touched in the last KEEP_DAYS days,
at most KEEP_SETS of them (the newest), and removes the rest (their files
in deps/, their fingerprint and build-script directories, and stale
incremental directories). The cap matters more than the age: two clean
clones in one afternoon, each with its own set (a library crate has two
per clone, its rlib and its unit tests), left 53 GB of test binaries all
younger than three days. Four sets are one clone's and CI's.

Usage: prune-build-dir.py BUILD_DIR [--keep-days N] [--keep-sets N] [--min-free-gib N]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ARTIFACT = re.compile(r"^(?:lib)?(.+)-([0-9a-f]{16})(?:\..*)?$")
UNIT_DIR = re.compile(r"^(.+)-([0-9a-f]{16})$")


def workspace():
    """The workspace's package names and target names (as rustc spells them)."""
    out = subprocess.check_output(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"], text=True
    )
    packages, targets = set(), set()
    for p in json.loads(out)["packages"]:
        packages.add(p["name"])
        targets.update(t["name"].replace("-", "_") for t in p["targets"])
    return packages, targets


def groups(directory, pattern, names):
    """{(name, hash): [paths]} of the entries of `directory` named by `names`."""
    found = {}
    if not os.path.isdir(directory):
        return found
    for entry in os.listdir(directory):
        m = pattern.match(entry)
        if m and m.group(1) in names:
            found.setdefault((m.group(1), m.group(2)), []).append(
                os.path.join(directory, entry)
            )
    return found


def stale(found, cutoff, keep_sets):
    """The groups that are not their name's newest and were not touched since
    `cutoff` or are beyond its `keep_sets` newest."""
    mtime = {key: max(os.lstat(p).st_mtime for p in paths) for key, paths in found.items()}
    by_name = {}
    for key in found:
        by_name.setdefault(key[0], []).append(key)
    out = []
    for keys in by_name.values():
        keys.sort(key=lambda k: mtime[k], reverse=True)
        for rank, key in enumerate(keys):
            if rank > 0 and (mtime[key] < cutoff or rank >= keep_sets):
                out.append(key)
    return out


def remove(paths):
    freed = 0
    for p in paths:
        if os.path.isdir(p) and not os.path.islink(p):
            for root, _, files in os.walk(p):
                freed += sum(os.lstat(os.path.join(root, f)).st_size for f in files)
            shutil.rmtree(p)
        elif os.path.lexists(p):
            freed += os.lstat(p).st_size
            os.remove(p)
    return freed


def prune(build_dir, keep_days, keep_sets):
    packages, targets = workspace()
    cutoff = time.time() - keep_days * 86400
    freed = 0
    for profile in ("debug", "release"):
        base = os.path.join(build_dir, profile)
        deps = groups(os.path.join(base, "deps"), ARTIFACT, targets)
        gone = set()
        for key in stale(deps, cutoff, keep_sets):
            freed += remove(deps[key])
            gone.add(key[1])
        for sub in (".fingerprint", "build"):
            units = groups(os.path.join(base, sub), UNIT_DIR, packages)
            for key, paths in units.items():
                if key[1] in gone:
                    freed += remove(paths)
        incremental = groups(os.path.join(base, "incremental"), UNIT_DIR, targets)
        for key in stale(incremental, cutoff, keep_sets):
            freed += remove(incremental[key])
    return freed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--keep-days", type=float, default=3)
    ap.add_argument("--keep-sets", type=int, default=4)
    ap.add_argument("--min-free-gib", type=float, default=0)
    args = ap.parse_args()
    freed = prune(args.build_dir, args.keep_days, max(1, args.keep_sets)) if os.path.isdir(args.build_dir) else 0
    if freed:
        print(f"prune-build-dir: removed {freed / 2**20:.0f} MiB of stale workspace artifacts")
    for path in (args.build_dir if os.path.isdir(args.build_dir) else ".", "/tmp"):
        st = os.statvfs(path)
        free = st.f_bavail * st.f_frsize / 2**30
        if free < args.min_free_gib:
            sys.exit(
                f"make test: only {free:.1f} GiB free on the disk of {path}; the tests "
                f"need {args.min_free_gib:g} GiB (test binaries, clusters' data, and "
                "SeaweedFS, which refuses every upload below 1 GiB free). "
                "Free some space (for example stale clones or target directories) and run again."
            )


if __name__ == "__main__":
    main()
