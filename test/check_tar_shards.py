#!/usr/bin/env python3
"""examples/tar_shards.c end to end: build WebDataset-style tar shards with
Python's tarfile from a folder of JPEGs (one sub-folder per class), then
check that an epoch yields every sample once, that --ordered yields the
same sequence for any --threads, that 4 ranks together read every sample
once and no shard twice, and that a run killed with SIGKILL at random
points and started again with --state finishes the epoch with every sample
exactly once. Exits 0 when all hold.

Usage: check_tar_shards.py EXAMPLE IMAGE_FOLDER [--shards K] [--kills N]"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

# The shards are made as the benchmark makes them (bench/, beside test/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bench"))
from tar_shards_torch import make_shards  # noqa: E402

args = sys.argv[1:]
if args[:1] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if len(args) < 2:
    print("usage: check_tar_shards.py EXAMPLE IMAGE_FOLDER [--shards K] "
          "[--kills N] (try --help)", file=sys.stderr)
    sys.exit(2)
prog, folder = args[0], args[1]
nshards, kills_wanted = 16, 5
rest = args[2:]
while rest:
    if rest[0] == "--shards" and len(rest) > 1:
        nshards = int(rest[1])
    elif rest[0] == "--kills" and len(rest) > 1:
        kills_wanted = int(rest[1])
    else:
        print(f"check_tar_shards.py: unknown argument {rest[0]!r}",
              file=sys.stderr)
        sys.exit(2)
    rest = rest[2:]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(shard_dir, keys, *extra):
    r = subprocess.run([prog, shard_dir, "--keys", keys, "--batch", "8",
                        "--shuffle-buffer", "16", *extra],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"{' '.join(extra)}: exit {r.returncode}: {r.stderr}")
    with open(keys) as f:
        return [int(k) for k in f.read().split()], r.stdout


def expect_once(got, want, what):
    if sorted(got) != sorted(want):
        missing = set(want) - set(got)
        twice = len(got) - len(set(got))
        fail(f"{what}: {len(got)} samples, {len(missing)} missing, "
             f"{twice} twice")


with tempfile.TemporaryDirectory() as d:
    shards = os.path.join(d, "shards")
    os.mkdir(shards)
    labels = make_shards(folder, shards, nshards)
    keys = os.path.join(d, "keys")
    got, out = run(shards, keys, "--threads", "2")
    expect_once(got, labels, "one epoch")
    want_sum = sum(labels.values())
    if f"label sum {want_sum}" not in out:
        fail(f"labels: {out!r}, expected a sum of {want_sum}")
    print(f"one epoch: {len(got)} samples from {nshards} shards, each once")

    seqs = [run(shards, keys, "--ordered", "--threads", t)[0]
            for t in ("1", "2", "5")]
    if seqs[0] != seqs[1] or seqs[0] != seqs[2]:
        fail("--ordered: the sequence depends on --threads")
    expect_once(seqs[0], labels, "ordered")
    print("ordered: the same sequence for 1, 2 and 5 threads")

    union = []
    for r in range(4):
        part = run(shards, keys, "--rank", str(r), "--ranks", "4")[0]
        union += part
    expect_once(union, labels, "4 ranks")
    print(f"4 ranks: {len(union)} samples together, each once")

    state = os.path.join(d, "state")
    rng = random.Random(int(time.time()))
    kills = 0
    cmd = [prog, shards, "--keys", keys, "--batch", "8", "--shuffle-buffer",
           "16", "--threads", "2", "--state", state, "--step-us", "20000"]
    if os.path.exists(keys):
        os.unlink(keys)
    for attempt in range(200):
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            p.wait(timeout=rng.uniform(0.05, 0.4))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            continue
        if p.returncode != 0:
            fail(f"--state run: exit {p.returncode}: {p.stderr.read()}")
        if kills >= kills_wanted:
            break
        os.unlink(keys)  # finished too soon: the epoch again, with kills
    with open(keys) as f:
        got = [int(k) for k in f.read().split()]
    expect_once(got, labels, f"killed {kills} times")
    print(f"killed with SIGKILL {kills} times and resumed: "
          f"{len(got)} samples, each once")
