#!/usr/bin/env python3
"""Check that stasis's folders are layers: a file includes headers of its
own folder and of the folders below it, never of one above.

The order is the `layers = [...]` list of the top meson.build (bottom
first). Headers are included by bare name ("log.h"), so every header name
must be unique across the layers. Besides the layers, tools/inspect may
include only util, format and redundancy, and of fenix/ its MPI-free file
reader fx_file.h (stasis-inspect reads files; it needs no session, process,
MPI or engine code).

Usage: check_layers.py [ROOT]   exit 0: clean; 1: violations, one per line.
"""
import os
import re
import sys

INCLUDE = re.compile(r'#\s*include\s+"([^"/]+\.h)"')
# Readers outside the layers, and the layers each may include.
CONSUMERS = {"tools/inspect": {"util", "format", "redundancy", "fenix/fx_file.h"}}


def layer_order(root):
    text = open(os.path.join(root, "meson.build")).read()
    m = re.search(r"^layers\s*=\s*\[(.*?)\]", text, re.S | re.M)
    if not m:
        sys.exit("check_layers: no 'layers = [...]' in meson.build")
    return re.findall(r"'([^']+)'", m.group(1))


def sources(folder):
    for name in sorted(os.listdir(folder)):
        if name.endswith((".c", ".h", ".py", ".S")):
            yield os.path.join(folder, name)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    layers = layer_order(root)
    rank = {name: i for i, name in enumerate(layers)}
    owner, problems = {}, []
    for layer in layers:
        for path in sources(os.path.join(root, layer)):
            name = os.path.basename(path)
            if name.endswith(".h"):
                if name in owner:
                    problems.append(f"{layer}/{name}: a header of that name is in {owner[name]}/ too")
                owner[name] = layer
    # fenix/ is a leaf (libfenix.so): the layers after it in the list do
    # not see it either.
    readers = [(layer, set(l for l in layers[:rank[layer] + 1]
                           if l != "fenix" or layer == "fenix")) for layer in layers]
    readers += list(CONSUMERS.items())
    for folder, allowed in readers:
        for path in sources(os.path.join(root, folder)):
            for n, line in enumerate(open(path, errors="replace"), 1):
                m = INCLUDE.search(line)
                if not m or m.group(1) not in owner:
                    continue
                target = owner[m.group(1)]
                if target not in allowed and f"{target}/{m.group(1)}" not in allowed:
                    problems.append(f"{folder}/{os.path.basename(path)}:{n}: includes "
                                    f"{m.group(1)} of {target}/, a layer {folder}/ may not see")
    for p in problems:
        print(p)
    if not problems:
        print("layers: " + " < ".join(layers) + ": no upward include")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
