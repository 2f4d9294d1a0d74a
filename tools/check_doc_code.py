#!/usr/bin/env python3
"""Every ```c block in README.md and docs/*.md must be a verbatim excerpt of
a file examples/*.c, every ```cpp block of a file examples/*.cpp, and every
```python block of a file examples/python/*.py, which the test suite
compiles and runs; so no code a reader copies from the README or the
guides is untested. Usage: check_doc_code.py SOURCE_ROOT"""
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
# A block's language, and the examples its blocks must come from.
examples = {
    lang: [p.read_text() for p in sorted((root / "examples").glob(glob))]
    for lang, glob in (("c", "*.c"), ("cpp", "*.cpp"),
                       ("python", "python/*.py"))
}
bad = 0
blocks = 0
docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
for doc in docs:
    text = doc.read_text()
    for m in re.finditer(r"```(c|cpp|python)\n(.*?)```", text, re.S):
        blocks += 1
        lang, code = m.group(1), m.group(2)
        if not any(code in ex for ex in examples[lang]):
            line = text[: m.start()].count("\n") + 1
            print(f"{doc.relative_to(root)}:{line}: {lang} code block is "
                  "not an excerpt of any examples/"
                  f"{'python/*.py' if lang == 'python' else '*.' + lang} file")
            bad += 1
print(f"{blocks} code blocks checked, {bad} not found in examples/")
sys.exit(1 if bad else 0)
