"""eachobs.DataLoader: torch.utils.data.DataLoader's names over eachobs."""
from __future__ import annotations

import atexit
import os
import random
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, Optional

import numpy as np

from . import _eachobs
from ._layout import BOOL, FLOAT, INT, Layout, describe
from ._native import NativeDataset

LoaderError = _eachobs.LoaderError
HoldError = _eachobs.HoldError

_EXECUTORS = {"threaded": 0, "background": 1, "serial": 2}
_MAX_THREADS = 1024
_AUTOTUNE_THREADS = 64  # EACHOBS_AUTOTUNE_THREADS
_MAX_BATCH = 1 << 31
_MAX_SLOTS = 1 << 24
_STATE_FORMAT = "eachobs.DataLoader/1"

# Every loader still open, closed at interpreter exit before Python stops
# the threads that a loader thread's getobs would wait for.
_open: "weakref.WeakSet[DataLoader]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for loader in list(_open):
        loader.close()


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _cuda_available() -> bool:
    torch = _torch()
    return bool(torch is not None and torch.cuda.is_available())


def _pinned_block(size: int):
    """Page-locked host memory of size bytes: (address, owner)."""
    import torch
    t = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    return t.data_ptr(), t


def _int(name: str, value: Any, lo: int, hi: int, none: bool = False):
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is {value!r}: expected an int"
                        + (" or None" if none else ""))
    if not lo <= value <= hi:
        raise ValueError(f"{name} is {value}: expected {lo} .. {hi}")
    return value


def _choice(name: str, value: Any, choices) -> Any:
    if value not in choices:
        raise ValueError(f"{name} is {value!r}: expected one of "
                         + ", ".join(repr(c) for c in choices))
    return value


