#!/usr/bin/python3
"""The first loop of docs/python.md: one dataset and one loop, with
eachobs's DataLoader and with PyTorch's; only the loader line differs.
Prints each loader's samples per second."""
import argparse

argparse.ArgumentParser(description=__doc__).parse_args()

import time
import torch
import eachobs


class Images(torch.utils.data.Dataset):
    def __init__(self):
        self.x = torch.randn(10_000, 784)
        self.y = torch.randint(0, 10, (10_000,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


data = Images()
ours = eachobs.DataLoader(data, batch_size=128, shuffle=True, num_workers=2)
theirs = torch.utils.data.DataLoader(data, batch_size=128, shuffle=True,
                                     num_workers=2)
for name, loader in (("eachobs", ours), ("torch", theirs)):
    start = time.perf_counter()
    for x, y in loader:
        assert x.shape == (len(y), 784) and x.dtype == torch.float32
        assert y.dtype == torch.int64
    rate = len(data) / (time.perf_counter() - start)
    print(f"{name}: {rate:.0f} samples/s")
