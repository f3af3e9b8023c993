"""The glibc allocator switch: it takes effect here, and big tensors then reuse memory."""

from __future__ import annotations

import platform

import pytest
import torch

from selfplay.allocator import keep_freed_memory


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_keep_freed_memory_takes_effect_on_glibc() -> None:
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent
    # a freed 80 MB block is handed out again: the second tensor lands at the same address
    first = torch.empty(20_000_000)
    address = first.data_ptr()
    del first
    second = torch.empty(20_000_000)
    assert second.data_ptr() == address
