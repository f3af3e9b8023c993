"""A self-contained HTML report of a league: ladder, rating curves and payoff heatmap.

One file, inline CSS, SVG and a few lines of JavaScript (sortable ladder), no network access.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from games.files import atomic_write_text
from league.db import LeagueDB
from league.records import Standing, visible

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
MAX_CURVES = 10
MAX_HEATMAP = 30
MAX_POINTS = 400
# the first line of every report: an existing --out file without it is not overwritten
REPORT_MARK = '<!DOCTYPE html><meta name="generator" content="selfplay league report">'

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.9em}
th,td{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f4f4f4;user-select:none}
td.name,th.name{text-align:left}
tr.broken td{color:#b00}
.muted{color:#777}
dl.legend{font-size:.85em;display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dl.legend dd{margin:0}
svg text{font-family:inherit}
"""

_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.dataset.order !== 'asc';
    th.dataset.order = asc ? 'asc' : 'desc';
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v || a.cells[col].textContent;
      var y = b.cells[col].dataset.v || b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
document.body.setAttribute('data-rendered', 'yes');
"""


def write_report(db: LeagueDB, out_html: str | Path) -> Path:
    """Write the report of ``db`` to ``out_html`` and return its path."""
    out = Path(out_html)
    board = db.leaderboard()
    title = f"League report: {db.game}"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    parts = [
        REPORT_MARK, '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_text(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_text(title)}</h1>",
        f'<p class="muted">{len(board)} players, {db.match_count()} matches; database '
        f"{_text(str(db.path))}; generated {stamp}. Ranked by the "
        "conservative rating μ − 3σ (TrueSkill).</p>",
        "<h2>Rating ladder</h2>",
        ladder_table(board, {p.id: str(p.metadata.get("role") or "") for p in db.players()}),
        legend(db),
        "<h2>Rating over time</h2>", rating_curves(db, board),
        "<h2>Payoff matrix</h2>", payoff_heatmap(db, board),
        f"<script>{_JS}</script></body></html>",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "\n".join(parts))
    return out


def ladder_table(board: list[Standing], roles: Mapping[int, str] | None = None) -> str:
    """The leaderboard as a sortable HTML table (one ``tr.player`` per player); ``roles``: the
    training role of each snapshot (by player id), shown for exploiters."""
    head = ("<tr><th>rank</th><th class='name'>player</th><th class='name'>kind</th><th>μ</th>"
            "<th>σ</th><th>μ − 3σ</th><th>Elo</th><th>games</th><th>W / D / L</th>"
            "<th>score</th><th title=\"Wilson interval of the score over the player's "
            "games\">score 95% CI</th><th>win rate</th><th class='name'>status</th></tr>")
    rows = []
    for s in board:
        role = (roles or {}).get(s.player_id, "")
        status = ("broken: " + s.broken if s.broken else "anchor" if s.frozen
                  else role if role not in ("", "main") else "")
        css = "player broken" if s.broken else "player"
        rows.append(
            f"<tr class='{css}'><td>{s.rank}</td><td class='name'>{_text(s.name)}</td>"
            f"<td class='name'>{s.kind}</td><td>{s.mu:.2f}</td><td>{s.sigma:.2f}</td>"
            f"<td>{s.conservative:.2f}</td><td>{s.elo:.0f}</td><td>{s.games}</td>"
            f"<td data-v='{s.wins}'>{s.wins} / {s.draws} / {s.losses}</td>"
            f"{_rate_cell(s.score)}{_interval_cell(s.score, s.games)}{_rate_cell(s.win_rate)}"
            f"<td class='name'>{_text(status)}</td></tr>")
    if not rows:
        rows.append("<tr><td class='name muted' colspan='13'>No players yet: `selfplay league "
                    "tournament` or a training run adds them.</td></tr>")
    return (f"<table class='sortable' id='ladder'><thead>{head}</thead><tbody>"
            f"{''.join(rows)}</tbody></table>")


def _rate_cell(rate: float | None) -> str:
    """A rate's table cell; a player without games has none (it sorts last)."""
    if rate is None:
        return "<td data-v='-1'>–</td>"
    return f"<td>{100 * rate:.1f}%</td>"