class DataLoader:
    """Batches of a map-style dataset, loaded by threads into memory the
    batches are made of.

    The names are ``torch.utils.data.DataLoader``'s and mean the same,
    but that ``num_workers`` counts threads (0: the calling thread loads;
    None: the CPUs this process may use). The batches are the same as
    ``default_collate`` makes, but every tensor lies in the loader's
    memory: no copy is made after ``__getitem__`` returns, and a batch's
    memory is reused only once its last tensor (or view) is freed.

    Ours: ``executor`` "threaded" (the training thread loads too while it
    would wait), "background" (it never does), "serial"; ``in_order``;
    ``hold``, the batches the training loop may keep alive at once
    (:class:`HoldError` past it); ``on_error`` "raise" or "skip";
    ``shard_index``/``shard_count`` (as DistributedSampler's);
    ``seed``; ``output`` "torch" or "numpy"; ``autotune``, the loader
    choosing how many threads load (``num_workers`` the most, None: 64),
    each epoch starting where the last ended. See docs/python.md.
    """

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1,
                 shuffle: bool = False, sampler: Any = None,
                 num_workers: Optional[int] = None,
                 collate_fn: Optional[Callable] = None,
                 pin_memory: bool = False, drop_last: bool = False,
                 worker_init_fn: Optional[Callable[[int], None]] = None,
                 generator: Any = None, prefetch_factor: Optional[int] = 2,
                 persistent_workers: bool = False, *,
                 seed: Optional[int] = None, executor: str = "threaded",
                 in_order: bool = True, hold: int = 2,
                 on_error: str = "raise", shard_index: int = 0,
                 shard_count: int = 1, output: str = "torch",
                 batch_sampler: Any = None, timeout: float = 0,
                 multiprocessing_context: Any = None,
                 pin_memory_device: str = "", autotune: bool = False):
        self._check_unsupported(dataset, batch_sampler, timeout,
                                multiprocessing_context, pin_memory_device)
        self.dataset = dataset
        self.native = isinstance(dataset, NativeDataset)
        self.numobs = self._length_of(dataset)
        self.batch_size = _int("batch_size", batch_size, 1, _MAX_BATCH,
                               none=True)
        self.num_workers = _int("num_workers", num_workers, 0, _MAX_THREADS,
                                none=True)
        self.prefetch_factor = _int("prefetch_factor", prefetch_factor, 1,
                                    _MAX_SLOTS, none=True)
        self.hold = _int("hold", hold, 1, _MAX_SLOTS)
        self.shard_count = _int("shard_count", shard_count, 1, 1 << 32 - 1)
        self.shard_index = _int("shard_index", shard_index, 0,
                                self.shard_count - 1)
        self.executor = _choice("executor", executor, _EXECUTORS)
        self.on_error = _choice("on_error", on_error, ("raise", "skip"))
        self.output = _choice("output", output, ("torch", "numpy"))
        if output == "torch" and _torch() is None:
            raise ImportError("output='torch' needs PyTorch (Debian: "
                              "python3-torch); output='numpy' does not")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching "
                             "and is mutually exclusive with drop_last")
        if shuffle and sampler is not None:
            raise ValueError("sampler option is mutually exclusive with "
                             "shuffle")
        if sampler is not None and not hasattr(sampler, "__len__"):
            raise TypeError(f"sampler is a {type(sampler).__name__} without "
                            "__len__: eachobs needs to know an epoch's length")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"collate_fn is {collate_fn!r}: not callable")
        if collate_fn is not None and self.native:
            raise ValueError("collate_fn: a NativeDataset's batches are laid "
                             "out by its fields, not collated")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"worker_init_fn is {worker_init_fn!r}: not "
                            "callable")
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.collate_fn = collate_fn
        self.drop_last = bool(drop_last)
        self.worker_init_fn = worker_init_fn
        self.in_order = bool(in_order)
        self.persistent_workers = bool(persistent_workers)
        self.autotune = bool(autotune)
        self.pin_memory = bool(pin_memory) and self._pinning()
        if seed is not None:
            _int("seed", seed, 0, (1 << 64) - 1)
        self.seed = self._seed_of(seed, generator) if self.shuffle else 0
        self._layout: Optional[Layout] = (dataset.layout if self.native
                                          else None)
        self._pool = None
        self._epoch = 0
        self._current: Optional[weakref.ref] = None
        self._resume: Optional[dict] = None
        self._last_stats: Dict[str, int] = {}
        self._closed = False
        _open.add(self)

    # ---- arguments ---------------------------------------------------

    @staticmethod
    def _check_unsupported(dataset, batch_sampler, timeout, context,
                           pin_device) -> None:
        torch = _torch()
        if torch is not None and isinstance(dataset,
                                            torch.utils.data.IterableDataset):
            raise TypeError("dataset is an IterableDataset: eachobs loads "
                            "map-style datasets (__len__ and __getitem__); "
                            "index your stream, or use torch's DataLoader")
        if batch_sampler is not None:
            raise ValueError("batch_sampler is not supported: give sampler "
                             "(the order) and batch_size instead")
        if timeout:
            raise ValueError("timeout is not supported: a loader thread's "
                             "__getitem__ cannot be abandoned; make it return "
                             "or raise on time")
        if context is not None:
            raise ValueError("multiprocessing_context is not supported: "
                             "eachobs loads on threads of this process, "
                             "never in other processes")
        if pin_device:
            raise ValueError("pin_memory_device is not supported: "
                             "pin_memory=True pins for CUDA")

    @staticmethod
    def _length_of(dataset) -> int:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"dataset is a {type(dataset).__name__}: expected "
                            "a map-style dataset with __len__ and __getitem__")
        n = len(dataset)
        if not isinstance(n, int) or n < 0:
            raise TypeError(f"len(dataset) is {n!r}: expected an int >= 0")
        return n

    @staticmethod
    def _seed_of(seed, generator) -> int:
        if seed is not None:  # checked in __init__
            return seed
        torch = _torch()
        if torch is not None:
            t = torch.empty((), dtype=torch.int64)
            return int(t.random_(generator=generator).item()) & ((1 << 64) - 1)
        if generator is not None:
            raise TypeError("generator needs PyTorch; give seed instead")
        return random.getrandbits(63)

    @staticmethod
    def _pinning() -> bool:
        if _cuda_available():
            return True
        warnings.warn("'pin_memory' argument is set as true but no "
                      "accelerator is found, then device pinned memory "
                      "won't be used.")
        return False

    # ---- epochs ------------------------------------------------------

    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else self.numobs
        if self.shard_count > 1:
            n = (n // self.shard_count if self.drop_last
                 else -(-n // self.shard_count))
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iter() starts (a new shuffle for each)."""
        self._epoch = _int("epoch", epoch, 0, (1 << 64) - 1)
        self._resume = None

    def __iter__(self) -> "_Epoch":
        if self._closed:
            raise LoaderError("the DataLoader is closed")
        self._close_epoch()
        resume, self._resume = self._resume, None
        epoch = resume["epoch"] if resume else self._epoch
        it = _Epoch(self, epoch, resume)
        self._current = weakref.ref(it)
        self._epoch = epoch + 1
        return it

    def _order(self, resume: Optional[dict]):
        """The sampler's indices for this epoch (uint64), or None."""
        if resume is not None and resume.get("indices") is not None:
            return np.frombuffer(resume["indices"], dtype=np.uint64)
        if self.sampler is None:
            return None
        order = np.fromiter((int(i) for i in self.sampler), dtype=np.int64,
                            count=len(self.sampler))
        bad = np.flatnonzero((order < 0) | (order >= self.numobs))
        if bad.size:
            raise IndexError(f"sampler yielded index {int(order[bad[0]])} "
                             f"(at position {int(bad[0])}); the dataset has "
                             f"{self.numobs} samples")
        return order.astype(np.uint64)

    def _layout_of(self, order) -> Layout:
        """The layout of the first sample of the order (skipping, with
        on_error="skip", those that fail)."""
        if self._layout is not None:
            return self._layout
        positions = order if order is not None else range(self.numobs)
        errors = []
        for first in positions[:64 if self.on_error == "skip" else 1]:
            try:
                sample = self.dataset[int(first)]
            except Exception as e:
                e.add_note(f"raised by dataset[{int(first)}], read to learn "
                           "the samples' layout")
                errors.append(e)
                continue
            self._layout = describe(sample, _eachobs.MAX_FIELDS)
            return self._layout
        raise errors[0]

    def _threads(self) -> int:
        """The threads to start, or under autotune the most that load
        (the C library's default bound: 64, or the CPUs if more)."""
        if self.num_workers is not None:
            return self.num_workers
        cpus = len(os.sched_getaffinity(0))
        return max(cpus, _AUTOTUNE_THREADS) if self.autotune else cpus

    def _pool_of(self):
        if not self.persistent_workers or self._threads() == 0:
            return None
        if self._pool is None:
            self._pool = _eachobs.Pool(self._threads())
        return self._pool

    def _collate_order(self, order, epoch: int) -> np.ndarray:
        """With a collate_fn, the epoch's order made here: the sampler's
        (or 0 .. n-1), shuffled by (seed, epoch), then this shard's part as
        DistributedSampler takes it (padded by wrapping around, or
        truncated with drop_last)."""
        base = (np.arange(self.numobs, dtype=np.uint64) if order is None
                else order)
        if self.shuffle:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            base = base[rng.permutation(len(base))]
        count = self.shard_count
        if count > 1 and len(base):
            if self.drop_last:
                base = base[:len(base) - len(base) % count]
            else:
                base = np.concatenate([base, np.resize(base,
                                                       -len(base) % count)])
            base = base[self.shard_index::count]
        return base

    def _start(self, epoch: int, resume: Optional[dict]):
        """The sampler's order (or None), the extension's Loader for one
        epoch, and with a collate_fn its batches (else None)."""
        order = self._order(resume)
        if self.collate_fn is not None:
            return (order, *self._start_collating(epoch, order, resume))
        empty = (order is not None and len(order) == 0) or self.numobs == 0
        layout = None if empty else self._layout_of(order)
        return order, _eachobs.Loader(
            dataset=self.dataset,
            numobs=self.numobs,
            getobs=self.dataset.getobs_address if self.native else 0,
            ctx=self.dataset.ctx if self.native else 0,
            plan=layout.nodes if layout else [],
            fields=layout.fields if layout else [1],
            specs=layout.specs if layout else [(1, 8, (1,))],
            tensor_type=_torch().Tensor if _torch() else None,
            collate=None,
            batchsize=self.batch_size or 0,
            indices=order,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            shard_index=self.shard_index,
            shard_count=self.shard_count,
            drop_last=self.drop_last,
            pin_alloc=_pinned_block if self.pin_memory else None,
            **self._engine_options(resume),
        ), None

    def _engine_options(self, resume: Optional[dict]) -> dict:
        """The Loader's arguments for who loads, how far ahead, and from
        where it resumes: the same with a collate_fn or without."""
        serial = self.num_workers == 0 or self.executor == "serial"
        workers = 1 if serial else self._threads()
        if self.autotune:  # prefetch per thread that loads at first
            workers = min(workers, len(os.sched_getaffinity(0)))
        pool = None if serial else self._pool_of()
        return dict(
            executor=_EXECUTORS["serial" if serial else self.executor],
            ordered=self.in_order,
            nthreads=0 if serial else (self.num_workers or 0),
            buffersize=(self.prefetch_factor * workers
                        if self.prefetch_factor and not serial else 0),
            autotune=self.autotune,
            # A pool keeps what the last epoch ended with by itself.
            autotune_start=(self._last_stats.get("nloading", 0)
                            if self.autotune and pool is None else 0),
            hold=self.hold,
            skip=self.on_error == "skip",
            resume=resume["checkpoint"] if resume else None,
            pool=pool,
            worker_init=self.worker_init_fn)

    def _start_collating(self, epoch: int, order, resume: Optional[dict]):
        """The Loader over the epoch's batches (_Batches), each loaded and
        collated by one thread, yielded as collate_fn returned it."""
        batches = _Batches(self, self._collate_order(order, epoch))
        c = _eachobs.Loader(
            dataset=batches, numobs=len(batches), getobs=0, ctx=0, plan=[],
            fields=[1], specs=[(1, 8, (1,))], tensor_type=None,
            collate=self.collate_fn, batchsize=0, indices=None,
            shuffle=False, seed=0, epoch=0, shard_index=0, shard_count=1,
            drop_last=False, pin_alloc=None, **self._engine_options(resume))
        return c, batches

    def _converters(self) -> list:
        """Per field: capsule -> what the batch holds."""
        layout = self._layout
        single = self.batch_size is None
        if self.output == "numpy":
            def conv(kind):
                def f(c):
                    a = np.from_dlpack(_eachobs.leaf(c))
                    if kind == BOOL:
                        a = a.view(np.bool_)
                    return a.item() if single and kind in (INT, FLOAT, BOOL) else a
                return f
        else:
            import torch
            from torch.utils.dlpack import from_dlpack

            def conv(kind):
                if kind == BOOL:
                    if single:
                        return lambda c: bool(from_dlpack(c).item())
                    return lambda c: from_dlpack(c).view(torch.bool)
                if single and kind in (INT, FLOAT):
                    return lambda c: from_dlpack(c).item()
                return from_dlpack
        return [conv(leaf.kind) for leaf in layout.leaves]

    def _close_epoch(self) -> None:
        it = self._current() if self._current else None
        if it is not None:
            it.close()
        self._current = None

    # ---- state -------------------------------------------------------

    def state_dict(self) -> dict:
        """Where the epoch is: a small picklable dict for
        load_state_dict (torchdata StatefulDataLoader's names)."""
        it = self._current() if self._current else None
        checkpoint = it.checkpoint() if it is not None else None
        epoch = it.epoch if checkpoint is not None else self._epoch
        indices = (it.indices.tobytes()
                   if checkpoint is not None and it.indices is not None
                   else None)
        return {"format": _STATE_FORMAT, "epoch": epoch,
                "checkpoint": checkpoint, "indices": indices,
                "numobs": self.numobs, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "shuffle": self.shuffle,
                "seed": self.seed, "shard_index": self.shard_index,
                "shard_count": self.shard_count,
                "sampler": self.sampler is not None}

    def load_state_dict(self, state: dict) -> None:
        """Continue from state: the next iter() yields the rest of that
        epoch (every sample the first run did not yield, once each), or,
        from a state taken between epochs, the next epoch."""
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ValueError(f"state is {type(state).__name__} "
                             f"{str(state)[:60]!r}: not a state_dict() of an "
                             "eachobs.DataLoader")
        mine = self.state_dict()
        for key in ("numobs", "batch_size", "drop_last", "shuffle", "seed",
                    "shard_index", "shard_count", "sampler"):
            if state.get(key) != mine[key]:
                what = "dataset length" if key == "numobs" else key
                raise ValueError(f"state_dict: {what} is {state.get(key)!r} "
                                 f"in the state, {mine[key]!r} here: the "
                                 "order would not be the same")
        epoch = state.get("epoch")
        checkpoint = state.get("checkpoint")
        if not isinstance(epoch, int) or epoch < 0 or not (
                checkpoint is None or isinstance(checkpoint, bytes)):
            raise ValueError("state_dict: epoch or checkpoint is damaged")
        self._close_epoch()
        self._epoch = epoch
        self._resume = ({"epoch": epoch, "checkpoint": checkpoint,
                         "indices": state.get("indices")}
                        if checkpoint is not None else None)

    def stats(self) -> Dict[str, int]:
        """The C library's eachobs_get_stats of the current (or last)
        epoch: "consumer_wait_ns" large means the loader is the
        bottleneck; "failures" counts samples skipped (on_error="skip")."""
        it = self._current() if self._current else None
        return it.stats() if it is not None else dict(self._last_stats)

    # ---- lifetime ----------------------------------------------------

    def close(self) -> None:
        """Stop the epoch in progress (within about one __getitem__) and
        join the threads; the DataLoader can still start epochs unless it
        is garbage."""
        self._close_epoch()
        self._pool = None

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        self._closed = True

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _Batches:
    """With a collate_fn: the epoch's batches as a dataset of their own,
    batch b = collate_fn([dataset[i] for i in its indices]), so that the
    library's threads load and collate whole batches, collate_fn running
    on a loader thread as PyTorch's does in a worker. The order is made
    here (a permutation fixed by seed and epoch, then the shard), and the
    library visits the batches as they are."""

    def __init__(self, loader: "DataLoader", order: np.ndarray):
        self.dataset = loader.dataset
        self.collate_fn = loader.collate_fn
        self.skip = loader.on_error == "skip"
        self.single = loader.batch_size is None
        size = loader.batch_size or 1
        n = len(order)
        count = n // size if loader.drop_last else -(-n // size)
        self.chunks = [order[k * size:(k + 1) * size] for k in range(count)]
        self.failures = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.chunks)

    def _sample(self, i: int):
        try:
            return self.dataset[i]
        except Exception as e:
            e.add_note(f"raised by dataset[{i}] on a loader thread")
            raise

    def __getitem__(self, b: int):
        samples = []
        for i in self.chunks[b].tolist():
            try:
                samples.append(self._sample(i))
            except Exception:
                if not self.skip:
                    raise
                with self._lock:
                    self.failures += 1
        if self.single:
            return self.collate_fn(samples[0]) if samples else _SKIPPED
        return self.collate_fn(samples) if samples else _SKIPPED


# A batch whose every sample failed under on_error="skip".
_SKIPPED = object()


class _Epoch(Iterator):
    """One pass over the dataset: the batches, in place."""

    def __init__(self, loader: DataLoader, epoch: int, resume: Optional[dict]):
        self._loader = loader
        self.epoch = epoch
        self.indices = None
        self._c = None
        self.indices, c, self._batches = loader._start(epoch, resume)
        self._c = c
        self._collate = loader.collate_fn
        if loader._layout is not None and self._collate is None:
            self._conv = loader._converters()
            self._build = (loader._layout.build if loader.batch_size
                           else loader._layout.build_single)
        self._length = c.length()

    def __len__(self) -> int:
        return self._length

    def __next__(self):
        c = self._c
        if c is None:
            raise StopIteration
        try:
            item = c.next()
        except (LoaderError, KeyboardInterrupt):
            # Not the end: too many batches alive (HoldError), another
            # thread iterating, or Ctrl-C, where the loop gets control at
            # once and close() (or the end of its frame) stops the threads.
            raise
        except BaseException:
            self.close()
            raise
        if item is None:
            self.close()
            raise StopIteration
        if self._collate is not None:  # collated on a loader thread
            if item[0] is _SKIPPED:
                return self.__next__()
            return item[0]
        return self._build([f(x) for f, x in zip(self._conv, item)])

    def checkpoint(self) -> Optional[bytes]:
        return self._c.checkpoint() if self._c is not None else None

    def stats(self) -> Dict[str, int]:
        if self._c is None:
            return dict(self._loader._last_stats)
        st = self._c.stats()
        if self._batches is not None:  # with a collate_fn, samples fail
            st["failures"] += self._batches.failures  # inside a batch
        return st

    def close(self) -> None:
        c = self._c
        if c is None:
            return
        try:
            self._loader._last_stats = self.stats()
        except LoaderError:  # another thread is in next(): close waits
            pass
        self._c = None
        c.close()

    def __del__(self) -> None:
        self.close()
