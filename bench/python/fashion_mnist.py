#!/usr/bin/python3
"""Training on Fashion-MNIST from Python: eachobs's DataLoader against PyTorch's.

The run of examples/libtorch_train.cpp, written in Python: an MLP
784-256-10 (ReLU), Adam (lr 0.001), cross-entropy, batches of 128,
shuffled, --epochs epochs (5), on the 60,000 training images of
Fashion-MNIST (Debian: dataset-fashion-mnist), tested on the 10,000 test
images after every epoch. The dataset is what a PyTorch user writes: a
map-style Dataset over the decompressed uint8 images whose __getitem__
normalizes one image, (x / 255 - 0.2860) / 0.3530, and returns it with
its label as an int, as torchvision's FashionMNIST does. Every loader
trains its own model, all made from the same seed (the same weights):

  torch 0         DataLoader, num_workers 0
  torch W proc    DataLoader, num_workers W (--workers, 2), worker
                  processes, persistent_workers=True
  eachobs W thr   eachobs.DataLoader on the same Dataset, W threads
  native W thr    with --native: eachobs.NativeDataset whose getobs is a
                  numba cfunc reading the images from a numpy array,
                  writing the normalized pixels (field "x") and the label
                  (field "y", through eachobs_field)

The models train epoch by epoch in turn (the order rotated each epoch).
Per epoch and loader: the training loss, the test accuracy, the training
loop's batches/s, the share of its time spent waiting for a batch, and
the CPU seconds the process and its workers used. Then each loader alone,
no training, --rounds passes interleaved: median batches/s. Checked every
epoch: every loader yields each class as often as the dataset holds it
and the same sum of pixels; with --native, its loss equals the eachobs
row's every epoch (the same seed draws the same shuffle, and the native
getobs writes the floats __getitem__ returns); the last test accuracy is
above 0.6 (chance is 0.1). On a shared 2-core machine compare rows of one run, not runs.

    fashion_mnist.py [--epochs E] [--subset N] [--workers W] [--native]
                     [--rounds R] [--seed S] [--data DIR] [--quick]
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch

import _support as S

PIXELS = 784
CLASSES = 10
BATCH = 128
MEAN, STD = 0.2860, 0.3530
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file, gzipped or not, as a numpy array of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\0\0" or raw[2] != 8:
        sys.exit(f"fashion_mnist.py: {path}: not an IDX file of bytes")
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big")
                  for k in range(dims))
    return np.frombuffer(bytearray(raw), np.uint8,
                         offset=4 + 4 * dims).reshape(shape)


def load_split(data, prefix):
    def find(name):
        for p in (os.path.join(data, name + ".gz"), os.path.join(data, name)):
            if os.path.exists(p):
                return p
        sys.exit(f"fashion_mnist.py: no {name}(.gz) in {data} "
                 "(Debian: apt install dataset-fashion-mnist)")
    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    return images.reshape(len(images), PIXELS), labels


def normalize(pixels):
    return (torch.from_numpy(np.ascontiguousarray(pixels)).float() / 255
            - MEAN) / STD


class FashionMNIST(torch.utils.data.Dataset):
    """The images kept as bytes, one normalized in each __getitem__."""

    def __init__(self, pixels, labels):
        self.pixels = torch.from_numpy(np.ascontiguousarray(pixels))
        self.labels = torch.from_numpy(labels.astype(np.int64))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = (self.pixels[i].float() / 255 - MEAN) / STD
        return x, int(self.labels[i])


def native_dataset(eachobs, pixels, labels):
    """A NativeDataset whose numba getobs reads image idx from one numpy
    array of n rows of 785 bytes (the pixels, then the label): field 0,
    "x", is written at obs; field 1, "y", where eachobs_field(1) says."""
    import ctypes

    import numba
    from numba import carray, types

    n = len(labels)
    packed = np.empty((n, PIXELS + 1), np.uint8)
    packed[:, :PIXELS] = pixels
    packed[:, PIXELS] = labels
    field = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_int64),
                             ctypes.c_size_t)(eachobs.FIELD_ADDRESS)
    # The same float32 operations as FashionMNIST.__getitem__, in order.
    f255, mean, std = np.float32(255), np.float32(MEAN), np.float32(STD)

    @numba.cfunc(types.int32(types.voidptr, types.uint64, types.voidptr),
                 nopython=True)
    def getobs(ctx, idx, obs):
        rows = carray(ctx, (n, PIXELS + 1), np.uint8)
        x = carray(obs, PIXELS, np.float32)
        for k in range(PIXELS):
            x[k] = (np.float32(rows[idx, k]) / f255 - mean) / std
        y = carray(field(1), 1, np.int64)
        y[0] = rows[idx, PIXELS]
        return 0

    ds = eachobs.NativeDataset(
        getobs.address, n, ctx=packed.ctypes.data,
        fields={"x": ("float32", (PIXELS,)), "y": ("int64", ())})
    ds._keep = (packed, getobs, field)  # alive as long as the dataset
    return ds


def as_xy(batch):
    return (batch["x"], batch["y"]) if isinstance(batch, dict) else batch


def make_model(seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(PIXELS, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, CLASSES))
    return net, torch.optim.Adam(net.parameters(), lr=1e-3)


def accuracy(net, tx, ty):
    with torch.no_grad():
        right = sum(int((net(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000])
                        .sum()) for i in range(0, len(ty), 1000))
    return right / len(ty)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--subset", type=int, default=0,
                    help="train on the first N images (0: all)")
    ap.add_argument("--workers", type=int, default=2,
                    help="DataLoader workers and eachobs threads")
    ap.add_argument("--native", action="store_true",
                    help="add eachobs.NativeDataset with a numba getobs")
    ap.add_argument("--rounds", type=int, default=3,
                    help="passes of each loader alone")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true",
                    help="1 epoch on 6,000 images: about 10 s")
    a = ap.parse_args()
    if a.quick:
        a.epochs, a.subset = 1, a.subset or 6000
    prog = "fashion_mnist.py"

    # One thread for torch's own work: the 2 cores are the loaders' too.
    torch.set_num_threads(1)
    eachobs, why = S.import_eachobs()
    pixels, labels = load_split(a.data, "train")
    tpixels, tlabels = load_split(a.data, "t10k")
    if a.subset:
        pixels, labels = pixels[:a.subset], labels[:a.subset]
    n = len(labels)
    tx, ty = normalize(tpixels), torch.from_numpy(tlabels.astype(np.int64))
    want_classes = torch.bincount(torch.from_numpy(labels.astype(np.int64)),
                                  minlength=CLASSES)
    want_sum = float(normalize(pixels).sum(dtype=torch.float64))
    ds = FashionMNIST(pixels, labels)
    kw = dict(batch_size=BATCH, shuffle=True)
    W = a.workers
    rows = [S.Config("torch", 0, "-", lambda: S.torch_loader(ds, 0, **kw)),
            S.Config("torch", W, "-", lambda: S.torch_loader(ds, W, **kw))]
    if eachobs is not None:
        rows.append(S.Config("eachobs", W, "threaded",
                             lambda: S.eachobs_loader(eachobs, ds, W,
                                                      "threaded",
                                                      seed=a.seed, **kw)))
        if a.native:
            nds = native_dataset(eachobs, pixels, labels)
            rows.append(S.Config("native", W, "threaded",
                                 lambda: S.eachobs_loader(eachobs, nds, W,
                                                          "threaded",
                                                          seed=a.seed,
                                                          **kw)))
    elif a.native:
        print(f"# --native needs eachobs: left out")

    def name(c):
        return f"{c.loader} {c.workers_text}"

    def one_pass(c, loader, model=None):
        """One epoch: (wall, cpu, (loss, waited, batches))."""
        classes = torch.zeros(CLASSES, dtype=torch.int64)
        xsum, loss_sum, waited, batches = 0.0, 0.0, 0.0, 0
        with S.Timed() as t:
            it = iter(loader)
            while True:
                w0 = time.perf_counter()
                try:
                    x, y = as_xy(next(it))
                except StopIteration:
                    break
                waited += time.perf_counter() - w0
                classes += torch.bincount(y, minlength=CLASSES)
                xsum += float(x.sum(dtype=torch.float64))
                if model is not None:
                    net, opt = model
                    opt.zero_grad()
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    opt.step()
                    loss_sum += float(loss) * len(y)
                batches += 1
            del it
        if not torch.equal(classes, want_classes):
            S.fail(prog, f"{name(c)}: an epoch's labels are not the "
                   f"dataset's: {classes.tolist()}")
        if abs(xsum - want_sum) > 1e-6 * abs(want_sum) + 1e-3:
            S.fail(prog, f"{name(c)}: an epoch's pixels sum to {xsum}, "
                   f"the dataset's to {want_sum}")
        return t.wall, t.cpu, (loss_sum / n, waited, batches)

    print(f"# Fashion-MNIST from {a.data}: training on {n}, testing on "
          f"{len(ty)}; MLP 784-256-10, Adam (lr 0.001), batch {BATCH}, "
          f"shuffled, seed {a.seed}; {a.epochs} epoch(s)")
    print(f"# {S.machine_line()}; {S.blas_line()}")
    print(f"# {S.eachobs_line(eachobs, why)}")
    models = {id(c): make_model(a.seed) for c in rows}
    # torch's workers fork before any eachobs thread exists.
    for c in rows:
        c.get()
    table = []
    for e in range(a.epochs):
        k = e % len(rows)
        for c in rows[k:] + rows[:k]:
            wall, cpu, (loss, waited, batches) = one_pass(
                c, c.get(), models[id(c)])
            acc = accuracy(models[id(c)][0], tx, ty)
            c.walls.append(wall)
            c.cpus.append(cpu)
            c.extra.append((loss, acc, batches))
        for c in rows:
            loss, acc, batches = c.extra[-1]
            table.append([e + 1, name(c), f"{loss:.4f}", f"{acc:.4f}",
                          f"{batches / c.walls[-1]:.1f}",
                          f"{c.cpus[-1]:.2f}",
                          f"{c.cpus[-1] / c.walls[-1]:.2f}"])
    S.print_table(["epoch", "loader", "loss", "test acc", "batches/s",
                   "cpu s", "cores"], table,
                  [">", "<", ">", ">", ">", ">", ">"])
    # Both eachobs rows draw the same shuffle from the same seed, so the
    # native getobs, if it writes what __getitem__ returns, trains the
    # same model to the same loss.
    same = [c for c in rows if c.loader in ("eachobs", "native")]
    if len(same) == 2:
        for e, (p, q) in enumerate(zip(same[0].extra, same[1].extra)):
            if abs(p[0] - q[0]) > 1e-5 * abs(p[0]):
                S.fail(prog, f"epoch {e + 1}: the native getobs trains to "
                       f"loss {q[0]:.6f}, __getitem__ to {p[0]:.6f}")
    for c in rows:
        acc = c.extra[-1][1]
        if acc <= 0.6:
            S.fail(prog, f"{name(c)}: test accuracy {acc:.3f}, not above "
                   "0.6")

    print(f"# each loader alone, no training: {a.rounds} passes "
          "interleaved, medians")
    alone = [S.Config(c.loader, c.workers, c.executor, c.make) for c in rows]
    for c, t in zip(alone, rows):
        c.obj = t.obj  # the same loader, its workers already started
        t.obj = None
    S.run_rounds(alone, a.rounds, one_pass, warmup=False)
    table = []
    for c, t in zip(alone, rows):
        nb = c.extra[0][2]
        train_rate = sum(x[2] for x in t.extra) / sum(t.walls)
        table.append([name(c), f"{train_rate:.1f}", f"{sum(t.cpus):.2f}",
                      f"{nb / S.med(c.walls):.1f}",
                      f"{S.spread(c.walls, nb)}",
                      f"{S.med(c.cpus):.2f}"])
    S.print_table(["loader", "train batches/s", "train cpu s",
                   "alone batches/s", "range", "alone cpu s"], table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