def wilson_interval(rate: float, games: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate observed over ``games`` games (95 % by default);
    a draw's half point counts as half a success."""
    denom = 1.0 + z * z / games
    centre = (rate + z * z / (2 * games)) / denom
    half = z * math.sqrt(rate * (1.0 - rate) / games + z * z / (4 * games * games)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval_cell(rate: float | None, games: int) -> str:
    """The score's 95 % interval cell (empty for a player without games)."""
    if rate is None or games <= 0:
        return "<td data-v='-1'>–</td>"
    lo, hi = wilson_interval(rate, games)
    return f"<td data-v='{lo:.4f}'>{100 * lo:.0f}–{100 * hi:.0f}%</td>"


def _text(text: str) -> str:
    """``text`` for the page: control characters shown as escapes (a name with ESC or a
    newline), undecodable bytes as ``\\xff`` (:func:`~league.records.visible`), then
    HTML-escaped."""
    return html.escape(visible(text))


def legend(db: LeagueDB) -> str:
    """What the ladder's columns mean, with this league's rating settings."""
    c = db.config
    items = {
        "μ, σ": f"TrueSkill's estimate of a player's skill and its uncertainty (start "
                f"{c.mu:g} ± {c.sigma:.2f}; β {c.beta:.2f}, τ {c.tau:.3f}, draw probability "
                f"{c.draw_probability:g})",
        "μ − 3σ": "the conservative rating the ladder is ranked by (equal values share a "
                  "rank); it rises as games make σ shrink",
        "Elo": f"sequential Elo over the same games (start {c.elo_initial:g}, K {c.elo_k:g})",
        "score": "(wins + draws / 2) / games, as in the payoff matrix; its 95% CI is the "
                 "Wilson interval over the player's games (draws as half a win)",
        "win rate": "wins / games (a draw counts as no win)",
        "anchor": "a rating frozen at its start: the league's fixed yardstick",
    }
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items.items())
    return f"<dl class='muted legend'>{rows}</dl>"


def rating_curves(db: LeagueDB, board: list[Standing], width: int = 900,
                  height: int = 360) -> str:
    """μ of the best players after each of their matches, with a ±σ band, as an inline SVG
    line chart."""
    played = [s for s in board if s.games > 0]
    history = db.rating_history([s.player_id for s in played[:MAX_CURVES]])
    # a player whose history rows are missing (a damaged database) has no curve
    top = [s for s in played[:MAX_CURVES] if len(history.get(s.player_id, ())) > 0]
    history = {s.player_id: history[s.player_id] for s in top}
    if not top:
        return "<p class='muted'>No matches yet.</p>"
    left, right, top_pad, bottom = 50, 170, 10, 35
    x_max = max(float(h[-1, 0]) for h in history.values())
    mus = np.concatenate([h[:, 1] - h[:, 2] for h in history.values()]
                         + [h[:, 1] + h[:, 2] for h in history.values()]
                         + [np.array([db.config.mu])])
    y_lo, y_hi = math.floor(float(mus.min())) - 1, math.ceil(float(mus.max())) + 1
    plot_w, plot_h = width - left - right, height - top_pad - bottom

    def sx(x: float) -> float:
        return left + plot_w * x / max(x_max, 1.0)

    def sy(y: float) -> float:
        return top_pad + plot_h * (1.0 - (y - y_lo) / max(y_hi - y_lo, 1e-9))

    svg = [f"<svg id='curves' width='{width}' "
           f"height='{height}' viewBox='0 0 {width} {height}'>",
           f"<rect x='{left}' y='{top_pad}' width='{plot_w}' height='{plot_h}' fill='#fafafa' "
           "stroke='#ccc'/>"]
    for tick in np.linspace(y_lo, y_hi, 6):
        y = sy(float(tick))
        svg.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' "
                   f"stroke='#e5e5e5'/><text x='{left - 6}' y='{y + 4:.1f}' font-size='11' "
                   f"text-anchor='end'>{tick:.1f}</text>")
    for tick in np.linspace(0.0, x_max, 6):
        x = sx(float(tick))
        svg.append(f"<text x='{x:.1f}' y='{top_pad + plot_h + 14}' font-size='11' "
                   f"text-anchor='middle'>{tick:.0f}</text>")
    svg.append(f"<text x='{left + plot_w / 2}' y='{height - 5}' font-size='12' "
               "text-anchor='middle'>match number (league-wide)</text>")
    svg.append(f"<text x='12' y='{top_pad + plot_h / 2}' font-size='12' text-anchor='middle' "
               f"transform='rotate(-90 12 {top_pad + plot_h / 2})'>μ</text>")
    for n, s in enumerate(top):
        rows = history[s.player_id]
        step = max(1, len(rows) // MAX_POINTS)
        rows = np.concatenate([rows[::step], rows[-1:]])
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in rows[:, :2])
        band = " ".join([f"{sx(x):.1f},{sy(m + sd):.1f}" for x, m, sd in rows[:, :3]]
                        + [f"{sx(x):.1f},{sy(m - sd):.1f}" for x, m, sd in rows[::-1, :3]])
        color = PALETTE[n % len(PALETTE)]
        svg.append(f"<polygon class='band' fill='{color}' fill-opacity='0.08' stroke='none' "
                   f"points='{band}'/>")
        svg.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.6' "
                   f"points='{points}'><title>{_text(s.name)}</title></polyline>")
        ly = top_pad + 14 + 16 * n
        svg.append(f"<rect x='{left + plot_w + 10}' y='{ly - 9}' width='10' height='10' "
                   f"fill='{color}'/><text x='{left + plot_w + 25}' y='{ly}' font-size='11'>"
                   f"{_text(_short(s.name))}</text>")
    svg.append("</svg>")
    note = ("<p class='muted'>Lines: μ after each of the player's matches; shaded: μ ± σ.</p>")
    return (_shown(len(top), len(board), "players with games, best first") + "".join(svg)
            + note)


