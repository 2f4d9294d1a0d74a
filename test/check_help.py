#!/usr/bin/env python3
"""Check that every program and script behaves like a Unix tool on its
command line: --help and -h print the usage on stdout and exit 0; an
unknown option exits 2 with nothing on stdout (a message on stderr).

Usage: check_help.py [--scripts-dir DIR]... [--script FILE]... PROGRAM...

PROGRAMs (the built executables, as meson passes them) get --help, -h and
--no-such-option. Scripts (every *.sh in each DIR, and each FILE) get only
--help and -h: the unknown option would reach a script that installs
packages and builds before it passes its arguments on. Each run has a
deadline of TIMEOUT_S seconds. Fails if given no program or no script.
"""
import os
import pathlib
import signal
import subprocess
import sys

TIMEOUT_S = 30


def run(argv):
    """(status, stdout, stderr) of argv, or None after the deadline."""
    # Its own process group, so that a run past its deadline is killed
    # with every child it started.
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None
    return p.returncode, out, err


def check(path, arg, want_status, want_stdout):
    """One run; returns a failure message or None."""
    name = f"{path} {arg}"
    try:
        # abspath: a bare name would be looked up in PATH.
        r = run([os.path.abspath(path), arg])
    except OSError as e:
        return f"{name}: cannot run: {e}"
    if r is None:
        return f"{name}: still running after {TIMEOUT_S} s"
    status, out, err = r
    what = []
    if status != want_status:
        what.append(f"exit status {status}, not {want_status}")
    if want_stdout and not out.strip():
        what.append("nothing on stdout")
    if not want_stdout and out:
        text = out[:200].decode(errors="replace")
        what.append(f"output on stdout: {text!r}")
    if not what:
        return None
    tail = err.decode(errors="replace").strip().splitlines()[-3:]
    return f"{name}: " + "; ".join(what) + "".join(
        f"\n    stderr: {line}" for line in tail)


def usage_error(msg):
    print(f"check_help.py: {msg} (try --help)", file=sys.stderr)
    sys.exit(2)


def main():
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    programs, scripts = [], []
    while args:
        a = args.pop(0)
        if a in ("--scripts-dir", "--script"):
            if not args:
                usage_error(f"{a} needs a value")
            v = args.pop(0)
            if a == "--script":
                scripts.append(v)
            else:
                found = sorted(str(p) for p in pathlib.Path(v).glob("*.sh"))
                if not found:
                    usage_error(f"no *.sh in {v}")
                scripts += found
        elif a.startswith("-"):
            usage_error(f"unknown option '{a}'")
        else:
            programs.append(a)
    # A checker that checks nothing would pass for one that checked all.
    if not programs:
        print("check_help.py: FAILED: no programs to check: the build "
              "passed none", file=sys.stderr)
        return 1
    if not scripts:
        print("check_help.py: FAILED: no scripts to check", file=sys.stderr)
        return 1

    failures = []
    for prog in programs:
        for arg in ("--help", "-h"):
            failures.append(check(prog, arg, 0, True))
        failures.append(check(prog, "--no-such-option", 2, False))
    for script in scripts:
        for arg in ("--help", "-h"):
            failures.append(check(script, arg, 0, True))
    failures = [f for f in failures if f]
    for f in failures:
        print(f"FAIL {f}")
    print(f"{len(programs)} programs and {len(scripts)} scripts checked, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
