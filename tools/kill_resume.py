#!/usr/bin/env python3
"""Kill examples/resume at random points with SIGKILL, restart it each
time, and check that the finished epoch trained on every observation
exactly once. Exits 0 when it did after at least KILLS kills.

Usage: kill_resume.py RESUME_PROGRAM [--kills KILLS] [--seed SEED]"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

args = sys.argv[1:]
if args[:1] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if not args or args[0].startswith("-"):
    print("usage: kill_resume.py RESUME_PROGRAM [--kills K] [--seed S] "
          "(try --help)", file=sys.stderr)
    sys.exit(2)
prog, kills_wanted, seed = args[0], 50, int(time.time())
rest = args[1:]
while rest:
    if rest[0] == "--kills" and len(rest) > 1:
        kills_wanted = int(rest[1])
    elif rest[0] == "--seed" and len(rest) > 1:
        seed = int(rest[1])
    else:
        print(f"kill_resume.py: unknown argument {rest[0]!r}", file=sys.stderr)
        sys.exit(2)
    rest = rest[2:]
rng = random.Random(seed)
work = ["--n", "40000", "--every", "5", "--sleep-us", "200"]
with tempfile.TemporaryDirectory() as d:
    state = os.path.join(d, "state")
    kills = runs = 0
    delay_max = 0.04
    start = time.monotonic()
    while True:
        runs += 1
        p = subprocess.Popen([prog, state] + work, stdout=subprocess.DEVNULL)
        try:
            p.wait(timeout=rng.uniform(0.005, delay_max))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            # Enough kills: let later runs get further, so that one ends.
            if kills >= kills_wanted:
                delay_max *= 1.5
            continue
        if p.returncode != 0:
            print(f"kill_resume: run {runs} exited {p.returncode}",
                  file=sys.stderr)
            sys.exit(1)
        break
    check = subprocess.run([prog, state, "--check"] + work,
                           capture_output=True, text=True)
    took = time.monotonic() - start
    print(f"kill_resume: seed {seed}: {kills} kills over {runs} runs "
          f"in {took:.1f} s; then: {check.stdout.strip().splitlines()[-1]}")
    if kills < kills_wanted:
        print(f"kill_resume: the epoch ended after {kills} kills, fewer "
              f"than {kills_wanted}: make it longer", file=sys.stderr)
        sys.exit(1)
    sys.exit(check.returncode)
