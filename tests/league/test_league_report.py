"""The HTML report: one self-contained file that headless Chromium renders."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ttt_players import BOTS, game_factory, policy_factory

from league.db import LeagueDB
from league.report import write_report
from league.tournament import TournamentConfig, run_tournament

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                        if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    with LeagueDB(tmp / "league.db", game="tictactoe") as db:
        for name in BOTS:
            db.add_player(name, "bot")
        db.add_player("<anchor & co>", "bot", frozen=True)  # escaped, never played
        run_tournament(db, list(BOTS), policy_factory, game_factory,
                       TournamentConfig(games_per_pair=20, num_envs=8))
        return write_report(db, tmp / "out" / "report.html")


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"https?://", text), "the report must not reference the network"
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)
    assert text.count("<tr class='player") == 4
    assert "&lt;anchor &amp; co&gt;" in text and "<anchor & co>" not in text
    assert "<svg id='curves'" in text and "<svg id='payoff'" in text
    assert text.count("class='cell'") == 9  # 3 x 3 payoff matrix of the players with games


def test_report_of_an_empty_league(tmp_path: Path) -> None:
    with LeagueDB(tmp_path / "empty.db", game="tictactoe") as db:
        text = write_report(db, tmp_path / "empty.html").read_text()
    assert "No matches yet" in text and "Not enough matches" in text
    assert "No players yet" in text


def test_score_interval_is_wilsons() -> None:
    """Against the textbook values: 50 of 100 -> [0.4038, 0.5962]; 0 of 10 -> [0, 0.2775];
    10 of 10 -> [0.7225, 1]."""
    from league.report import wilson_interval

    for (rate, games), expected in [((0.5, 100), (0.40383, 0.59617)),
                                    ((0.0, 10), (0.0, 0.27753)), ((1.0, 10), (0.72247, 1.0))]:
        assert wilson_interval(rate, games) == pytest.approx(expected, abs=1e-4)


def test_names_with_control_characters_reach_the_page_escaped(tmp_path: Path) -> None:
    """Guards: a player named with ESC and a newline (a run folder's name) put raw control
    bytes into the ladder, the curves' legend and the heatmap's labels and tooltips."""
    odd = "e\x1b[31mRED\nx"
    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:
        a, b = db.add_player(odd, "checkpoint", path=tmp_path / "x.pt"), db.add_player("b", "bot")
        for k in range(4):
            db.record_match(a, b, k % 2, key=f"m{k}")
        text = write_report(db, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "\x1b" not in text and "RED\nx" not in text
    assert text.count("e\\x1b[31mRED\\nx") >= 4  # ladder, legend, labels, tooltips
    assert text.count("class='band'") == 2  # each curve with its ±σ band


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def need_chromium(path: str | None) -> str:
    """``path``, or skip the test: a failure instead when SELFPLAY_REQUIRE_CHROMIUM=1 (set by
    .ci/run, so CI cannot pass without rendering the report)."""
    if path is not None:
        return path
    missing = "chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("SELFPLAY_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{missing}; SELFPLAY_REQUIRE_CHROMIUM=1 requires it")
    pytest.skip(missing)


def test_missing_chromium_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFPLAY_REQUIRE_CHROMIUM", "1")
    with pytest.raises(pytest.fail.Exception, match="SELFPLAY_REQUIRE_CHROMIUM=1"):
        need_chromium(None)
    monkeypatch.delenv("SELFPLAY_REQUIRE_CHROMIUM")
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        need_chromium(None)
    assert need_chromium("/usr/bin/chromium") == "/usr/bin/chromium"
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "SELFPLAY_REQUIRE_CHROMIUM=1 " in ci and "make test" in ci  # CI renders the report


def test_report_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    need_chromium(CHROMIUM)
    dom = chromium("--dump-dom", report.as_uri(), tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-rendered="yes"' in dom.stdout  # the inline script ran
    assert dom.stdout.count('class="player') == 4
    for name in BOTS:
        assert name in dom.stdout

    shot = tmp_path / "shot.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1000,1200", report.as_uri(),
                      tmp=tmp_path)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    image = pytest.importorskip("PIL.Image").open(shot).convert("L")
    low, high = image.getextrema()
    assert high - low > 100  # not a blank page


def test_short_labels_keep_what_tells_players_apart() -> None:
    """Guards: legend and heatmap labels cut names to their first 23 characters, so every
    snapshot of a run with a long name read ``tictactoe_selfplay_run@…``."""
    from league.report import _short

    names = [f"tictactoe_selfplay_run@00000{k}0" for k in range(1, 5)]
    labels = [_short(n) for n in names]
    assert len(set(labels)) == 4 and all(len(label) <= 24 for label in labels)
    assert labels[0].endswith("run@0000010") and labels[0].startswith("tictact")
    assert _short("short") == "short"


def test_reading_sees_one_state_while_another_process_records(tmp_path: Path) -> None:
    """Guards: a report (or ``leaderboard --json``) read its players and its match count at
    different moments while a tournament was recording (games summed 6184, matches 3093)."""
    path = tmp_path / "league.db"
    with LeagueDB(path, game="tictactoe") as writer:
        a, b = writer.add_player("a", "bot"), writer.add_player("b", "bot")
        writer.record_match(a, b, 1, key="k0")
        with LeagueDB(path, read_only=True) as reader, reader.reading():
            before = reader.match_count()
            writer.record_match(a, b, 1, key="k1")  # meanwhile, in another connection
            assert reader.match_count() == before == 1
            assert sum(s.games for s in reader.leaderboard()) == 2
        with LeagueDB(path, read_only=True) as reader:
            assert reader.match_count() == 2


def test_ladder_scores_draws_as_half_and_marks_players_without_games(tmp_path: Path) -> None:
    """Guards: the win rate counted a draw as a loss (a player drawing every game showed 0 %,
    as one losing every game, beside a payoff matrix scoring it ½), a player without games
    showed 0 %, and equal ratings got different ranks in index order."""
    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:
        a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
        db.add_player("idle", "bot")
        db.add_player("idle2", "bot")
        db.record_match(a, b, 0, key="m0")
        db.record_match(a, b, 1, key="m1")
        board = {s.name: s for s in db.leaderboard()}
        assert board["a"].score == pytest.approx(0.75) and board["a"].win_rate == 0.5
        assert board["b"].score == pytest.approx(0.25) and board["b"].win_rate == 0.0
        assert board["idle"].score is None and board["idle"].win_rate is None
        assert board["idle"].rank == board["idle2"].rank  # equal μ − 3σ, one rank
        assert [s.name for s in db.leaderboard()][-2:] == ["idle", "idle2"]  # then by name
        text = write_report(db, tmp_path / "r.html").read_text()
    assert "score 95% CI</th><th>win rate</th>" in text and "75.0%" in text
    assert "<dt>score</dt>" in text  # the legend says what the columns count


def test_report_of_a_database_missing_rating_history_rows(tmp_path: Path) -> None:
    """Guards: a player with games and no rating history rows (a damaged database) failed the
    report with an IndexError traceback."""
    import sqlite3

    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:
        a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
        db.record_match(a, b, 1, key="m0")
    with sqlite3.connect(tmp_path / "l.db") as conn:
        conn.execute("DELETE FROM rating_history")
    with LeagueDB(tmp_path / "l.db", read_only=True) as db:
        text = write_report(db, tmp_path / "r.html").read_text()
    assert "No matches yet" in text and "<svg id='payoff'" in text


def test_a_truncated_section_says_how_many_it_shows(tmp_path: Path) -> None:
    from league import report as report_module

    with LeagueDB(tmp_path / "l.db", game="tictactoe") as db:
        ids = [db.add_player(f"p{i}", "bot") for i in range(report_module.MAX_CURVES + 2)]
        for n, (x, y) in enumerate(zip(ids, ids[1:], strict=False)):
            db.record_match(x, y, 1, key=f"m{n}")
        text = write_report(db, tmp_path / "r.html").read_text()
    assert f"Showing {report_module.MAX_CURVES} of {len(ids)} players" in text
