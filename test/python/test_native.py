"""NativeDataset: a C getobs (a ctypes function, a numba cfunc) loads
observations of one field or several, every one once, in place; its
error codes come out as OSError; bad arguments are named."""
import ctypes

import numpy as np
import pytest

import eachobs
from conftest import settle, task_count

EXECUTORS = ["threaded", "background", "serial"]
GETOBS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                          ctypes.c_void_p)
int64_field = eachobs.field_pointer(ctypes.c_int64)


@GETOBS
def ctypes_getobs(ctx, idx, obs):
    # A ctypes callback takes the GIL itself; a real native getobs never
    # does. Enough to check the layout and the codes.
    if idx == 77 and ctx == 1:
        return -5  # -EIO
    ctypes.cast(obs, ctypes.POINTER(ctypes.c_float))[0] = float(idx)
    int64_field(1)[0] = idx * 2
    return 0


FIELDS = {"x": ("float32", ()), "y": ("int64", ())}


@pytest.mark.parametrize("batch_size", [None, 1, 7, 128], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_ctypes_getobs_fills_every_field(executor, batch_size):
    ds = eachobs.NativeDataset(ctypes_getobs, 300, fields=FIELDS)
    loader = eachobs.DataLoader(ds, batch_size=batch_size, executor=executor,
                                output="numpy", num_workers=3)
    seen = []
    for b in loader:
        x, y = np.asarray(b["x"]).reshape(-1), np.asarray(b["y"]).reshape(-1)
        assert np.array_equal(y, x.astype(np.int64) * 2)
        seen += x.astype(int).tolist()
    assert sorted(seen) == list(range(300))


def test_a_getobs_error_code_is_an_os_error():
    ds = eachobs.NativeDataset(ctypes_getobs, 100, fields=FIELDS, ctx=1)
    with pytest.raises(OSError, match="getobs.77. returned -5"):
        for _ in eachobs.DataLoader(ds, batch_size=4, output="numpy"):
            pass
    skip = eachobs.DataLoader(ds, batch_size=4, output="numpy",
                              on_error="skip")
    assert sum(len(b["x"]) for b in skip) == 99
    assert skip.stats()["failures"] == 1


def test_obs_size_alone_gives_bytes():
    @GETOBS
    def fill(ctx, idx, obs):
        ctypes.memset(obs, idx % 256, 16)
        return 0

    ds = eachobs.NativeDataset(fill, 40, obs_size=16)
    for b in eachobs.DataLoader(ds, batch_size=8, output="numpy"):
        assert b.dtype == np.uint8 and b.shape == (8, 16)
        assert (b == b[:, :1]).all()


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(getobs=0, numobs=10, obs_size=4), ValueError, ["getobs", "0"]),
    (dict(getobs="f", numobs=10, obs_size=4), TypeError, ["getobs", "str"]),
    (dict(getobs=ctypes_getobs, numobs=10, obs_size=0), ValueError,
     ["obs_size", "0"]),
    (dict(getobs=ctypes_getobs, numobs=-1, obs_size=4), ValueError,
     ["numobs", "-1"]),
    (dict(getobs=ctypes_getobs, numobs=10), ValueError, ["obs_size"]),
    (dict(getobs=ctypes_getobs, numobs=10, fields={"x": "float32"}),
     TypeError, ["fields['x']", "(dtype, shape)"]),
    (dict(getobs=ctypes_getobs, numobs=10, fields=[("U4", ())]), ValueError,
     ["fields[0]"]),
], ids=["address0", "notafunction", "size0", "numobs", "nosize", "spec",
        "dtype"])
def test_bad_native_datasets_are_named(kwargs, error, words):
    before = task_count()
    with pytest.raises(error) as e:
        eachobs.NativeDataset(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert settle(before) == before


def test_a_numba_getobs_runs_without_the_gil():
    numba = pytest.importorskip("numba")
    torch = pytest.importorskip("torch")
    from numba import carray, cfunc, types

    n = 2000
    pixels = np.random.default_rng(0).random((n, 8), dtype=np.float32)

    @cfunc(types.int32(types.voidptr, types.uint64, types.voidptr),
           nopython=True)
    def getobs(ctx, idx, obs):
        src = carray(ctx, (n, 8), np.float32)
        dst = carray(obs, (8,), np.float32)
        for i in range(8):
            dst[i] = src[idx, i]
        carray(int64_field(1), (1,), np.int64)[0] = idx
        return 0

    ds = eachobs.NativeDataset(getobs, n, fields={"x": ("float32", (8,)),
                                                  "y": ("int64", ())},
                               ctx=pixels.ctypes.data)
    for executor in EXECUTORS:
        loader = eachobs.DataLoader(ds, batch_size=64, shuffle=True, seed=1,
                                    executor=executor)
        seen = []
        for b in loader:
            assert torch.equal(b["x"], torch.from_numpy(pixels)[b["y"]])
            seen += b["y"].tolist()
        assert sorted(seen) == list(range(n)), executor
