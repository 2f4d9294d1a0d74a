#!/usr/bin/env python3
"""The library's sources call each other one way, down the layers that
docs/design.md draws: every file of src/ uses only files in rows below
its own row of the diagram under "## Layers", and so no two files use
each other, directly or through others. A file "uses" another when its
code (not its comments or strings) names a function or table that the
other defines. Prints the graph, one line per file with what it uses,
then every use that goes sideways or up, every file the diagram leaves
out (or names but src/ lacks), and each circle; exits 1 when there is
any. Usage: check_layers.py SOURCE_ROOT"""
import pathlib
import re
import sys

args = sys.argv[1:]
if args[:1] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if len(args) != 1 or args[0].startswith("-"):
    print("usage: check_layers.py SOURCE_ROOT (try --help)", file=sys.stderr)
    sys.exit(2)
root = pathlib.Path(args[0])
files = sorted((root / "src").glob("*.c"))
# The diagram: the first ```text block after "## Layers", the top row
# first; a row is its label and the files after it, and a line that
# starts with a file goes on the row above.
design = (root / "docs" / "design.md").read_text()
section = design[design.index("## Layers"):]
block = section[section.index("```text") + 7:]
block = block[:block.index("```")]
row, k = {}, -1
for line in (l for l in block.splitlines() if l.strip()):
    if not re.match(r"\s*\w+\.c\b", line):
        k += 1
    for f in re.findall(r"\b\w+\.c\b", line):
        row[f] = k
NOISE = re.compile(r'/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', re.S)
# A definition starts at the beginning of a line: return type, name, (
DEF = re.compile(r"^(?:[a-z_][^\n;]*?[\s*])?(eachobs_\w+)\s*\([^;{]*\)\s*\{",
                 re.M)
TABLE = re.compile(r"^const struct \w+ (eachobs_\w+)", re.M)
code = {f.name: NOISE.sub("", f.read_text()) for f in files}
defined = {}
for name, text in code.items():
    for m in list(DEF.finditer(text)) + list(TABLE.finditer(text)):
        defined.setdefault(m.group(1), name)
uses = {name: set() for name in code}
for name, text in code.items():
    for ident in set(re.findall(r"\b(eachobs_\w+)\b", text)):
        home = defined.get(ident)
        if home and home != name:
            uses[name].add(home)


def reaches(a, b):
    seen, todo = set(), [a]
    while todo:
        for n in uses[todo.pop()]:
            if n == b:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


circles = sorted({tuple(sorted((a, b))) for a in uses for b in uses[a]
                  if reaches(b, a)})
unplaced = sorted(set(code) - set(row))
absent = sorted(set(row) - set(code))
upward = sorted((a, b) for a in uses for b in uses[a]
                if a in row and b in row and row[b] <= row[a])
for name in sorted(uses):
    print(f"{name:12} -> {' '.join(sorted(uses[name])) or '-'}")
for a, b in upward:
    where = "its own row" if row[a] == row[b] else "a row above"
    print(f"layer: {a} uses {b}, which is in {where} (docs/design.md)")
for f in unplaced:
    print(f"layer: src/{f} is in no row of docs/design.md's layers")
for f in absent:
    print(f"layer: docs/design.md's layers name {f}, which src/ lacks")
for a, b in circles:
    print(f"circle: {a} and {b} use each other (directly or through others)")
bad = len(upward) + len(unplaced) + len(absent)
print(f"{len(files)} files, {bad} out of their layer, {len(circles)} circles")
sys.exit(1 if bad or circles else 0)
