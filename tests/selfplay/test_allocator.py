"""The glibc allocator switch: it takes effect here, and big tensors then come from the heap."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from selfplay.allocator import keep_freed_memory


def heap_ranges() -> list[tuple[int, int]]:
    """The ``[heap]`` (brk) mappings of this process."""
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith("[heap]"):
            start, stop = line.split()[0].split("-")
            ranges.append((int(start, 16), int(stop, 16)))
    return ranges


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_keep_freed_memory_takes_effect_on_glibc() -> None:
    """Without the switch an 80 MB block is a fresh mmap of its own, given back when freed;
    with it, the block comes from the heap, whose pages stay mapped for the next one."""
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent
    tensor = torch.empty(20_000_000)  # 80 MB, above glibc's largest mmap threshold (32 MB)
    address = tensor.data_ptr()
    assert any(start <= address < stop for start, stop in heap_ranges()), \
        "an 80 MB tensor was not served from the heap"
