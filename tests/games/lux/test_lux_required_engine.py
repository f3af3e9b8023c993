"""The switch that turns the official-engine tests' skip into a failure in CI."""

from __future__ import annotations

from pathlib import Path

import pytest
from lux_helpers import REQUIRE, need_official_engine

from games.lux import engine


def test_a_missing_engine_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "vec_noise_available", lambda: False)
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE}=1 requires it"):
        need_official_engine()
    monkeypatch.delenv(REQUIRE)
    with pytest.raises(pytest.skip.Exception, match="vec_noise"):
        need_official_engine()
    ci = (Path(__file__).resolve().parents[3] / ".ci" / "run").read_text()
    assert f"{REQUIRE}=1" in ci  # CI compares against the official engine
