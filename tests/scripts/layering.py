#!/usr/bin/env python3
"""The folder layering of src/ and include/lookahead/ (docs/architecture.md), checked from the #include lines.

Every source or header belongs to a folder: src/X or include/lookahead/X, and src/backend/B/... or
include/lookahead/backend/B/... to the backend B (its host/ and kernels/ subfolders included). A folder may include
only itself and the folders ALLOWED lists, so the folders form a DAG: util at the bottom, model above it, the
backends as peers above model (a backend never includes another backend), the engine above the backends, cli on
top. ATen (<ATen/...>, <c10/...>, <torch/...>) is included only by the engine and the CUDA backend.

Usage: layering.py SOURCE_DIR. Prints each violation as FILE:LINE: message; exit status 1 if any.
"""
import os
import re
import sys

ALLOWED = {
    "util": set(),
    "model": {"util"},
    "tokenizer": {"model", "util"},
    "io": {"tokenizer", "model", "util"},
    "backend/cpu": {"model", "util"},
    "backend/cuda": {"model", "util"},
    "draft": {"util"},
    "decode": {"draft", "model", "util"},
    "parallel": {"decode", "draft", "model", "util"},
    "options": {"decode", "draft", "model", "util"},
    "dist": {"parallel", "decode", "draft", "model", "util"},
    "engine": {"backend/cpu", "backend/cuda", "model", "util"},
    "cli": {"options", "dist", "parallel", "decode", "draft", "engine", "io", "tokenizer", "model", "util"},
}
ATEN_OK = {"engine", "backend/cuda"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")


def folder_of(rel):
    """'src/backend/cpu/gemm.cpp' -> 'backend/cpu'; 'include/lookahead/model/config.h' -> 'model'."""
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) > 2 and parts[1] == "lookahead":
        parts = parts[2:]
    elif parts[0] == "src":
        parts = parts[1:]
    else:
        return None
    if len(parts) < 2:
        return None
    return "/".join(parts[:2]) if parts[0] == "backend" and len(parts) > 2 else parts[0]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = []
    for top in ("src", "include/lookahead"):
        for d, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(SUFFIXES)]
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    bad = 0
    for f in sorted(files):
        me = folder_of(f)
        if me not in ALLOWED:
            print(f"{f}: in no known layer (add its folder to tests/scripts/layering.py and docs/architecture.md)")
            bad += 1
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, inc = m.groups()
                if kind == "<":
                    if inc.split("/")[0] in ("ATen", "c10", "torch") and me not in ATEN_OK:
                        print(f"{f}:{n}: {me} includes ATen ({inc}): only {sorted(ATEN_OK)} may")
                        bad += 1
                    continue
                if inc.startswith("lookahead/"):
                    target = "include/" + inc
                elif inc.startswith("backend/"):  # a backend's private header by its path under src/
                    target = "src/" + inc
                else:  # relative to the file, else on an include path: the one file of that name under src/
                    target = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                    if not os.path.exists(os.path.join(root, target)):
                        hits = [h for h in by_name.get(os.path.basename(inc), []) if h.endswith(inc)]
                        if len(hits) != 1:
                            print(f"{f}:{n}: cannot place \"{inc}\" ({len(hits)} candidates)")
                            bad += 1
                            continue
                        target = hits[0]
                other = folder_of(target)
                if other is None:
                    print(f"{f}:{n}: \"{inc}\" is outside src/ and include/lookahead/")
                    bad += 1
                elif other != me and other not in ALLOWED[me]:
                    print(f"{f}:{n}: {me} includes {other} (\"{inc}\"): {me} may include only "
                          f"{sorted(ALLOWED[me]) or 'nothing else'}")
                    bad += 1
    print(f"layering: {len(files)} files, {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
