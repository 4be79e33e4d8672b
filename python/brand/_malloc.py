"""Malloc tuning, so that a process reading batch after batch reuses their
memory rather than fault it in anew for each (glibc only; standard library).

Its own module because it is a choice about the whole process, made once,
that a :class:`brand.Client` and a :class:`brand.torch.BrandDataset` (in the
trainer's process, which unpickles every batch its workers send) make only
when their options ask (``Options(tune_malloc=True)``): it changes malloc for
everything else the process runs too, so it is the program's to opt into.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["tune_malloc"]

# glibc's malloc returns the top of its heap to the kernel once more than
# M_TRIM_THRESHOLD bytes are free there, and serves allocations above
# M_MMAP_THRESHOLD with fresh mappings. A client allocates and frees a
# batch's worth of sample bytes (and a body) for every batch, so with the
# defaults every batch faults its memory in anew: measured, 5 ms to decode a
# 1.1 MB batch of 64 samples instead of 0.1 ms, and recv into fresh pages.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD = 256 << 20  # freed heap kept for reuse
_MMAP_THRESHOLD = 32 << 20  # glibc's maximum: bodies below it come from the heap
_malloc_tuned = False


def tune_malloc() -> bool:
    """Keep freed memory for reuse instead of faulting it in for every batch.

    On glibc, raises malloc's trim threshold (to 256 MiB) and mmap threshold
    (to 32 MiB, its maximum) for this process, so that a batch's sample bytes
    and body reuse the memory the previous batches freed; the process keeps
    up to 256 MiB of freed heap rather than returning it to the kernel.
    :class:`brand.Client` and :class:`brand.torch.BrandDataset` call it
    when their :class:`brand.Options` say ``tune_malloc=True`` (off by
    default: it is a choice about the whole process); it does nothing if the environment sets any ``MALLOC_*_`` tunable (the user
    chose) or the C library is not glibc. Returns whether the thresholds
    were set.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ) or "GLIBC_TUNABLES" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _malloc_tuned = (bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
                     and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)))
    return _malloc_tuned
