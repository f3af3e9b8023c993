"""Options of ``pettingzoo/<game>`` (``game.options`` in a config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from games.ale_roms import MAX_FRAME_STACK, MAX_SCREEN_SIZE


@dataclass
class PettingZooAtariOptions:
    """Preprocessing as CleanRL's ``ppo_pettingzoo_ma_atari`` (SuperSuit wrappers), plus extras.

    Defaults give observations ``uint8 [frame_stack + 2, 84, 84]``: 4 grayscale frames (oldest
    first) and 2 agent-indicator channels (channel ``frame_stack + i`` is 255 for seat ``i``).
    """

    frame_skip: int = 4
    """Emulator frames per agent step (actions repeat; rewards add up)."""
    frame_stack: int = 4
    """Frames stacked along the channel axis (a new episode repeats its first frame)."""
    screen_size: int = 84
    """Observation height and width (resized from the 210x160 screen)."""
    interpolation: Literal["linear", "area"] = "linear"
    """Resize filter: bilinear as SuperSuit's ``resize_v1`` in CleanRL, or area as gymnasium's
    single-agent ``AtariPreprocessing`` (about 4x slower at 210x160 -> 84x84)."""
    max_pool: bool = True
    """Observe the pixel-wise max of the last two frames of a step (removes Atari flicker)."""
    clip_rewards: bool = True
    """Clip ``Batch.reward`` to its sign; episode statistics keep the raw score."""
    max_cycles: int | None = 100_000
    """Truncate an episode after this many emulator frames, as PettingZoo's ``max_cycles``
    (100,000 frames = 25,000 agent steps at frame_skip 4); None: never."""
    full_action_space: bool = False
    """All 18 joystick actions instead of the game's minimal set."""
    agent_indicator: bool = True
    """Append one channel per seat, 255 in the observing seat's channel (SuperSuit's
    ``agent_indicator_v0``); without it both seats get identical observations."""
    mirror_second_seat: bool = False
    """Flip seat 1's frames left-right so that it sees itself where seat 0 sees itself. Only
    meaningful in the pong family, whose paddles move vertically (actions are unchanged by the
    flip)."""
    global_state: bool = True
    """Provide ``Batch.state`` for a centralized critic: each seat's unmirrored frames plus its
    indicator channels, ``[frame_stack + 2, S, S]`` (the same array as the observation unless
    ``mirror_second_seat``; the Atari screen is already the whole game state)."""
    repeat_action_probability: float = 0.0
    """Sticky actions (0 as in PettingZoo)."""
    builtin_opponent_share: float = 0.0
    """Share of the envs (the last ``floor(share * num_envs)``) whose seat 0 plays the game's
    built-in single-player opponent: the same ROM in its single-player mode, the console
    playing the other side; seat 1 there is never alive. Only for the games of
    :func:`games.pettingzoo.builtin_opponent_games` (their default variant)."""
    num_threads: int = 1
    """Threads emulating disjoint groups of envs (the emulator runs without the GIL); more
    than 1 helps only where cores are idle while the game steps."""
    game_kwargs: dict[str, Any] = field(default_factory=dict)
    """Game variant arguments of PettingZoo's ``raw_env``, e.g. ``{game_version: jet}`` for
    combat_plane or ``{game_version: hockey}`` for pong."""
    rom_dir: str | None = None
    """Folder holding the ROM ``.bin`` files; None: the ROMs bundled with ale-py."""
    render: bool = False
    """Accepted for the common ``render`` convention; the ALE renders without set-up, so
    ``render()`` and ``render_final()`` work either way."""

    def __post_init__(self) -> None:
        for key in ("frame_skip", "frame_stack", "screen_size", "num_threads"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.screen_size > MAX_SCREEN_SIZE or self.frame_stack > MAX_FRAME_STACK:
            raise ValueError(f"screen_size must be <= {MAX_SCREEN_SIZE} (the screen is "
                             f"210x160) and frame_stack <= {MAX_FRAME_STACK}, got "
                             f"{self.screen_size} and {self.frame_stack}")
        if self.max_cycles is not None and self.max_cycles < 1:
            raise ValueError(f"max_cycles must be >= 1 or null, got {self.max_cycles}")
        if not 0.0 <= self.builtin_opponent_share <= 1.0:
            raise ValueError(f"builtin_opponent_share must be in [0, 1], "
                             f"got {self.builtin_opponent_share}")
        if not 0.0 <= self.repeat_action_probability <= 1.0:
            raise ValueError(f"repeat_action_probability must be in [0, 1], "
                             f"got {self.repeat_action_probability}")
