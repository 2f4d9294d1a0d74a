"""Failures and bad input: a __getitem__ that raises comes out of next()
with its type, traceback and index; on_error="skip" skips and counts;
a sample that does not match the first names the index, the leaf and
both; every bad argument gets a TypeError/ValueError/IndexError naming
it, and leaves nothing running."""
import traceback

import numpy as np
import pytest

import eachobs
from conftest import Samples, settle, task_count

EXECUTORS = ["threaded", "background", "serial"]


class Failing(Samples):
    def __init__(self, n, bad, kind="int"):
        super().__init__(n, kind)
        self.bad = set(bad)

    def __getitem__(self, i):
        if i in self.bad:
            raise KeyError(f"no sample {i}")
        return super().__getitem__(i)


@pytest.mark.parametrize("batch_size", [None, 1, 7], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("in_order", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_getitem_exception_comes_out_of_next(executor, in_order, batch_size):
    loader = eachobs.DataLoader(Failing(60, [17]), batch_size=batch_size,
                                executor=executor, in_order=in_order,
                                num_workers=3)
    got = []
    with pytest.raises(KeyError, match="no sample 17") as e:
        for b in loader:
            got += np.asarray(b).reshape(-1).tolist()
    assert any("dataset[17]" in n for n in getattr(e.value, "__notes__", []))
    frames = "".join(traceback.format_tb(e.value.__traceback__))
    assert "__getitem__" in frames, "the original traceback is kept"
    if in_order or executor == "serial":
        assert got == list(range(17 // (batch_size or 1) * (batch_size or 1)))


@pytest.mark.parametrize("batch_size", [None, 7], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("executor", EXECUTORS)
def test_skip_leaves_failures_out_and_counts_them(executor, batch_size):
    bad = [0, 13, 14, 59]
    loader = eachobs.DataLoader(Failing(60, bad), batch_size=batch_size,
                                executor=executor, on_error="skip")
    it = iter(loader)
    got = [x for b in it for x in np.asarray(b).reshape(-1).tolist()]
    assert sorted(got) == [i for i in range(60) if i not in bad]
    assert loader.stats()["failures"] == len(bad)


class Changing:
    def __init__(self, make):
        self.make = make

    def __len__(self):
        return 20

    def __getitem__(self, i):
        return self.make(i)


@pytest.mark.parametrize("make,error,words", [
    (lambda i: np.zeros(3 if i != 9 else 4, np.float32), ValueError,
     ["dataset[9]", "sample", "(4,)", "(3,)"]),
    (lambda i: np.zeros(3, np.float32 if i != 9 else np.float64), ValueError,
     ["dataset[9]", "dtype", "f8", "f4"]),
    (lambda i: {"a": 1, "b": [1.0, 2.0] if i != 9 else [1.0]}, ValueError,
     ["dataset[9]", "sample['b']", "2 items"]),
    (lambda i: {"a": 1, "b": 2.0} if i != 9 else {"a": 1, "c": 2.0},
     KeyError, ["dataset[9]", "'b'"]),
    (lambda i: (i, "x") if i != 9 else (i, 3), TypeError, ["str"]),
    (lambda i: (i, 2.5) if i != 9 else (i, "2.5"), TypeError,
     ["dataset[9]", "sample[1]", "str", "a float"]),
], ids=["shape", "dtype", "length", "keys", "string", "type"])
def test_a_sample_that_does_not_match_the_first_is_named(make, error, words):
    loader = eachobs.DataLoader(Changing(make), batch_size=4, num_workers=2,
                                on_error="raise")
    with pytest.raises(error) as e:
        for _ in loader:
            pass
    text = str(e.value) + " ".join(getattr(e.value, "__notes__", []))
    for w in words:
        assert w in text, (w, text)


def test_a_string_sample_needs_a_collate_fn():
    ds = Changing(lambda i: f"text {i}")
    with pytest.raises(TypeError, match="collate_fn"):
        list(eachobs.DataLoader(ds, batch_size=4))
    got = list(eachobs.DataLoader(ds, batch_size=4, collate_fn=list))
    assert got[0] == ["text 0", "text 1", "text 2", "text 3"]


class NoLen:
    def __getitem__(self, i):
        return i


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(dataset=NoLen()), TypeError, ["dataset", "__len__"]),
    (dict(dataset=[1, 2], batch_size=-1), ValueError, ["batch_size", "-1"]),
    (dict(dataset=[1, 2], batch_size=1 << 40), ValueError, ["batch_size"]),
    (dict(dataset=[1, 2], batch_size=2.5), TypeError, ["batch_size", "2.5"]),
    (dict(dataset=[1, 2], num_workers=-1), ValueError, ["num_workers", "-1"]),
    (dict(dataset=[1, 2], hold=0), ValueError, ["hold", "0"]),
    (dict(dataset=[1, 2], executor="process"), ValueError,
     ["executor", "'process'"]),
    (dict(dataset=[1, 2], on_error="ignore"), ValueError, ["on_error"]),
    (dict(dataset=[1, 2], output="jax"), ValueError, ["output"]),
    (dict(dataset=[1, 2], shard_index=2, shard_count=2), ValueError,
     ["shard_index", "2"]),
    (dict(dataset=[1, 2], shuffle=True, sampler=[0]), ValueError,
     ["sampler", "shuffle"]),
    (dict(dataset=[1, 2], batch_sampler=[[0, 1]]), ValueError,
     ["batch_sampler", "sampler"]),
    (dict(dataset=[1, 2], timeout=5), ValueError, ["timeout"]),
    (dict(dataset=[1, 2], multiprocessing_context="spawn"), ValueError,
     ["multiprocessing_context", "threads"]),
    (dict(dataset=[1, 2], collate_fn=3), TypeError, ["collate_fn"]),
    (dict(dataset=[1, 2], seed=-1), ValueError, ["seed"]),
], ids=lambda x: str(x)[:40] if isinstance(x, dict) else None)
def test_bad_arguments_are_named(kwargs, error, words):
    before = task_count()
    with pytest.raises(error) as e:
        eachobs.DataLoader(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert settle(before) == before, "a thread was left running"


def test_an_iterable_dataset_is_refused_with_what_to_use():
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(TypeError, match="IterableDataset"):
        eachobs.DataLoader(Stream())


def test_a_sampler_index_out_of_range_is_an_index_error():
    before = task_count()
    loader = eachobs.DataLoader(Samples(10, "int"), sampler=[1, 2, 10])
    with pytest.raises(IndexError, match="index 10"):
        iter(loader)
    with pytest.raises(IndexError, match="index -1"):
        iter(eachobs.DataLoader(Samples(10, "int"), sampler=[-1]))
    assert settle(before) == before
    # The loader, and a new one, still work.
    loader.sampler = [1, 2, 3]
    assert [b.tolist() for b in loader] == [[1], [2], [3]]


def test_garbage_state_is_refused_and_the_loader_still_works():
    loader = eachobs.DataLoader(Samples(10, "int"), batch_size=5)
    for garbage in [None, {}, {"format": "x"}, [1, 2], "state"]:
        with pytest.raises(ValueError, match="state"):
            loader.load_state_dict(garbage)
    sd = loader.state_dict()
    sd["checkpoint"] = b"\x00" * 80
    loader.load_state_dict(sd)
    with pytest.raises(ValueError, match="checkpoint"):
        iter(loader)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
