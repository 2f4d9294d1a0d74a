#!/usr/bin/python3
"""Train an MLP on Fashion-MNIST from a numba-compiled getobs.

The getobs is C code numba compiles: it runs on eachobs's threads without
the GIL, turning the bytes of one image into 784 float32 pixels (field
"x") and writing its label (field "y"), in place in the batch. The model,
optimizer and batch size are those of examples/libtorch_train.cpp: a
784-256-10 MLP, Adam at 0.001, batches of 128. Prints the loss, the test
accuracy and the training batches per second of each epoch.

Reads the Debian package dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist); exits 77 without it.

    numba_train.py [--epochs N] [--limit N] [--threads N] [--check]
"""
import argparse
import ctypes
import gzip
import os
import sys
import time

import numba
import numpy as np
import torch

import eachobs

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def fashion_mnist(split, limit):
    """Rows of 785 bytes: an image's 784 pixels, then its label."""
    images = read_idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 784)
    labels = read_idx(f"{split}-labels-idx1-ubyte.gz", 8)
    return np.ascontiguousarray(np.hstack([images, labels[:, None]])[:limit])


def native_dataset(rows):
    """A NativeDataset over rows, which must outlive it."""
    n = len(rows)
    label_of = eachobs.field_pointer(ctypes.c_int64)  # eachobs_field(k)

    @numba.cfunc("int32(voidptr, uint64, voidptr)", nopython=True)
    def getobs(ctx, idx, obs):
        src = numba.carray(ctx, (n, 785), np.uint8)
        x = numba.carray(obs, (784,), np.float32)  # field 0 is obs
        for i in range(784):
            x[i] = src[idx, i] / np.float32(255.0)
        numba.carray(label_of(1), (1,), np.int64)[0] = src[idx, 784]
        return 0

    return eachobs.NativeDataset(getobs, n, ctx=rows.ctypes.data,
                                 fields={"x": ("float32", (784,)),
                                         "y": ("int64", ())})


def accuracy(model, loader):
    right = total = 0
    with torch.no_grad():
        for batch in loader:
            right += (model(batch["x"]).argmax(1) == batch["y"]).sum().item()
            total += len(batch["y"])
    return right / total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--limit", type=int, default=60000,
                   help="training images used (default all)")
    p.add_argument("--threads", type=int, default=None,
                   help="loader threads (default: the CPUs)")
    p.add_argument("--check", action="store_true",
                   help="one epoch on 6,000 images; fail unless it learns")
    a = p.parse_args()
    if not os.path.isdir(DATA):
        print(f"numba_train: {DATA} not found (apt-get install "
              "dataset-fashion-mnist)", file=sys.stderr)
        return 77
    if a.check:
        a.epochs, a.limit = 1, 6000
    torch.manual_seed(0)
    train_rows = fashion_mnist("train", a.limit)
    test_rows = fashion_mnist("t10k", 10000)
    train, test = native_dataset(train_rows), native_dataset(test_rows)
    loader = eachobs.DataLoader(train, batch_size=128, shuffle=True, seed=0,
                                num_workers=a.threads, executor="background")
    test_loader = eachobs.DataLoader(test, batch_size=1000)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(a.epochs):
        t0, losses = time.perf_counter(), []
        for batch in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(batch["x"]),
                                                     batch["y"])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        rate = len(losses) / (time.perf_counter() - t0)
        acc = accuracy(model, test_loader)
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}, test accuracy "
              f"{acc:.4f}, {rate:.0f} batches/s")
    if a.check and not acc > 0.6:
        print(f"numba_train: test accuracy {acc:.3f} after one epoch",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
