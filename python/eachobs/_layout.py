"""The layout the first sample fixes, and the batch built back from it.

A sample is what ``torch.utils.data.default_collate`` takes: tensors, numpy
arrays and scalars, Python ints, floats and bools, and tuples, lists and
dicts of them, nested. Each leaf becomes one field of the C library's
observations (``eachobs_options.fields``): in a batch, leaf k of every
sample lies in one contiguous array, which is yielded as a tensor in place.

This module describes the sample to the extension (the plan it walks to
write each later sample, ``python/src/sample.c``) and builds a batch of the
sample's structure from the per-field tensors the extension yields.
"""
from __future__ import annotations

import collections.abc
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

# Node kinds, as python/src/sample.h numbers them.
SEQ, DICT, TENSOR, ARRAY, INT, FLOAT, BOOL = range(7)

# DLPack type codes (dlpack.h): a bool leaf travels as uint8 and is
# viewed back as bool, since DLPack 0.6 has no bool code.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_COMPLEX = 0, 1, 2, 5
_DL_CODE = {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT, "c": _DL_COMPLEX,
            "b": _DL_UINT}
MAX_NDIM = 8


@dataclass
class Leaf:
    path: str             # 'sample[1]["label"]', for messages
    kind: int             # TENSOR, ARRAY, INT, FLOAT or BOOL
    dtype: np.dtype
    shape: Tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64)))

    @property
    def spec(self) -> Tuple[int, int, Tuple[int, ...]]:
        """(DLPack code, bits, shape) for eachobs_dlpack_fields."""
        return (_DL_CODE[self.dtype.kind], self.dtype.itemsize * 8, self.shape)


@dataclass
class Layout:
    nodes: list                  # the plan, for the extension
    leaves: List[Leaf]
    build: Callable[[list], Any]        # leaves' outputs -> a batch
    build_single: Callable[[list], Any]  # ... -> one sample (batch_size None)

    @property
    def fields(self) -> List[int]:
        return [leaf.nbytes for leaf in self.leaves]

    @property
    def specs(self) -> list:
        return [leaf.spec for leaf in self.leaves]


def _torch():
    try:
        import torch
    except ImportError:  # numpy output works without torch
        return None
    return torch


