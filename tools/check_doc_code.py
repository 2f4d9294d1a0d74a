#!/usr/bin/env python3
"""Every ```c block in docs/*.md must be a verbatim excerpt of a C file in
examples/, and every ```cpp block of a C++ file there, which the test suite
compiles and runs; so no code a reader copies from the guide is untested.
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
examples = {
    lang: [p.read_text() for p in sorted((root / "examples").glob("*." + lang))]
    for lang in ("c", "cpp")
}
bad = 0
blocks = 0
for doc in sorted((root / "docs").glob("*.md")):
    for m in re.finditer(r"```(c|cpp)\n(.*?)```", doc.read_text(), re.S):
        blocks += 1
        lang, code = m.group(1), m.group(2)
        if not any(code in text for text in examples[lang]):
            line = doc.read_text()[: m.start()].count("\n") + 1
            print(f"{doc.relative_to(root)}:{line}: code block is not an "
                  f"excerpt of any examples/*.{lang} file")
            bad += 1
print(f"{blocks} code blocks checked, {bad} not found in examples/")
sys.exit(1 if bad else 0)
