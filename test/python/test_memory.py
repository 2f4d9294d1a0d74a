"""Batches in place: every leaf a contiguous tensor inside the loader's
buffers, written once; a batch's memory goes back to the loader exactly
when its last tensor or view is freed, on any thread; more than hold
alive is an error, not a wait or a copy; pin_memory's buffers."""
import gc
import threading

import numpy as np
import pytest

import eachobs
from conftest import Samples

torch = pytest.importorskip("torch")


def inside(loader_epoch, t):
    blocks = loader_epoch._c.blocks()
    p = t.data_ptr()
    return any(a <= p and p + t.numel() * t.element_size() <= a + n
               for a, n in blocks)


@pytest.mark.parametrize("executor", ["threaded", "background", "serial"])
@pytest.mark.parametrize("batch_size", [None, 1, 7, 128], ids=lambda b: f"batch{b}")
def test_every_leaf_is_a_contiguous_tensor_in_the_loaders_memory(executor,
                                                                 batch_size):
    ds = Samples(300, "tuple")
    loader = eachobs.DataLoader(ds, batch_size=batch_size, executor=executor)
    it = iter(loader)
    for x, y in it:
        assert isinstance(y, int if batch_size is None else torch.Tensor)
        for t in (x, y) if batch_size else (x,):
            assert isinstance(t, torch.Tensor) and t.is_contiguous()
            assert inside(it, t), "a leaf is not in the loader's buffers"


def test_a_batch_comes_back_when_its_last_view_is_freed():
    ds = Samples(100, "tuple")
    loader = eachobs.DataLoader(ds, batch_size=10, hold=1, num_workers=2)
    it = iter(loader)
    x, y = next(it)
    view = x[3:5, 1]         # a view keeps the whole batch
    del x, y
    gc.collect()
    with pytest.raises(eachobs.HoldError, match="hold=1"):
        next(it)
    kept = view.clone()
    del view
    x2, y2 = next(it)        # now it fits
    assert torch.equal(kept[:, 0], torch.tensor([3.0, 4.0]))
    del x2, y2


def test_tensors_kept_in_a_list_count_against_hold():
    loader = eachobs.DataLoader(Samples(100, "tuple"), batch_size=5, hold=3)
    it = iter(loader)
    kept = [next(it) for _ in range(3)]
    with pytest.raises(eachobs.HoldError) as e:
        next(it)
    assert "3 batches" in str(e.value) and "hold" in str(e.value)
    kept.pop(0)
    next(it)  # one freed: one more fits (and is freed at once)
    kept.clear()
    # The loader stays usable after the error.
    rest = [b[1].clone() for b in it]
    assert sum(len(r) for r in rest) == 100 - 20


def test_tensors_freed_on_another_thread_come_back():
    ds = Samples(400, "tuple")
    loader = eachobs.DataLoader(ds, batch_size=8, hold=4, num_workers=2)
    import queue
    q = queue.Queue(maxsize=2)
    seen = []

    def consume():
        while True:
            b = q.get()
            if b is None:
                return
            seen.extend(b[1].tolist())
            del b

    t = threading.Thread(target=consume)
    t.start()
    for batch in loader:
        q.put(batch)
        del batch
    q.put(None)
    t.join()
    assert sorted(seen) == list(range(400))


def test_a_batch_alive_after_close_keeps_its_values():
    loader = eachobs.DataLoader(Samples(50, "tuple"), batch_size=10)
    it = iter(loader)
    x, y = next(it)
    it.close()
    loader.close()
    del it, loader
    gc.collect()
    assert torch.equal(y, torch.arange(10))
    assert torch.equal(x[:, 0, 0], torch.arange(10, dtype=torch.float32))


def test_each_sample_is_copied_once_from_getitem_into_the_batch():
    # Samples that are views of one big tensor: the batch is a different
    # memory (one copy), equal in value, and nothing else is allocated per
    # batch: the same few buffers serve the whole epoch.
    base = torch.arange(64 * 16, dtype=torch.float32).reshape(64, 16)

    class Views:
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return base[i]

    loader = eachobs.DataLoader(Views(), batch_size=8, num_workers=2)
    it = iter(loader)
    ptrs = set()
    for b in it:
        assert torch.equal(b, base[b[:, 0].long() // 16])
        assert not (base.data_ptr() <= b.data_ptr() < base.data_ptr() + base.numel() * 4)
        ptrs.add(b.data_ptr())
    assert len(ptrs) <= 16, "a buffer per batch: the memory would grow with n"


def test_pin_memory_without_cuda_warns_and_loads(recwarn):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: this checks the CPU-only path")
    loader = eachobs.DataLoader(Samples(20, "tuple"), batch_size=5,
                                pin_memory=True)
    assert any("pin_memory" in str(w.message) for w in recwarn.list)
    assert sum(len(b[1]) for b in loader) == 20


def test_pin_memory_buffers_come_from_the_pinned_allocator(monkeypatch):
    from eachobs import _dataloader
    made = []

    def fake_block(size):
        t = torch.empty(size, dtype=torch.uint8)  # stands in for pinned memory
        made.append(t)
        return t.data_ptr(), t

    monkeypatch.setattr(_dataloader, "_cuda_available", lambda: True)
    monkeypatch.setattr(_dataloader, "_pinned_block", fake_block)
    loader = eachobs.DataLoader(Samples(40, "tuple"), batch_size=8,
                                pin_memory=True, num_workers=2)
    it = iter(loader)
    for x, y in it:
        p = x.data_ptr()
        assert any(t.data_ptr() <= p < t.data_ptr() + t.numel() for t in made)
    assert made, "the pinned allocator was not used"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pinned_buffers_are_page_locked():
    loader = eachobs.DataLoader(Samples(40, "tuple"), batch_size=8,
                                pin_memory=True)
    for x, y in loader:
        assert x.is_pinned()
        x.to("cuda", non_blocking=True)
