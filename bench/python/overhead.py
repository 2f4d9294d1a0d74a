#!/usr/bin/python3
"""What a batch costs: eachobs's DataLoader against PyTorch's with a no-op __getitem__.

__getitem__ returns the same preallocated torch.zeros(1) every time, so
all that is measured is the loader: calling __getitem__, collating,
handing the batch over. Batches of 1, 32 and 128, in order, every pass a
fresh iterator over --n samples (--n-batch1 at batch 1). Rows:

  torch    DataLoader, num_workers 0 and 2 (worker processes,
           persistent_workers=True)
  eachobs  DataLoader, num_workers None (its default), 0, 1 and 2 threads
           with executor "threaded", 2 with "background"

For each batch size every loader is made once, runs one untimed pass,
then --rounds timed passes, interleaved with the others; the table shows
the median microseconds per batch and per sample, the range of us/batch,
the CPU the process and its workers used (in cores) and each row's time
per batch over torch's with 0 workers. Checked: every pass yields --n
samples, in batches of the size asked (the last one may be short), each
a 1-float tensor of zeros. On a shared 2-core machine compare rows of one
run, not runs.

    overhead.py [--n N] [--n-batch1 N] [--batch LIST] [--rounds R]
                [--quick]
"""
import argparse
import sys

import torch

import _support as S


class NoOp(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
        self.item = torch.zeros(1)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.item


def configs(ds, eachobs, batch):
    kw = dict(batch_size=batch)
    rows = [S.Config("torch", w, "-",
                     lambda w=w: S.torch_loader(ds, w, **kw))
            for w in (0, 2)]
    if eachobs is not None:
        for w, ex in ((None, "threaded"), (0, "threaded"), (1, "threaded"),
                      (2, "threaded"), (2, "background")):
            rows.append(S.Config(
                "eachobs", w, ex,
                lambda w=w, ex=ex: S.eachobs_loader(eachobs, ds, w, ex,
                                                    **kw)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=30000,
                    help="samples a pass at batch 32 and 128")
    ap.add_argument("--n-batch1", type=int, default=4000,
                    help="samples a pass at batch 1")
    ap.add_argument("--batch", default="1,32,128")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="a tenth of the samples: a run of about 10 s")
    a = ap.parse_args()
    if a.quick:
        a.n, a.n_batch1 = a.n // 10, a.n_batch1 // 10
    prog = "overhead.py"

    torch.set_num_threads(1)
    eachobs, why = S.import_eachobs()
    print(f"# a no-op __getitem__ returning one preallocated "
          f"torch.zeros(1); {a.n} samples a pass ({a.n_batch1} at batch "
          f"1), in order; {a.rounds} rounds interleaved, medians")
    print(f"# {S.machine_line()}")
    print(f"# {S.eachobs_line(eachobs, why)}")
    table = []
    for batch in (int(b) for b in a.batch.split(",")):
        n = a.n_batch1 if batch == 1 else a.n
        ds = NoOp(n)
        nbatches = -(-n // batch)

        def one(c, loader, n=n, batch=batch):
            count = 0
            with S.Timed() as t:
                for b in loader:
                    count += len(b)
                    if b.shape[1:] != (1,) or len(b) > batch:
                        S.fail(prog, f"{c.loader} {c.workers_text}: a "
                               f"batch of shape {tuple(b.shape)}")
            if count != n:
                S.fail(prog, f"{c.loader} {c.workers_text}: {count} "
                       f"samples of {n}")
            return t.wall, t.cpu, None

        rows = configs(ds, eachobs, batch)
        S.run_rounds(rows, a.rounds, one)
        base = S.med(rows[0].walls) / nbatches
        for c in rows:
            per_batch = S.med(c.walls) / nbatches
            cores = S.med([cpu / w for cpu, w in zip(c.cpus, c.walls)])
            lo, hi = min(c.walls) / nbatches, max(c.walls) / nbatches
            table.append([batch, c.loader, c.workers_text, c.executor,
                          f"{per_batch * 1e6:.1f}",
                          f"{per_batch * 1e6 / batch:.2f}",
                          f"{lo * 1e6:.1f}-{hi * 1e6:.1f}", f"{cores:.2f}",
                          f"{per_batch / base:.2f}"])
    S.print_table(["batch", "loader", "workers", "executor", "us/batch",
                   "us/sample", "range", "cores", "vs torch 0"], table,
                  [">", "<", "<", "<", ">", ">", ">", ">", ">"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
