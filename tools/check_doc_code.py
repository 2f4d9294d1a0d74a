#!/usr/bin/env python3
"""Every ```c block in README.md and docs/*.md must be a verbatim excerpt of
a file in examples/, which the test suite compiles and runs; so no code a
reader copies from the README or the guide is untested.
Usage: check_doc_code.py SOURCE_ROOT"""
import pathlib
import re
import sys

args = sys.argv[1:]
if args[:1] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if len(args) != 1 or args[0].startswith("-"):
    print("usage: check_doc_code.py SOURCE_ROOT (try --help)", file=sys.stderr)
    sys.exit(2)
root = pathlib.Path(args[0])
examples = {p: p.read_text() for p in sorted((root / "examples").glob("*.c"))}
bad = 0
blocks = 0
docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
for doc in docs:
    for m in re.finditer(r"```c\n(.*?)```", doc.read_text(), re.S):
        blocks += 1
        code = m.group(1)
        if not any(code in text for text in examples.values()):
            line = doc.read_text()[: m.start()].count("\n") + 1
            print(f"{doc.relative_to(root)}:{line}: code block is not an "
                  f"excerpt of any examples/*.c file")
            bad += 1
print(f"{blocks} code blocks checked, {bad} not found in examples/")
sys.exit(1 if bad else 0)
