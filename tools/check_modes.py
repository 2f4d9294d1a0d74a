#!/usr/bin/env python3
"""Every mode keeps its own state: the modes are the files of src/ that
define a `const struct eachobs__mode` table, and each mode's state is the
struct it defines for itself (`struct eachobs__<name>`) and the types of
that struct's members that are not also a member type of the iterator
(its mechanisms: the hand-off and the deques for unordered, the window for
ordered). The check fails when a file other than the mode names its
state struct; when a file other than the mode, or the mechanism's own
file and header, names a mechanism type or one of its functions
(`eachobs__<mechanism>_...`); and when a field of `struct eachobs_iter`
(src/internal.h) is used by exactly one mode and by no file that is not
a mode, start.c aside (it sets every field): such a field is that mode's
state. A file "names" something when
its code (not its comments or strings) does. Prints each mode with its
state, then every breach; exits 1 when there is any.
Usage: check_modes.py SOURCE_ROOT"""
import pathlib
import re
import sys

args = sys.argv[1:]
if args[:1] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if len(args) != 1 or args[0].startswith("-"):
    print("usage: check_modes.py SOURCE_ROOT (try --help)", file=sys.stderr)
    sys.exit(2)
src = pathlib.Path(args[0]) / "src"
NOISE = re.compile(r'/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', re.S)
code = {f.name: NOISE.sub("", f.read_text())
        for f in sorted(src.glob("*.[ch]"))}


def struct_body(text, name):
    m = re.search(r"^struct " + re.escape(name) + r" \{(.*?)^\};", text,
                  re.M | re.S)
    return m.group(1) if m else None


def member_types(body):
    return set(re.findall(r"\bstruct (eachobs__\w+)\s+\*?\w+", body))


def fields(body):
    names = []
    for decl in body.split(";"):
        decl = re.sub(r"\[[^\]]*\]|EACHOBS__ALIGNED", "", decl).strip()
        m = re.search(r"(\w+)\s*$", decl)
        if m:
            names.append(m.group(1))
    return names


iterator = struct_body(code["internal.h"], "eachobs_iter")
if iterator is None:
    print("modes: src/internal.h defines no struct eachobs_iter")
    sys.exit(1)
# The base's primitives (base.h: events, per-thread stats) are every
# mechanism's, no mode's.
common_types = member_types(iterator) | set(
    re.findall(r"^struct (eachobs__\w+) \{", code["base.h"], re.M))
modes = {}
for name, text in code.items():
    table = re.search(r"^const struct eachobs__mode (eachobs__(\w+)_mode)",
                      text, re.M)
    if not table:
        continue
    own = "eachobs__" + table.group(2)
    body = struct_body(text, own)
    if body is None:
        print(f"modes: {name} defines no struct {own} for its state")
        modes[name] = (own, set())
        continue
    modes[name] = (own, member_types(body) - common_types)

breaches = []
for mode, (own, mechs) in sorted(modes.items()):
    print(f"{mode:12} state: struct {own}"
          + (f"; mechanisms: {' '.join(sorted(mechs))}" if mechs else ""))
    for name, text in code.items():
        if name != mode and re.search(r"\bstruct " + own + r"\b", text):
            breaches.append(f"{name} names {mode}'s state struct {own}")
        if name == mode:
            continue
        for mech in mechs:
            stem = mech[len("eachobs__"):]
            home = {stem + ".c", stem + ".h"}
            # deques live in deque.c: the mechanism's files are named
            # after its struct, singular or plural.
            home |= {stem.rstrip("s") + ".c", stem.rstrip("s") + ".h"}
            if name in home:
                continue
            if re.search(r"\bstruct " + mech + r"\b|\b" + mech + r"_\w+\(",
                         text):
                breaches.append(f"{name} names {mode}'s mechanism {mech}")

mode_files = set(modes)
for field in fields(iterator):
    pat = re.compile(r"(?:->|\.)" + field + r"\b")
    users = {n for n, t in code.items() if pat.search(t)}
    in_modes = users & mode_files
    if len(in_modes) == 1 and not (users - mode_files - {"start.c"}):
        breaches.append(f"eachobs_iter.{field} is used by "
                        f"{next(iter(in_modes))} alone: it is that mode's "
                        "state")
for b in breaches:
    print("modes:", b)
print(f"{len(modes)} modes, {len(breaches)} breaches")
sys.exit(1 if breaches or not modes else 0)
