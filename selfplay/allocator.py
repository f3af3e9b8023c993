"""Keep freed memory in the process: large tensors are allocated again without page faults.

glibc serves allocations above a threshold (at most 32 MB) with a fresh ``mmap`` and returns
them to the kernel when freed, so every large tensor a training step creates (a minibatch's
logits, its gradient, convolution workspaces) starts as untouched pages: the kernel zeroes and
maps each 4 KiB page on first write. On CPU that page-fault cost can exceed the arithmetic of
the step. Serving every block from the heap and never trimming it keeps those pages mapped, at
the cost of a process that holds on to its peak memory (PyTorch's CPU performance guide gets
the same effect by preloading jemalloc or tcmalloc).
"""

from __future__ import annotations

import ctypes
import functools
import sys

__all__ = ["keep_freed_memory"]

# mallopt parameters from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4

_TOP_PAD_BYTES = 256 << 20  # grow the heap in large steps: fewer brk calls
_TRIM_BYTES = 2**31 - 1  # the largest a C int holds: free heap top is (almost) never returned


@functools.cache
def keep_freed_memory() -> bool:
    """Switch glibc malloc to heap-only, never-trimmed allocation; True if it took effect.

    A no-op returning False where the C library is not glibc (macOS, musl, Windows).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, the C library's included
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # not glibc (musl has no mallopt parameters of these numbers)
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_MAX, 0))
    ok = bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES)) and ok
    ok = bool(mallopt(_M_TOP_PAD, _TOP_PAD_BYTES)) and ok
    return ok
