"""The adapter's games against the official engine (luxai_s2): the same orders in both engines,
their states, rewards and dones equal step for step, and the seats' observations and masks
computed from either state equal (the long run: ``tools/bench_lux_parity.py``)."""

from __future__ import annotations

from lux_helpers import need_official_engine

from games.lux.parity import play_parity


def test_masked_random_play_matches_the_official_engine() -> None:
    need_official_engine()
    report = play_parity([3], 40, rng_seed=1, encode_every=20)
    assert report.mismatch_count == 0, report.mismatches[:5]
    assert report.steps == 40 and report.encoded >= 2
    assert report.units_seen >= 4  # robots were built and ordered about
