"""state_dict / load_state_dict: a state taken mid-epoch, pickled, given
to a new loader, continues the same epoch: the two runs together yield
every sample of it exactly once, for every executor, ordered or not,
batched or not, with shuffle, samplers and shards; a state of another
order is refused, naming what differs."""
import pickle

import numpy as np
import pytest

import eachobs
from conftest import Samples

EXECUTORS = ["threaded", "background", "serial"]


def ids(batch):
    return np.asarray(batch).reshape(-1).tolist()


@pytest.mark.parametrize("options", [
    dict(), dict(shuffle=True, seed=11), dict(shard_index=1, shard_count=3),
    dict(shuffle=True, seed=3, shard_index=0, shard_count=2, drop_last=True),
], ids=["plain", "shuffle", "shard", "shuffle-shard-drop"])
@pytest.mark.parametrize("batch_size", [None, 7], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("in_order", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_new_loader_continues_the_epoch(executor, in_order, batch_size,
                                          options):
    ds = Samples(200, "int")

    def make(**more):
        return eachobs.DataLoader(ds, batch_size=batch_size, executor=executor,
                                  in_order=in_order, num_workers=3,
                                  **options, **more)

    if batch_size is None and options.get("drop_last"):
        pytest.skip("drop_last needs batches (as in PyTorch)")

    def whole(epoch):
        loader = make()
        loader.set_epoch(epoch)
        return sorted(x for b in loader for x in ids(b))

    first = make()
    first.set_epoch(2)
    it = iter(first)
    before = [x for _, b in zip(range(9), it) for x in ids(b)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    assert state["epoch"] == 2 and len(pickle.dumps(state)) < 4096
    after_first = [x for b in it for x in ids(b)]  # the first run goes on
    second = make(hold=3)
    second.load_state_dict(state)
    rest = [x for b in second for x in ids(b)]
    assert sorted(before + rest) == sorted(before + after_first)
    assert sorted(before + rest) == whole(2)
    if in_order or executor == "serial":
        assert rest == after_first, "ordered, the rest comes in order"
    # The next epoch after the resumed one is epoch 3, a full one.
    assert sorted(x for b in second for x in ids(b)) == whole(3)


def test_a_sampler_state_carries_its_order():
    torch = pytest.importorskip("torch")
    ds = Samples(100, "int")
    sampler = torch.utils.data.RandomSampler(
        ds, generator=torch.Generator().manual_seed(1))
    a = eachobs.DataLoader(ds, batch_size=10, sampler=sampler)
    it = iter(a)
    before = [x for _, b in zip(range(3), it) for x in b.tolist()]
    state = a.state_dict()
    b = eachobs.DataLoader(ds, batch_size=10, sampler=sampler)
    b.load_state_dict(state)
    rest = [x for batch in b for x in batch.tolist()]
    assert sorted(before + rest) == list(range(100))


def test_a_state_between_epochs_starts_the_next():
    loader = eachobs.DataLoader(Samples(30, "int"), batch_size=10,
                                shuffle=True, seed=1)
    e0 = [b.tolist() for b in loader]
    state = loader.state_dict()
    again = eachobs.DataLoader(Samples(30, "int"), batch_size=10,
                               shuffle=True, seed=1)
    again.load_state_dict(state)
    e1 = [b.tolist() for b in again]
    assert state["epoch"] == 1 and e1 != e0
    assert e1 == [b.tolist() for b in loader]


@pytest.mark.parametrize("change,words", [
    (dict(n=31), "dataset length"), (dict(batch_size=5), "batch_size"),
    (dict(shuffle=False), "shuffle"), (dict(seed=2), "seed"),
    (dict(shard_count=2), "shard_count"), (dict(drop_last=True), "drop_last"),
])
def test_a_state_of_another_order_is_refused(change, words):
    def make(n=30, batch_size=10, shuffle=True, seed=1, shard_count=1,
             drop_last=False):
        return eachobs.DataLoader(Samples(n, "int"), batch_size=batch_size,
                                  shuffle=shuffle, seed=seed,
                                  shard_count=shard_count, drop_last=drop_last)

    a = make()
    it = iter(a)
    next(it)
    state = a.state_dict()
    with pytest.raises(ValueError, match=words):
        make(**change).load_state_dict(state)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_collate_fn_loader_continues_the_epoch_too(executor):
    def make():
        return eachobs.DataLoader(Samples(100, "int"), batch_size=6,
                                  shuffle=True, seed=2, collate_fn=list,
                                  executor=executor, in_order=False)

    first = make()
    it = iter(first)
    before = [x for _, b in zip(range(5), it) for x in b]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    second = make()
    second.load_state_dict(state)
    rest = [x for b in second for x in b]
    assert sorted(before + rest) == list(range(100))
