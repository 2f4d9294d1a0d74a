#!/usr/bin/env python3
"""The library's sources call each other one way: no file of src/ uses a
function defined in a file that (directly or through others) uses a
function of its own. A file "uses" a function when its code (not its
comments or strings) names one that another src/*.c file defines.
Prints the graph, one line per file with what it uses, and each circle
found; exits 1 when there is one. Usage: check_layers.py SOURCE_ROOT"""
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
files = sorted((pathlib.Path(args[0]) / "src").glob("*.c"))
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
for name in sorted(uses):
    print(f"{name:12} -> {' '.join(sorted(uses[name])) or '-'}")
for a, b in circles:
    print(f"circle: {a} and {b} use each other (directly or through others)")
print(f"{len(files)} files, {len(circles)} circles")
sys.exit(1 if circles else 0)
