"""The games of a run in its checkpoints: what a training or cloning run saves of its games and
the batch it acts on next, and how it takes them back (for games that capture their state,
:class:`games.core.SupportsState`), so a resumed run continues the very games it stopped in."""

from __future__ import annotations

from typing import Any

import numpy as np

from games.core import Batch, EpisodeStats, GameSpec, SupportsState, VecGame
from selfplay.checkpoint import CheckpointError
from selfplay.handover import to_host


def saved_games(game: VecGame, batch: Batch) -> dict[str, Any]:
    """``{"game_state", "batch"}`` of a checkpoint: the engine's state (None for a game that
    cannot capture it) and the observations, masks, critic inputs and alive seats of ``batch``
    (on the host)."""
    return {"game_state": game.get_state() if isinstance(game, SupportsState) else None,
            "batch": {"obs": to_host(batch.obs),
                      "action_mask": None if batch.action_mask is None
                      else to_host(batch.action_mask),
                      "state": None if batch.state is None else to_host(batch.state),
                      "alive": batch.alive}}


def restore_games(game: VecGame, spec: GameSpec, saved: dict[str, Any]) -> Batch | None:
    """Put ``game`` back where :func:`saved_games` found it; the batch to act on next, or None
    when the checkpoint holds no game state or the game cannot take one (new games start)."""
    if saved.get("game_state") is None or not isinstance(game, SupportsState):
        return None
    game.set_state(saved["game_state"])
    batch = saved["batch"]
    e, a = spec.num_envs, spec.num_seats
    return Batch(obs=batch["obs"], action_mask=batch["action_mask"], state=batch["state"],
                 reward=np.zeros((e, a), np.float32), terminated=np.zeros(e, bool),
                 truncated=np.zeros(e, bool), alive=batch["alive"],
                 episodes=EpisodeStats.empty())


def check_game(state: dict[str, Any], spec: GameSpec) -> None:
    """A :class:`CheckpointError` for a checkpoint of another game than ``spec``'s."""
    if state.get("game") != spec.name:
        raise CheckpointError(f"checkpoint is for game {state.get('game')!r}, "
                              f"not {spec.name!r}")


def weights_mismatch(exc: Exception) -> CheckpointError:
    """The one-line error for weights (or optimizer state) that do not fit the network."""
    first = str(exc).strip().splitlines()[0][:200]
    return CheckpointError(f"checkpoint does not match this network/config: {first}")
