"""DataLoader(autotune=True): the same batches as without it, over every
executor, ordering, batch size and persistent_workers; more threads for a
__getitem__ that waits; what it chose, in stats(). Counted, never timed."""

import os

import pytest

import eachobs
from conftest import Samples

from test_loader import run_epoch


@pytest.mark.parametrize("persistent", [False, True],
                         ids=["fresh", "persistent"])
@pytest.mark.parametrize("batch", [None, 1, 7, 64], ids=lambda b: f"b{b}")
@pytest.mark.parametrize("in_order", [True, False],
                         ids=["ordered", "unordered"])
@pytest.mark.parametrize("executor", ["threaded", "background", "serial"])
def test_autotune_yields_every_sample_once(executor, in_order, batch,
                                           persistent):
    data = Samples(300, "int")
    loader = eachobs.DataLoader(data, batch_size=batch, num_workers=8,
                                executor=executor, in_order=in_order,
                                persistent_workers=persistent,
                                autotune=True, output="numpy")
    for epoch in range(2):
        seen = run_epoch(loader, "int")
        if in_order or executor == "serial":
            assert seen == list(range(300))
        assert sorted(seen) == list(range(300))
    st = loader.stats()
    assert st["nworkers"] <= 8 and st["max_loading"] <= 8
    if executor == "serial":
        assert st["tune_reason"] == "not autotuned"
    loader.close()


def test_autotune_matches_the_shuffled_order_without_it():
    data = Samples(500, "int")
    runs = []
    for autotune in (False, True):
        loader = eachobs.DataLoader(data, batch_size=16, shuffle=True,
                                    seed=11, num_workers=4,
                                    autotune=autotune, output="numpy")
        runs.append(run_epoch(loader, "int"))
        loader.close()
    assert runs[0] == runs[1]


def test_a_waiting_getitem_gets_more_threads_than_the_cpus():
    # 2 ms a sample, the loop takes them as fast as they come: threads
    # that wait pay, up to the bound.
    data = Samples(3000, "int", slow_s=0.002)
    loader = eachobs.DataLoader(data, batch_size=None, num_workers=32,
                                executor="background", autotune=True,
                                output="numpy")
    most = 0
    for i, _ in enumerate(loader):
        if i % 100 == 0:
            most = max(most, loader.stats()["nloading"])
    st = loader.stats()
    loader.close()
    assert most > len(os.sched_getaffinity(0)), st
    assert st["max_loading"] <= 32
    assert st["tune_reason"], st
    assert 1 <= st["buffer_depth"] <= st["buffersize"], st


def test_stats_say_what_it_chose():
    loader = eachobs.DataLoader(Samples(50, "int"), num_workers=3,
                                output="numpy")
    run_epoch(loader, "int")
    st = loader.stats()
    assert st["nloading"] == st["nworkers"]
    assert st["tune_reason"] == "not autotuned"
    assert st["buffer_depth"] > 0
    # Without autotune, all of the buffer is in use.
    assert st["buffer_depth"] == st["buffersize"]
    loader.close()
