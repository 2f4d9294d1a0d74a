"""eachobs: a thread-based DataLoader for PyTorch over the eachobs C library.

    import eachobs
    loader = eachobs.DataLoader(dataset, batch_size=128, shuffle=True)
    for x, y in loader:        # tensors over the loader's memory
        ...

The arguments are torch.utils.data.DataLoader's; num_workers counts
threads. See docs/python.md.
"""
from ._dataloader import DataLoader, HoldError, LoaderError
from ._eachobs import C_VERSION
from ._native import FIELD_ADDRESS, NativeDataset, field_pointer

__version__ = "0.5.0"
__all__ = ["DataLoader", "NativeDataset", "HoldError", "LoaderError",
           "FIELD_ADDRESS", "field_pointer", "C_VERSION"]
