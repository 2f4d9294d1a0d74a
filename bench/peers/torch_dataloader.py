#!/usr/bin/env python3
"""Peer (d): PyTorch's Python DataLoader, as people use it.

A map-style Dataset whose __getitem__ sleeps t (time.sleep, which is
clock_nanosleep on CLOCK_MONOTONIC on Linux) and returns its index;
DataLoader(ds, batch_size=B, num_workers=P) with every other option at its
default: worker processes (fork), the default collate (a batch becomes a
tensor sent back through a multiprocessing queue), prefetch_factor 2,
workers started anew for every pass (persistent_workers=False), as eachobs
starts its threads for every iterator. PyTorch 1.13's DataLoader yields
batches in order and has no unordered mode: ordered by nature.

The same command line and CSV rows as the C peers (bench/peers/peer.h):
  torch_dataloader.py --case sleep|noop|first --t-us T --n N
                      --threads LIST [--batch LIST] [--ordered] [--reps R]
                      [--budget-ms B] [--n-batch1 N1]
--n-batch1 runs batch 1 with N1 items instead of N: a batch costs PyTorch
milliseconds, and one process for both saves importing torch twice.
"""
import argparse
import sys
import time

try:
    import torch
    from torch.utils.data import DataLoader, Dataset
except ImportError as e:  # the runner reports the skip
    print(f"torch_dataloader.py: cannot import torch ({e}); "
          "apt install python3-torch", file=sys.stderr)
    sys.exit(3)


class SleepData(Dataset):
    def __init__(self, n, t_s):
        self.n = n
        self.t_s = t_s

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        if self.t_s:
            time.sleep(self.t_s)
        return idx


def run(a, n, p, batch):
    """One timed pass; the same checks as the C peers' consumer."""
    first = a.case == "first"
    seen = bytearray(n)
    count = 0
    t0 = time.monotonic_ns()
    loader = DataLoader(SleepData(n, a.t_us / 1e6), batch_size=batch,
                        num_workers=p)
    it = iter(loader)
    t = 0
    for b in it:
        for v in b.tolist():
            if v >= n or seen[v]:
                sys.exit(f"torch_dataloader.py: index {v} out of range "
                         "or yielded twice")
            if v != count:
                sys.exit(f"torch_dataloader.py: index {v} at position "
                         f"{count}: not in order")
            seen[v] = 1
            count += 1
        if first:
            t = time.monotonic_ns() - t0
            break
    del it  # shuts the workers down
    if first:
        return t
    t = time.monotonic_ns() - t0
    if count != n:
        sys.exit(f"torch_dataloader.py: ended after {count} of {n}")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=["sleep", "noop", "first"],
                    default="sleep")
    ap.add_argument("--t-us", type=int, default=100)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--ordered", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--budget-ms", type=int, default=1000)
    ap.add_argument("--n-batch1", type=int, default=0)
    a = ap.parse_args()
    if a.case != "sleep":
        a.t_us = 0
    for p in (int(x) for x in a.threads.split(",")):
        for batch in (int(x) for x in a.batch.split(",")):
            n = a.n_batch1 if batch == 1 and a.n_batch1 else a.n
            times, used = [], 0
            while len(times) < a.reps and (not times
                                           or used < a.budget_ms * 1e6):
                times.append(run(a, n, p, batch))
                used += times[-1]
            times.sort()
            ms = [x / 1e6 for x in times]
            print(f"pytorch,DataLoader,{a.case},{a.t_us},{p},{n},{batch},"
                  f"{int(a.ordered)},{len(ms)},{ms[(len(ms) - 1) // 2]:.4f},"
                  f"{ms[0]:.4f},{ms[-1]:.4f},ordered by nature", flush=True)


if __name__ == "__main__":
    main()
