#!/usr/bin/python3
"""A native getobs scales with threads: eachobs's NativeDataset with a numba cfunc.

getobs is a numba @cfunc that computes for about --us microseconds of
CPU (a chain of xorshift-multiply steps, the count of steps calibrated
here on one thread) and writes the result, an int64, as its sample's only field.
It runs on eachobs's threads without the GIL, so a second thread should
nearly double the rate on 2 idle cores. Rows: executor "background"
(only the workers compute) with 1 and 2 threads, the speedup of 2 over 1
the figure to read; and executor "threaded" with 0, 1 and 2 (the
consumer computes too). Batches of --batch, in order, every pass a fresh
iterator over --n samples; one untimed pass per loader, then --rounds
rounds interleaved; medians. Checked: every sample's value equals the
one computed before timing. On a shared 2-core machine compare rows of
one run, not runs; what else was running shows in the load average.

    numba_scaling.py [--n N] [--us U] [--batch B] [--rounds R] [--quick]
"""
import argparse
import sys
import time

import numba
import numpy as np
import torch
from numba import carray, types

import _support as S

GETOBS_SIG = types.int32(types.voidptr, types.uint64, types.voidptr)


def make_kernel(steps):
    """The work of one sample, as a plain numba function (to calibrate and
    to compute the expected values) and as a getobs cfunc."""

    @numba.njit(nogil=True)
    def work(idx):
        h = np.uint64(idx) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)
        for _ in range(steps):
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xFF51AFD7ED558CCD)
        return np.int64(h >> np.uint64(1))

    @numba.cfunc(GETOBS_SIG, nopython=True)
    def getobs(ctx, idx, obs):
        out = carray(obs, 1, np.int64)
        out[0] = work(idx)
        return 0

    return work, getobs


def calibrate(us):
    """Steps for about us microseconds a sample on one thread."""
    steps = 1000
    for _ in range(4):
        work, _ = make_kernel(steps)
        work(0)  # compiled
        t0 = time.thread_time()  # CPU time: steadier on a busy machine
        for i in range(200):
            work(i)
        per = (time.thread_time() - t0) / 200
        steps = max(1, int(steps * us * 1e-6 / per))
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8000, help="samples a pass")
    ap.add_argument("--us", type=float, default=50,
                    help="compute per sample, microseconds")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="2,000 samples, 3 rounds: about 10 s")
    a = ap.parse_args()
    if a.quick:
        a.n, a.rounds = min(a.n, 2000), min(a.rounds, 3)
    prog = "numba_scaling.py"

    torch.set_num_threads(1)
    eachobs, why = S.import_eachobs()
    print(f"# a numba cfunc getobs computing about {a.us:g} us a sample; "
          f"{a.n} samples a pass, batch {a.batch}, in order; {a.rounds} "
          "rounds interleaved, medians")
    print(f"# {S.machine_line()}; numba {numba.__version__}")
    print(f"# {S.eachobs_line(eachobs, why)}")
    if eachobs is None:
        print("# nothing to measure without eachobs")
        return 0

    steps = calibrate(a.us)
    work, getobs = make_kernel(steps)
    expected = np.array([work(i) for i in range(a.n)], dtype=np.int64)
    t0 = time.thread_time()
    for i in range(a.n):
        work(i)
    one_us = (time.thread_time() - t0) / a.n * 1e6
    print(f"# {steps} steps a sample: {one_us:.1f} us of CPU a sample on "
          f"the calling thread, {1e6 / one_us:.0f} samples/s a core")
    expected = torch.from_numpy(expected)
    ds = eachobs.NativeDataset(getobs.address, a.n,
                               fields={"h": ("int64", ())})

    def one(c, loader):
        at = 0
        with S.Timed() as t:
            for b in loader:
                h = b["h"]
                if not torch.equal(h, expected[at:at + len(h)]):
                    S.fail(prog, f"{c.executor} {c.workers_text}: samples "
                           f"{at}..{at + len(h) - 1} hold wrong values")
                at += len(h)
        if at != a.n:
            S.fail(prog, f"{c.executor} {c.workers_text}: {at} samples "
                   f"of {a.n}")
        return t.wall, t.cpu, None

    rows = [S.Config("eachobs", w, ex,
                     lambda w=w, ex=ex: S.eachobs_loader(
                         eachobs, ds, w, ex, batch_size=a.batch))
            for ex, w in (("background", 1), ("background", 2),
                          ("threaded", 0), ("threaded", 1),
                          ("threaded", 2))]
    S.run_rounds(rows, a.rounds, one)
    base = S.med(rows[0].walls)
    table = []
    for c in rows:
        rate = a.n / S.med(c.walls)
        cores = S.med([cpu / w for cpu, w in zip(c.cpus, c.walls)])
        table.append([c.executor, c.workers_text, f"{rate:.0f}",
                      S.spread(c.walls, a.n), f"{cores:.2f}",
                      f"{base / S.med(c.walls):.2f}"])
    S.print_table(["executor", "workers", "samples/s", "range", "cores",
                   "vs background 1"], table,
                  ["<", "<", ">", ">", ">", ">"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