def _shown(shown: int, players: int, which: str) -> str:
    """A note under a section that shows only some of the league's players."""
    if shown == players:
        return ""
    return f"<p class='muted'>Showing {shown} of {players} players: the {which}.</p>"


def payoff_heatmap(db: LeagueDB, board: list[Standing], cell: int = 28) -> str:
    """Mean score of each row player against each column player, as an SVG heatmap."""
    ids, score, games = db.payoff()
    index = {pid: i for i, pid in enumerate(ids)}
    # (a player whose matches are missing from a damaged database has no row)
    order = [s for s in board if s.games > 0 and s.player_id in index][:MAX_HEATMAP]
    if len(order) < 2:
        return "<p class='muted'>Not enough matches for a payoff matrix.</p>"
    rows = [index[s.player_id] for s in order]
    label_w = 160
    n = len(order)
    size = label_w + n * cell + 10
    width = size + 110  # room for the last rotated column labels
    svg = [f"<svg id='payoff' width='{width}' "
           f"height='{size}' viewBox='0 0 {width} {size}'>"]
    for r, (s, i) in enumerate(zip(order, rows, strict=True)):
        y = label_w + r * cell
        svg.append(f"<text x='{label_w - 6}' y='{y + cell * 0.65:.1f}' font-size='11' "
                   f"text-anchor='end'>{_text(_short(s.name))}</text>")
        x_label = label_w + r * cell + cell * 0.65
        svg.append(f"<text x='{x_label:.1f}' y='{label_w - 6}' font-size='11' "
                   f"transform='rotate(-60 {x_label:.1f} {label_w - 6})'>"
                   f"{_text(_short(s.name))}</text>")
        for c, j in enumerate(rows):
            x = label_w + c * cell
            played = games[i, j] > 0
            value = float(score[i, j]) if played else math.nan
            fill = _heat(value) if played else "#eeeeee"
            tip = (f"{s.name} vs {order[c].name}: {value:.2f} over {games[i, j]} games"
                   if played else f"{s.name} vs {order[c].name}: not played")
            svg.append(f"<rect class='cell' x='{x}' y='{y}' width='{cell}' height='{cell}' "
                       f"fill='{fill}' stroke='#fff'><title>{_text(tip)}</title></rect>")
            if played:
                svg.append(f"<text x='{x + cell / 2}' y='{y + cell * 0.62:.1f}' font-size='9' "
                           f"text-anchor='middle'>{value:.2f}</text>")
    svg.append("</svg>")
    legend = ("<p class='muted'>Cell = mean score of the row player against the column player "
              "(win 1, draw ½, loss 0): red below ½, blue above; grey = not played.</p>")
    return _shown(n, len(board), "players with games, best first") + "".join(svg) + legend


def _heat(value: float) -> str:
    """Diverging red (0) - white (½) - blue (1)."""
    t = min(max(value, 0.0), 1.0)
    if t < 0.5:
        k = t / 0.5
        rgb = (214 + (255 - 214) * k, 39 + (255 - 39) * k, 40 + (255 - 40) * k)
    else:
        k = (t - 0.5) / 0.5
        rgb = (255 - (255 - 31) * k, 255 - (255 - 119) * k, 255 - (255 - 180) * k)
    return "#" + "".join(f"{int(round(v)):02x}" for v in rgb)


def _short(name: str, limit: int = 24) -> str:
    """``name`` in at most ``limit`` characters: its start and its end, which tell apart the
    snapshots of one run (``main@0000010``, ``main@0000020``) and a run's checkpoints."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 3
    return name[:head] + "…" + name[len(name) - (limit - 1 - head):]


def printable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a path's undecodable bytes (``\udcff``, from a file
    name that is not UTF-8) shown as ``\xff``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
