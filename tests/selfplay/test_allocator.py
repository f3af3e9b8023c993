"""The glibc allocator switch: it takes effect here, and big tensors then come from the heap."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest


def heap_ranges() -> list[tuple[int, int]]:
    """The ``[heap]`` (brk) mappings of this process."""
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith("[heap]"):
            start, stop = line.split()[0].split("-")
            ranges.append((int(start, 16), int(stop, 16)))
    return ranges


_CHECK = """
import torch
from selfplay.allocator import keep_freed_memory
from test_allocator import heap_ranges

assert keep_freed_memory() is True
assert keep_freed_memory() is True  # idempotent
tensor = torch.empty(20_000_000)  # 80 MB, above glibc's largest mmap threshold (32 MB)
address = tensor.data_ptr()
assert any(start <= address < stop for start, stop in heap_ranges()), \\
    "an 80 MB tensor was not served from the heap"
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_keep_freed_memory_takes_effect_on_glibc() -> None:
    """Without the switch an 80 MB block is a fresh mmap of its own, given back when freed;
    with it, the block comes from the heap, whose pages stay mapped for the next one. In a
    fresh process: in a long-lived test worker the heap may have no room left to grow (a
    mapping right after it), and glibc then maps the block elsewhere."""
    proc = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parent)
    assert proc.returncode == 0, proc.stderr
