#!/usr/bin/env python3
"""examples/files.c on folders made here: every byte of a file that fits
its slot (obs_size, 4096 bytes) is counted, one exactly that large
included, and a file one byte larger fails the run with its name, never
cut short in silence.

usage: check_files_example.py EXAMPLE_FILES
"""
import os
import subprocess
import sys
import tempfile

SLOT = 4096  # MAX_BYTES in examples/files.c


def run(program, folder):
    return subprocess.run([program, folder], capture_output=True, text=True,
                          timeout=30)


def make(folder, sizes):
    for name, size in sizes.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"x" * size)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    program = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        fits = {"a.txt": 1, "full.txt": SLOT, "c.txt": 100}
        make(folder, fits)
        r = run(program, folder)
        want = [f"epoch {e}: {len(fits)} files, {sum(fits.values())} bytes"
                for e in range(3)]
        if r.returncode != 0 or r.stdout.split("\n")[:3] != want:
            failures.append(f"files that fit: exit {r.returncode}, stdout "
                            f"{r.stdout!r}, stderr {r.stderr!r}; expected "
                            f"{want}")
        make(folder, {"big.txt": SLOT + 1})
        r = run(program, folder)
        named = os.path.join(folder, "big.txt")
        if r.returncode != 1 or named not in r.stderr or \
                "too large" not in r.stderr:
            failures.append(f"a file of {SLOT + 1} bytes: exit "
                            f"{r.returncode}, stdout {r.stdout!r}, stderr "
                            f"{r.stderr!r}; expected exit 1 and a message "
                            f"naming {named} as too large")
    for f in failures:
        print("check_files_example:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
