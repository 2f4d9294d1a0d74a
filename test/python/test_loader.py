"""What a DataLoader yields: every sample of an epoch exactly once, in
order when asked, batched as default_collate batches, over every
executor, ordering, batch size, hold and persistent_workers; epochs,
shuffles, samplers, shards, collate_fn, worker_init_fn, numpy output."""
import itertools

import numpy as np
import pytest

import eachobs
from conftest import Samples, indices_of

EXECUTORS = ["threaded", "background", "serial"]
BATCHES = [None, 1, 7, 128]


def run_epoch(loader, kind, keep=0):
    """Indices in yield order; keeps the last `keep` batches alive."""
    seen, alive = [], []
    for batch in loader:
        seen += indices_of(batch, kind, loader.batch_size is None)
        if keep:
            alive.append(batch)
            del alive[:-keep]
        del batch
    return seen


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "persistent"])
@pytest.mark.parametrize("hold", [1, 3], ids=lambda h: f"hold{h}")
@pytest.mark.parametrize("batch_size", BATCHES, ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("in_order", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_every_sample_once_per_epoch(executor, in_order, batch_size, hold,
                                     persistent):
    ds = Samples(300, "tuple")
    loader = eachobs.DataLoader(ds, batch_size=batch_size, executor=executor,
                                in_order=in_order, hold=hold, num_workers=3,
                                persistent_workers=persistent)
    for epoch in range(2):
        # hold - 1 batches kept: the next one still fits.
        seen = run_epoch(loader, "tuple", keep=hold - 1)
        assert sorted(seen) == list(range(300)), f"epoch {epoch}"
        if in_order or executor == "serial":
            assert seen == list(range(300))
        assert loader.stats()["yielded"] == 300
    loader.close()


@pytest.mark.parametrize("batch_size", BATCHES, ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("kind", ["tuple", "tensor", "int", "dict",
                                  "namedtuple"])
def test_batches_have_the_samples_structure(kind, executor, batch_size):
    ds = Samples(50, kind)
    loader = eachobs.DataLoader(ds, batch_size=batch_size, executor=executor,
                                num_workers=2)
    assert run_epoch(loader, kind) == list(range(50))


@pytest.mark.parametrize("batch_size", [None, 7], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("in_order", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_slow_getitem_is_loaded_once_too(executor, in_order, batch_size):
    ds = Samples(40, "dict", slow_s=0.002)
    loader = eachobs.DataLoader(ds, batch_size=batch_size, executor=executor,
                                in_order=in_order, num_workers=4)
    seen = run_epoch(loader, "dict")
    assert sorted(seen) == list(range(40))


def test_collated_like_torch_default_collate():
    torch = pytest.importorskip("torch")
    for kind in ["tuple", "tensor", "int", "dict", "namedtuple"]:
        ds = Samples(20, kind)
        ours = list(eachobs.DataLoader(ds, batch_size=6, num_workers=2,
                                       hold=10))
        theirs = list(torch.utils.data.DataLoader(ds, batch_size=6))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            check_same(a, b, kind)


def check_same(a, b, where):
    torch = pytest.importorskip("torch")
    if isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), where
        assert a.is_contiguous()
    elif isinstance(b, dict):
        assert type(a) is type(b) and a.keys() == b.keys(), where
        for k in b:
            check_same(a[k], b[k], f"{where}[{k!r}]")
    else:
        assert type(a) is type(b) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            check_same(x, y, f"{where}[{i}]")


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", BATCHES, ids=lambda b: f"batch{b}")
def test_len_is_torchs_and_what_an_epoch_yields(batch_size, drop_last):
    torch = pytest.importorskip("torch")
    ds = Samples(50, "int")
    if batch_size is None and drop_last:
        for loader in (eachobs.DataLoader, torch.utils.data.DataLoader):
            with pytest.raises(ValueError, match="drop_last"):
                loader(ds, batch_size=None, drop_last=True)
        return
    ours = eachobs.DataLoader(ds, batch_size=batch_size, drop_last=drop_last,
                              num_workers=2)
    theirs = torch.utils.data.DataLoader(ds, batch_size=batch_size,
                                         drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert sum(1 for _ in ours) == len(ours)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_shuffle_is_a_permutation_fixed_by_seed_and_epoch(executor):
    ds = Samples(200, "int")

    def order(loader):
        return [int(x) for b in loader for x in np.asarray(b).reshape(-1)]

    a = eachobs.DataLoader(ds, batch_size=16, shuffle=True, seed=5,
                           executor=executor, num_workers=2)
    b = eachobs.DataLoader(ds, batch_size=16, shuffle=True, seed=5,
                           executor="serial")
    e0, e1 = order(a), order(a)
    assert sorted(e0) == sorted(e1) == list(range(200))
    assert e0 != e1, "the second epoch reshuffles"
    assert order(b) == e0 and order(b) == e1, "same seed, same epochs"
    a.set_epoch(0)
    assert order(a) == e0
    c = eachobs.DataLoader(ds, batch_size=16, shuffle=True, seed=6)
    assert order(c) != e0


def test_a_generator_seeds_the_shuffle():
    torch = pytest.importorskip("torch")
    ds = Samples(100, "int")

    def first(seed):
        g = torch.Generator()
        g.manual_seed(seed)
        loader = eachobs.DataLoader(ds, batch_size=10, shuffle=True,
                                    generator=g)
        return [x.tolist() for x in loader]

    assert first(1) == first(1)
    assert first(1) != first(2)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_sampler_gives_the_order(executor):
    torch = pytest.importorskip("torch")
    ds = Samples(100, "int")
    subset = [5, 3, 99, 3, 0, 42]
    loader = eachobs.DataLoader(ds, batch_size=4, sampler=subset,
                                executor=executor, in_order=True)
    got = [x for b in loader for x in b.tolist()]
    assert got == subset
    for sampler in [torch.utils.data.SequentialSampler(ds),
                    torch.utils.data.SubsetRandomSampler(
                        range(0, 100, 3),
                        generator=torch.Generator().manual_seed(0))]:
        loader = eachobs.DataLoader(ds, batch_size=8, sampler=sampler,
                                    executor=executor)
        assert len(loader) == -(-len(sampler) // 8)
        got = sorted(x for b in loader for x in b.tolist())
        assert got == sorted(int(i) for i in range(100)
                             if sampler.__class__.__name__.startswith("Seq")
                             or i % 3 == 0)


def test_distributed_sampler_and_shards_split_alike():
    torch = pytest.importorskip("torch")
    ds = Samples(103, "int")
    for drop_last in [False, True]:
        for rank in range(4):
            ds_sampler = torch.utils.data.DistributedSampler(
                ds, num_replicas=4, rank=rank, shuffle=False,
                drop_last=drop_last)
            want = list(ds_sampler)
            via_sampler = eachobs.DataLoader(ds, batch_size=5,
                                             sampler=ds_sampler)
            via_shards = eachobs.DataLoader(ds, batch_size=5, shard_index=rank,
                                            shard_count=4, drop_last=drop_last)
            assert [x for b in via_sampler for x in b.tolist()] == want
            got = [x for b in via_shards for x in b.tolist()]
            if drop_last:  # the last short batch is dropped too
                want = want[:len(want) // 5 * 5]
            assert got == want, (rank, drop_last)
            assert len(via_shards) == -(-len(ds_sampler) // 5) - (
                1 if drop_last and len(ds_sampler) % 5 else 0)


def test_collate_fn_gets_the_samples_and_its_result_is_yielded():
    ds = Samples(30, "int")
    words = eachobs.DataLoader(ds, batch_size=7, num_workers=2,
                               collate_fn=lambda s: ("batch", [str(x) for x in s]))
    got = list(words)
    assert [g[0] for g in got] == ["batch"] * 5
    assert [x for g in got for x in g[1]] == [str(i) for i in range(30)]
    # batch_size=None: collate_fn gets each sample, as PyTorch's does.
    single = eachobs.DataLoader(ds, batch_size=None, collate_fn=lambda s: -s)
    assert list(single) == [-i for i in range(30)]


@pytest.mark.parametrize("in_order", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", ["threaded", "background"])
def test_collate_fn_runs_on_the_loader_threads(executor, in_order):
    import threading
    main = threading.get_ident()
    where = []

    def collate(samples):
        where.append(threading.get_ident())
        return samples

    ds = Samples(200, "int", slow_s=0.0005)
    loader = eachobs.DataLoader(ds, batch_size=8, num_workers=2,
                                executor=executor, in_order=in_order,
                                collate_fn=collate)
    got = [x for b in loader for x in b]
    assert sorted(got) == list(range(200))
    if in_order:
        assert got == list(range(200))
    if executor == "background":
        assert main not in where, "collate_fn ran on the training thread"
    assert len(set(where) - {main}) >= 1


@pytest.mark.parametrize("options", [
    dict(shuffle=True, seed=4), dict(shard_index=2, shard_count=3),
    dict(shuffle=True, seed=1, shard_index=0, shard_count=2, drop_last=True),
    dict(sampler=[9, 3, 3, 70, 5, 1, 2, 8, 0]),
], ids=["shuffle", "shard", "shuffle-shard-drop", "sampler"])
def test_collate_fn_batches_follow_the_order_options(options):
    torch = pytest.importorskip("torch")
    ds = Samples(103, "int")
    ours = eachobs.DataLoader(ds, batch_size=5, collate_fn=list, **options)
    theirs = eachobs.DataLoader(ds, batch_size=5, **options)
    a = [x for b in ours for x in b]
    assert len(ours) == len(theirs) == sum(1 for _ in ours)

    def every_shard(collate):
        count = options.get("shard_count", 1)
        out = []
        for s in range(count):
            kw = dict(options, shard_index=s) if count > 1 else options
            loader = eachobs.DataLoader(ds, batch_size=5, collate_fn=collate,
                                        **kw)
            out += [x for t in loader for x in (t if collate else t.tolist())]
        return sorted(out)

    # The shards together: the same samples as without a collate_fn (the
    # shuffles differ, the split does not; drop_last drops as many).
    ours_all, theirs_all = every_shard(list), every_shard(None)
    if options.get("drop_last"):
        assert len(ours_all) == len(theirs_all)
        assert len(set(ours_all)) == len(ours_all)
    else:
        assert ours_all == theirs_all
    if "sampler" in options:
        assert a == options["sampler"]
    if options.get("shuffle"):
        again = eachobs.DataLoader(ds, batch_size=5, collate_fn=list,
                                   **options)
        assert [x for t in again for x in t] == a, "fixed by seed and epoch"
        assert [x for t in again for x in t] != a, "a new epoch reshuffles"


def test_collate_fn_failures_name_the_sample_or_are_skipped():
    class Bad(Samples):
        def __getitem__(self, i):
            if i in (7, 8, 30):
                raise KeyError(f"no sample {i}")
            return super().__getitem__(i)

    with pytest.raises(KeyError) as e:
        list(eachobs.DataLoader(Bad(40, "int"), batch_size=4, collate_fn=list))
    assert e.value.__notes__ == ["raised by dataset[7] on a loader thread"]
    loader = eachobs.DataLoader(Bad(40, "int"), batch_size=4, collate_fn=list,
                                on_error="skip")
    it = iter(loader)
    got = [x for b in it for x in b]
    assert sorted(got) == [i for i in range(40) if i not in (7, 8, 30)]
    assert loader.stats()["failures"] == 3


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "persistent"])
def test_worker_init_fn_runs_once_on_each_loader_thread(persistent):
    import threading
    calls = []
    lock = threading.Lock()

    def init(worker_id):
        with lock:
            calls.append((worker_id, threading.get_ident()))

    ds = Samples(200, "int", slow_s=0.001)
    loader = eachobs.DataLoader(ds, batch_size=4, num_workers=3,
                                executor="background", worker_init_fn=init,
                                persistent_workers=persistent)
    per_epoch = []
    for epoch in range(2):
        list(b.clone() for b in loader)
        per_epoch.append(list(calls))
        calls.clear()
    for epoch, got in enumerate(per_epoch):
        threads = [t for _, t in got]
        ids = sorted(i for i, _ in got)
        assert len(set(threads)) == len(threads), "once per thread"
        assert ids == list(range(len(ids))), "ids 0, 1, ..."
        if persistent and epoch:
            assert not got, "persistent threads were initialized already"
        else:
            assert 1 <= len(got) <= 3


@pytest.mark.parametrize("batch_size", [None, 5], ids=lambda b: f"batch{b}")
def test_numpy_output_is_arrays_over_the_same_memory(batch_size):
    ds = Samples(20, "dict")
    loader = eachobs.DataLoader(ds, batch_size=batch_size, output="numpy",
                                num_workers=2)
    got = []
    for b in loader:
        assert isinstance(b["x"], np.ndarray)
        if batch_size:
            assert b["meta"]["even"].dtype == np.bool_
        else:
            assert isinstance(b["meta"]["w"], float)
            assert isinstance(b["meta"]["even"], bool)
        got += indices_of(b, "dict", batch_size is None)
    assert got == list(range(20))


def test_empty_datasets_yield_nothing():
    for n in [0]:
        loader = eachobs.DataLoader(Samples(n, "int"), batch_size=4)
        assert len(loader) == 0 and list(loader) == []
    loader = eachobs.DataLoader(Samples(5, "int"), batch_size=4, sampler=[])
    assert list(loader) == []


def test_strided_and_grad_tensors_are_copied_by_value():
    torch = pytest.importorskip("torch")
    base = torch.arange(40 * 6, dtype=torch.float32).reshape(6, 40)

    class Odd:
        def __len__(self):
            return 40

        def __getitem__(self, i):
            column = base[:, i]                    # strided
            grad = base[:, i].clone().requires_grad_()
            return column, grad, base[::2, i].to(torch.float64)

    for batch_size in [None, 8]:
        loader = eachobs.DataLoader(Odd(), batch_size=batch_size, hold=50)
        got = list(loader)
        cols = (torch.stack([g[0] for g in got]) if batch_size is None
                else torch.cat([g[0] for g in got]))
        assert torch.equal(cols, base.T)
        for g in got:
            assert not g[1].requires_grad
            assert torch.equal(g[0], g[1]) and torch.equal(
                g[2], g[0][..., ::2].to(torch.float64))
