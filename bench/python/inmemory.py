#!/usr/bin/python3
"""A dataset in memory: eachobs's DataLoader against PyTorch's, the loader alone.

60,000 samples of 784 float32 and an int64 label, held in two torch
tensors; a map-style Dataset whose __getitem__ returns (x[i], y[i]), the
way a PyTorch user writes it. Batches of 128, shuffled, every epoch a
fresh iterator; nothing is done with a batch but the checks. Rows:

  torch    DataLoader, num_workers 0 (the calling process) and 2 (worker
           processes, persistent_workers=True)
  eachobs  DataLoader, num_workers None (its default), 0, 1 and 2 threads,
           executor "threaded" (the consumer loads too) and "background"
           (only the workers load)

Each loader is made once; one untimed epoch starts its workers; then
--rounds rounds, every row one epoch a round, interleaved; the table shows
medians, the range of samples/s over the rounds, the CPU the process and
its workers used (in cores) and each row's samples/s over torch's with 0
workers. Checked every epoch: every label once, and the first batch's x
equals the rows its labels name. On a shared 2-core machine compare rows
of one run, not runs.

    inmemory.py [--n N] [--batch B] [--rounds R] [--quick] [--seed S]
"""
import argparse
import sys

import torch

import _support as S

FEATURES = 784


class InMemory(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def configs(ds, eachobs, batch, seed):
    kw = dict(batch_size=batch, shuffle=True)
    rows = [S.Config("torch", w, "-",
                     lambda w=w: S.torch_loader(ds, w, **kw))
            for w in (0, 2)]
    if eachobs is not None:
        for w, ex in ((None, "threaded"), (0, "threaded"), (1, "threaded"),
                      (2, "threaded"), (1, "background"),
                      (2, "background")):
            rows.append(S.Config(
                "eachobs", w, ex,
                lambda w=w, ex=ex: S.eachobs_loader(eachobs, ds, w, ex,
                                                    seed=seed, **kw)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60000, help="samples")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true",
                    help="10,000 samples: a run of about 10 s")
    a = ap.parse_args()
    if a.quick:
        a.n = min(a.n, 10000)
    prog = "inmemory.py"

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    eachobs, why = S.import_eachobs()
    x = torch.rand(a.n, FEATURES)
    y = torch.arange(a.n, dtype=torch.int64)
    ds = InMemory(x, y)
    seen = torch.zeros(a.n, dtype=torch.int32)
    ones = torch.ones(a.batch, dtype=torch.int32)

    def epoch(c, loader):
        seen.zero_()
        with S.Timed() as t:
            for i, (bx, by) in enumerate(loader):
                seen.index_add_(0, by, ones[:len(by)])
                if i == 0 and not torch.equal(bx, x[by]):
                    S.fail(prog, f"{c.loader} {c.workers_text}: the first "
                           "batch's x is not the rows its labels name")
        if not bool((seen == 1).all()):
            S.fail(prog, f"{c.loader} {c.workers_text}: an epoch did not "
                   "yield every sample exactly once")
        return t.wall, t.cpu, None

    rows = configs(ds, eachobs, a.batch, a.seed)
    print(f"# {a.n} samples of {FEATURES} float32 + an int64 label, in "
          f"memory; batch {a.batch}, shuffled; {a.rounds} rounds "
          "interleaved, medians")
    print(f"# {S.machine_line()}")
    print(f"# {S.eachobs_line(eachobs, why)}")
    S.run_rounds(rows, a.rounds, epoch)
    base = a.n / S.med(rows[0].walls)
    table = []
    for c in rows:
        rate = a.n / S.med(c.walls)
        cores = S.med([cpu / w for cpu, w in zip(c.cpus, c.walls)])
        table.append([c.loader, c.workers_text, c.executor, f"{rate:.0f}",
                      S.spread(c.walls, a.n),
                      f"{rate / a.batch:.1f}", f"{cores:.2f}",
                      f"{rate / base:.2f}"])
    S.print_table(["loader", "workers", "executor", "samples/s", "range",
                   "batches/s", "cores", "vs torch 0"], table,
                  ["<", "<", "<", ">", ">", ">", ">", ">"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
