#!/usr/bin/python3
"""Fails when an #include "prepfs/<layer>/..." points upward in the layer order.

    scripts/check_layers.py [REPO]

The order is src/LAYERS (bottom up). A file under src/<layer>/ or include/prepfs/<layer>/ may
include headers of its own layer and of the layers listed before it, never of one listed after.
Every folder under src/ and include/prepfs/ must be a listed layer, so a new folder cannot slip
past the rule. Exit 0 when clean; 1 with one line per violation otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"prepfs/([a-z_]+)/[^"]+"', re.M)


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(repo, "src", "LAYERS")) as f:
        order = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    rank = {name: i for i, name in enumerate(order)}
    problems = []
    for top in ("src", os.path.join("include", "prepfs")):
        root = os.path.join(repo, top)
        for layer in sorted(os.listdir(root)):
            folder = os.path.join(root, layer)
            if not os.path.isdir(folder):
                continue
            if layer not in rank:
                problems.append(f"{top}/{layer}/: not a layer listed in src/LAYERS")
                continue
            for dirpath, _, names in os.walk(folder):
                for name in sorted(names):
                    if not name.endswith((".h", ".cc")):
                        continue
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    for m in INCLUDE.finditer(text):
                        target = m.group(1)
                        line = text.count("\n", 0, m.start()) + 1
                        rel = os.path.relpath(path, repo)
                        if target not in rank:
                            problems.append(f"{rel}:{line}: includes prepfs/{target}/, which is not a layer")
                        elif rank[target] > rank[layer]:
                            problems.append(f"{rel}:{line}: {layer} includes prepfs/{target}/, a layer above it")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layer order in src/LAYERS")
        return 1
    print(f"check_layers: {len(order)} layers, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
