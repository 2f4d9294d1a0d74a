"""Shared datasets and helpers of the eachobs Python tests.

torch and numba are optional: a test that needs one asks for it with
pytest.importorskip, so that without it only those tests are skipped,
with the package's name in the reason.
"""
import collections
import os
import time

import numpy as np
import pytest

Point = collections.namedtuple("Point", ["pos", "tag"])


def task_count() -> int:
    """Threads of this process, C threads included."""
    return len(os.listdir("/proc/self/task"))


def settle(want: int, deadline_s: float = 5.0) -> int:
    """The thread count once it falls to want (a joined thread may stay
    listed a moment), or the last count seen at the deadline."""
    end = time.monotonic() + deadline_s
    n = task_count()
    while n > want and time.monotonic() < end:
        time.sleep(0.01)
        n = task_count()
    return n


class Samples:
    """n samples of one structure; sample i encodes i in every leaf, so a
    batch can be checked leaf by leaf. slow_s: each __getitem__ sleeps
    this long (releasing the GIL, as I/O does)."""

    def __init__(self, n, kind="tuple", slow_s=0.0, output="torch"):
        self.n, self.kind, self.slow_s = n, kind, slow_s
        self.torch = None
        if kind in ("tuple", "tensor", "namedtuple"):
            self.torch = pytest.importorskip("torch")

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self.slow_s:
            time.sleep(self.slow_s)
        k = self.kind
        if k == "tuple":
            t = self.torch
            return (t.full((2, 3), float(i)), i)
        if k == "tensor":
            return self.torch.full((4,), float(i), dtype=self.torch.float64)
        if k == "int":
            return i
        if k == "dict":
            return {"x": np.full((3,), i, np.int32),
                    "meta": {"w": float(i) / 2, "even": i % 2 == 0},
                    "ids": [np.int16(i), np.array([i, -i], np.int64)]}
        if k == "namedtuple":
            return Point(self.torch.tensor([i, i + 1]), np.uint8(i % 256))
        raise ValueError(k)


def indices_of(batch, kind, single):
    """The sample indices a batch (or a single sample) holds, checking
    that every leaf agrees."""
    def arr(x):
        return np.asarray(x)

    if kind == "tuple":
        x, y = batch
        ids = arr(y).reshape(-1)
        assert np.array_equal(arr(x).reshape(len(ids), -1)[:, 0], ids)
    elif kind == "tensor":
        ids = arr(batch).reshape(-1, 4)[:, 0].astype(np.int64)
    elif kind == "int":
        ids = arr(batch).reshape(-1)
    elif kind == "dict":
        ids = arr(batch["x"]).reshape(-1, 3)[:, 0]
        assert np.array_equal(arr(batch["meta"]["w"]).reshape(-1) * 2, ids)
        assert np.array_equal(arr(batch["meta"]["even"]).reshape(-1),
                              ids % 2 == 0)
        assert np.array_equal(arr(batch["ids"][0]).reshape(-1), ids)
        assert np.array_equal(arr(batch["ids"][1]).reshape(-1, 2)[:, 1], -ids)
    elif kind == "namedtuple":
        assert type(batch).__name__ == "Point"
        ids = arr(batch.pos).reshape(-1, 2)[:, 0]
        assert np.array_equal(arr(batch.tag).reshape(-1), ids % 256)
    else:
        raise ValueError(kind)
    return [int(i) for i in ids]