def _leaf_of(obj: Any, path: str) -> Optional[Leaf]:
    """The leaf obj is, or None when it is a container."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cpu":
            raise TypeError(f"{path} is a tensor on {obj.device}: a dataset "
                            "must return CPU tensors (move them to the "
                            "device after the loader)")
        try:
            dtype = obj.detach().numpy().dtype
        except TypeError as e:
            raise TypeError(f"{path} is a tensor of dtype {obj.dtype}, which "
                            "eachobs cannot lay out (no numpy dtype); convert "
                            "it in __getitem__ or pass a collate_fn") from e
        return _checked(Leaf(path, TENSOR, dtype, tuple(obj.shape)))
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind not in _DL_CODE:
            raise TypeError(f"{path} is a numpy array of dtype {obj.dtype}: "
                            "only bool, integer, float and complex arrays are "
                            "laid out in place; pass a collate_fn for others")
        return _checked(Leaf(path, ARRAY, obj.dtype, tuple(np.shape(obj))))
    if isinstance(obj, bool):
        return Leaf(path, BOOL, np.dtype(np.bool_), ())
    if isinstance(obj, int):
        return Leaf(path, INT, np.dtype(np.int64), ())
    if isinstance(obj, float):
        return Leaf(path, FLOAT, np.dtype(np.float64), ())
    if isinstance(obj, (tuple, list, dict)):
        return None
    raise TypeError(f"{path} is a {type(obj).__name__}: samples are tensors, "
                    "numpy arrays, numbers, and tuples, lists and dicts of "
                    "them; pass a collate_fn to batch other types")


def _checked(leaf: Leaf) -> Leaf:
    if len(leaf.shape) > MAX_NDIM:
        raise ValueError(f"{leaf.path} has {len(leaf.shape)} dimensions; "
                         f"at most {MAX_NDIM} are supported")
    return leaf


def _node(kind: int, n: int = 0, keys: Optional[tuple] = None, path: str = "",
          leaf: Optional[Leaf] = None, field: int = 0,
          torch_dtype: Any = None) -> tuple:
    if leaf is None:
        return (kind, n, keys, path, 0, "u", 1, (), None)
    return (kind, 0, None, path, field, leaf.dtype.kind, leaf.dtype.itemsize,
            leaf.shape, torch_dtype)


def describe(sample: Any, max_fields: int) -> Layout:
    """The layout of sample: the plan, its leaves and the builders."""
    nodes: list = []
    leaves: List[Leaf] = []

    def visit(obj: Any, path: str):
        leaf = _leaf_of(obj, path)
        if leaf is not None:
            k = len(leaves)
            leaves.append(leaf)
            nodes.append(_node(leaf.kind, path=path, leaf=leaf, field=k,
                               torch_dtype=obj.dtype if leaf.kind == TENSOR
                               else None))
            return ("leaf", k, leaf)
        if isinstance(obj, dict):
            keys = tuple(obj.keys())
            nodes.append(_node(DICT, len(keys), keys, path))
            return ("dict", type(obj), keys,
                    [visit(obj[key], f"{path}[{key!r}]") for key in keys])
        nodes.append(_node(SEQ, len(obj), None, path))
        return ("seq", type(obj),
                [visit(item, f"{path}[{i}]") for i, item in enumerate(obj)])

    tree = visit(sample, "sample")
    if len(leaves) > max_fields:
        raise ValueError(f"a sample has {len(leaves)} leaves; eachobs lays out "
                         f"at most {max_fields} (pass a collate_fn, or group "
                         "leaves into arrays)")
    return Layout(nodes, leaves, _builder(tree, batched=True),
                  _builder(tree, batched=False))


def _is_namedtuple(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


def _builder(tree, batched: bool) -> Callable[[list], Any]:
    """A function of the leaves' outputs that builds the sample's
    structure, as default_collate would (batched: a tuple becomes a list,
    as PyTorch's does) or as the sample was (single samples)."""
    kind = tree[0]
    if kind == "leaf":
        k = tree[1]
        return lambda out: out[k]
    if kind == "dict":
        _, t, keys, children = tree
        parts = [(key, _builder(c, batched)) for key, c in zip(keys, children)]
        if t is dict:
            return lambda out: {key: f(out) for key, f in parts}
        return lambda out: t({key: f(out) for key, f in parts})
    _, t, children = tree
    fs = [_builder(c, batched) for c in children]
    if _is_namedtuple(t):
        return lambda out: t(*[f(out) for f in fs])
    if t is list or (batched and t is tuple):
        return lambda out: [f(out) for f in fs]
    if t is tuple:
        return lambda out: tuple(f(out) for f in fs)
    return lambda out: t([f(out) for f in fs])


def native_layout(obs_size: Optional[int], fields: Any) -> Layout:
    """The layout of a NativeDataset's observations: one uint8 array of
    obs_size bytes, or the fields given as {name: (dtype, shape)} (a dict
    of tensors) or [(dtype, shape), ...] (a list of them)."""
    if fields is None:
        leaf = Leaf("obs", ARRAY, np.dtype(np.uint8), (int(obs_size),))
        return Layout([], [leaf], lambda out: out[0], lambda out: out[0])
    if isinstance(fields, collections.abc.Mapping):
        names = list(fields.keys())
        specs = [fields[n] for n in names]
    else:
        names = None
        specs = list(fields)
    leaves = []
    for i, spec in enumerate(specs):
        where = f"fields[{names[i]!r}]" if names else f"fields[{i}]"
        if not (isinstance(spec, Sequence) and len(spec) == 2):
            raise TypeError(f"{where} is {spec!r}: expected (dtype, shape), "
                            "e.g. ('float32', (784,))")
        dtype = np.dtype(spec[0])
        shape = (spec[1],) if isinstance(spec[1], int) else tuple(spec[1])
        if dtype.kind not in _DL_CODE or any(
                not isinstance(s, int) or s < 0 for s in shape):
            raise ValueError(f"{where} = {spec!r}: a bool, integer, float or "
                             "complex dtype and sizes >= 0 are needed")
        leaves.append(_checked(Leaf(where, ARRAY, dtype, shape)))
    if names is not None:
        build = lambda out: dict(zip(names, out))  # noqa: E731
    else:
        build = lambda out: list(out)  # noqa: E731
    return Layout([], leaves, build, build)
