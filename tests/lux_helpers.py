"""Lux tests against the official engine: skipped where its C extension ``vec_noise`` did not
build, a failure instead when CI requires it (``SELFPLAY_REQUIRE_LUX_ENGINE=1``, set by
``.ci/run``), so CI cannot pass without the parity checks."""

from __future__ import annotations

import os

import pytest

from games.lux import engine

REQUIRE = "SELFPLAY_REQUIRE_LUX_ENGINE"


def need_official_engine() -> None:
    """Return if the official engine imports; else skip (or fail when :data:`REQUIRE` is 1)."""
    if engine.vec_noise_available():
        return
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{engine.VEC_NOISE_HINT}; {REQUIRE}=1 requires it")
    pytest.skip(engine.VEC_NOISE_HINT)
