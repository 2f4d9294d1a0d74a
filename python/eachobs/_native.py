"""A dataset whose getobs is a C function: loaded without the GIL."""
from __future__ import annotations

import ctypes
from typing import Any, Optional

from . import _eachobs
from ._layout import Layout, native_layout

#: The address of the C library's ``void *eachobs_field(size_t k)``: inside
#: a native getobs, where field k of the observation being loaded goes
#: (field 0 is the ``obs`` argument).
FIELD_ADDRESS: int = _eachobs.FIELD_ADDRESS

_field_functions: dict = {}


def field_pointer(ctype: Any = ctypes.c_uint8):
    """``eachobs_field`` as a ctypes function of k returning a pointer to
    ctype, which a numba ``cfunc`` can call and pass to ``numba.carray``::

        label = eachobs.field_pointer(ctypes.c_int64)

        @numba.cfunc("int32(voidptr, uint64, voidptr)")
        def getobs(ctx, idx, obs):
            numba.carray(label(1), (1,), numpy.int64)[0] = idx
            ...
    """
    f = _field_functions.get(ctype)
    if f is None:
        f = ctypes.CFUNCTYPE(ctypes.POINTER(ctype), ctypes.c_size_t)(FIELD_ADDRESS)
        _field_functions[ctype] = f
    return f


def _address(getobs: Any) -> int:
    """The address of getobs: an int, a ctypes function or a numba cfunc."""
    if hasattr(getobs, "address") and isinstance(getobs.address, int):
        return getobs.address  # numba.cfunc
    if isinstance(getobs, ctypes._CFuncPtr):
        return ctypes.cast(getobs, ctypes.c_void_p).value or 0
    if isinstance(getobs, int) and not isinstance(getobs, bool):
        return getobs
    raise TypeError(f"getobs is a {type(getobs).__name__}: expected the "
                    "address of a C function int getobs(void *ctx, uint64_t "
                    "idx, void *obs), as an int, a ctypes function or a "
                    "numba cfunc")


class NativeDataset:
    """A dataset loaded by a C function, on the loader threads, without the
    GIL.

    getobs is the address of ``int getobs(void *ctx, uint64_t idx, void
    *obs)`` (a numba ``@cfunc(...).address``, a ctypes function from a
    shared library, or an int): it writes observation idx into obs and
    returns 0, or a negative errno value (``next()`` then raises
    ``OSError``). It runs on several threads at once, for different
    indices.

    The observation is obs_size bytes (a batch is a uint8 tensor
    ``[batch, obs_size]``), or the given fields: ``{"x": ("float32",
    (784,)), "y": ("int64", ())}`` gives batches ``{"x": [B, 784] float32,
    "y": [B] int64}`` (a list of ``(dtype, shape)`` gives a list). obs is
    field 0; field k goes where ``eachobs_field(k)`` says
    (:data:`FIELD_ADDRESS`, or :data:`field_pointer` from numba).
    ctx (an int) is passed to getobs unchanged.
    """

    def __init__(self, getobs: Any, numobs: int, obs_size: Optional[int] = None,
                 *, fields: Any = None, ctx: int = 0):
        address = _address(getobs)
        if address <= 0:
            raise ValueError(f"getobs: address {address} is not a function")
        if isinstance(numobs, bool) or not isinstance(numobs, int) or numobs < 0:
            raise ValueError(f"numobs is {numobs!r}: expected an int >= 0")
        if not isinstance(ctx, int) or ctx < 0:
            raise ValueError(f"ctx is {ctx!r}: expected an address (int >= 0)")
        if fields is None:
            if (isinstance(obs_size, bool) or not isinstance(obs_size, int)
                    or obs_size <= 0):
                raise ValueError(f"obs_size is {obs_size!r}: give an int > 0, "
                                 "or fields")
        elif obs_size is not None:
            raise ValueError("give obs_size or fields, not both")
        self.getobs_address = address
        self.numobs = numobs
        self.ctx = ctx
        self._getobs = getobs  # keeps a ctypes or numba function alive
        self.layout: Layout = native_layout(obs_size, fields)
        if len(self.layout.leaves) > _eachobs.MAX_FIELDS:
            raise ValueError(f"fields has {len(self.layout.leaves)} entries; "
                             f"at most {_eachobs.MAX_FIELDS} are supported")

    def __len__(self) -> int:
        return self.numobs

    def __getitem__(self, idx: int):
        raise TypeError("a NativeDataset is loaded by its C getobs: iterate "
                        "it with eachobs.DataLoader")
