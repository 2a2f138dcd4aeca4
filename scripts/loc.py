"""Line counts of the source tree, per folder and per file, so growth is visible (docs/architecture.md quotes it).

    python scripts/loc.py            # folders, then every file over --over lines (default 600)
    python scripts/loc.py --all      # every file
"""

from __future__ import annotations

import argparse
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ("lite_numba", "kernels", "plugins", "tests", "bench", "scripts")


def count(path: pathlib.Path) -> int:
    return sum(1 for _ in path.open(encoding="utf-8"))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", type=int, default=600, help="list files with more lines than this")
    ap.add_argument("--all", action="store_true", help="list every file")
    args = ap.parse_args(argv)
    folders: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    files = []
    for tree in TREES:
        for p in sorted((ROOT / tree).rglob("*.py")):
            if "data" in p.relative_to(ROOT).parts:
                continue
            n = count(p)
            rel = p.relative_to(ROOT)
            folders[str(rel.parent)][0] += 1
            folders[str(rel.parent)][1] += n
            files.append((n, str(rel)))
    total = sum(n for n, _ in files)
    print(f"{'folder':<24} {'files':>5} {'lines':>7}")
    for folder in sorted(folders):
        nf, nl = folders[folder]
        print(f"{folder:<24} {nf:>5} {nl:>7}")
    print(f"{'total':<24} {len(files):>5} {total:>7}")
    shown = [f for f in sorted(files, reverse=True) if args.all or f[0] > args.over]
    if shown:
        print(f"\nfiles{'' if args.all else f' over {args.over} lines'}:")
        for n, rel in shown:
            print(f"{n:>7}  {rel}")


if __name__ == "__main__":
    main()
