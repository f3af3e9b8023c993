"""``E`` multi-player Atari emulators stepped through multi_agent_ale_py's C library directly.

PettingZoo's Atari envs wrap the same emulator in a parallel env, an AEC conversion, order and
bounds checks and (with SuperSuit) one wrapper per preprocessing step, each converting dicts per
frame. Here each frame is one C call on preallocated arrays (no Python ``act`` wrapper, which
allocates arrays per call), and grayscale, max-pooling and resizing happen once per agent step
on buffers shared by all envs. ctypes releases the GIL during each C call, so with
``num_threads`` > 1 worker threads emulate disjoint groups of envs in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from multi_agent_ale_py import ALEInterface  # type: ignore[import-untyped]
from multi_agent_ale_py.ale_python_interface import ale_lib  # type: ignore[import-untyped]

from games.core import GameError


def new_ale(rom: Path, mode: int, seed: int, repeat_action_probability: float) -> Any:
    """A multi-player ALE with ``rom`` loaded in game ``mode``, seeded as PettingZoo seeds it
    (call ``reset_game`` before playing)."""
    ALEInterface.setLoggerMode(ALEInterface.Logger.Error)
    ale = ALEInterface()
    ale.setFloat(b"repeat_action_probability", repeat_action_probability)
    ale.setInt(b"random_seed", seed % 2**31)
    ale.loadROM(str(rom))
    ale.setMode(mode)
    return ale


class AleBatch:
    """``E`` emulators of one game, env ``i`` in game mode ``modes[i]``; :meth:`step` plays one
    agent step in each.

    After :meth:`step` (or :meth:`reset` for the envs it names): ``rewards`` ``int32 [E, A]``
    (summed over the skipped frames), ``game_over`` ``bool [E]``, ``elapsed`` (frames since
    the env's reset) and ``frames`` ``uint8 [E, S, S]``, the new preprocessed frame
    (grayscale, max of the step's last two frames, resized with ``interpolation``).

    A mode may have fewer than ``num_players`` players (a single-player mode, in which the
    console plays the other side): the C library then reads only the first columns of that
    env's ``actions`` row and writes only the first columns of its ``rewards`` and ``lives``
    (the others stay 0), so every env goes through the same loop.
    """

    def __init__(self, rom: Path, modes: Sequence[int], num_players: int, seed: int,
                 frame_skip: int, screen_size: int, max_pool: bool,
                 repeat_action_probability: float, interpolation: int = cv2.INTER_LINEAR,
                 num_threads: int = 1) -> None:
        self.rom, self.modes, self.num_players = rom, [int(m) for m in modes], num_players
        self.sticky = repeat_action_probability
        self.skip, self.size, self.max_pool = frame_skip, screen_size, max_pool and frame_skip > 1
        self.interpolation = interpolation
        self.ales = [new_ale(rom, mode, seed + i, self.sticky)
                     for i, mode in enumerate(self.modes)]
        self.seed = seed
        self._fresh = True  # ROMs loaded with ``seed`` and not played since
        for mode in sorted(set(self.modes)):
            active = self.ales[self.modes.index(mode)].numPlayersActive()
            if not 1 <= active <= num_players:
                raise GameError(f"{rom.name} mode {mode} has {active} players, expected 1 to "
                                f"{num_players}")
        num_envs = len(self.ales)
        width, height = self.ales[0].getScreenDims()
        self.screen_shape = (height, width)
        e, a = num_envs, num_players
        self.actions = np.zeros((e, a), np.intc)  # [E, A] ALE action codes
        self._frame_rewards = np.zeros((e, frame_skip, a), np.intc)  # [E, skip, A]
        self.rewards = np.zeros((e, a), np.int32)  # [E, A]
        self.lives = np.zeros((e, a), np.intc)  # [E, A]; < 0: the seat is out
        self.game_over = np.zeros(e, bool)  # [E]
        self.elapsed = np.zeros(e, np.int64)  # [E] frames since reset
        self.screens = np.zeros((e, 2, height, width), np.uint8)  # [E, 2, H, W] last 2 frames
        self._pooled = np.zeros((e, height, width), np.uint8)  # [E, H, W]
        self.frames = np.zeros((e, screen_size, screen_size), np.uint8)  # [E, S, S]
        self._bind()
        workers = max(1, min(num_threads, num_envs))
        bounds = np.linspace(0, num_envs, workers + 1).round().astype(int).tolist()
        self._chunks = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        self._pool = ThreadPoolExecutor(workers, "ale") if workers > 1 else None

    def _bind(self) -> None:
        """Raw pointers into the buffers, per env (kept in plain lists for the hot loop)."""
        self._objs = [ale.obj for ale in self.ales]
        act, rew, lives, scr = (self.actions.ctypes.data, self._frame_rewards.ctypes.data,
                                self.lives.ctypes.data, self.screens.ctypes.data)
        a, isz = self.num_players, np.dtype(np.intc).itemsize
        frame_bytes = self.screens[0, 0].nbytes
        self._act_ptr = [act + e * a * isz for e in range(len(self.ales))]
        self._rew_ptr = [[rew + (e * self.skip + t) * a * isz for t in range(self.skip)]
                         for e in range(len(self.ales))]
        self._lives_ptr = [lives + e * a * isz for e in range(len(self.ales))]
        self._scr_ptr = [(scr + 2 * e * frame_bytes, scr + (2 * e + 1) * frame_bytes)
                         for e in range(len(self.ales))]

    @property
    def num_envs(self) -> int:
        return len(self.game_over)

    @property
    def closed(self) -> bool:
        return not self.ales

    def close(self) -> None:
        """Free the emulators and worker threads (the instance is unusable afterwards)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._objs = []
        self.ales = []

    # ------------------------------------------------------------------ stepping

    def step(self, max_frames: int = 0) -> None:
        """Play ``actions`` for ``frame_skip`` frames in every env (fewer when the game ends or
        ``max_frames`` frames since reset are reached; 0: no limit)."""
        if self.closed:
            raise GameError("the emulators are closed")
        self._frame_rewards.fill(0)
        if self._pool is None:
            self._play(slice(0, self.num_envs), max_frames)
        else:
            jobs = [self._pool.submit(self._play, rows, max_frames) for rows in self._chunks]
            for job in jobs:
                job.result()
        np.sum(self._frame_rewards, axis=1, out=self.rewards)

    def _play(self, rows: slice, max_frames: int) -> None:
        """Emulate and preprocess the envs ``rows`` (one worker's share)."""
        act, over, gray = ale_lib.actMulti, ale_lib.game_over, ale_lib.getScreenGrayscale
        skip, first_grab = self.skip, self.skip - 2
        elapsed, game_over, screens = self.elapsed, self.game_over, self.screens
        for e in range(rows.start, rows.stop):
            obj, act_ptr, rew_ptr, scr_ptr = (self._objs[e], self._act_ptr[e],
                                              self._rew_ptr[e], self._scr_ptr[e])
            frames = skip if not max_frames else min(skip, max_frames - int(elapsed[e]))
            ended = False
            t = 0
            for t in range(frames):
                act(obj, act_ptr, rew_ptr[t])
                if t >= first_grab:
                    gray(obj, scr_ptr[t - first_grab])
                if over(obj):
                    ended = True
                    break
            game_over[e] = ended
            elapsed[e] += t + 1
            if t < skip - 1:  # cut short: the last frame pools with itself
                gray(obj, scr_ptr[1])
                screens[e, 0] = screens[e, 1]
        self._resize(rows)

    def _resize(self, rows: slice | list[int]) -> None:
        """Preprocess ``screens`` of the envs ``rows`` into ``frames``."""
        screens, pooled = self.screens, self._pooled
        if not self.max_pool:
            source = screens[:, 1]
        elif isinstance(rows, slice):
            np.maximum(screens[rows, 0], screens[rows, 1], out=pooled[rows])
            source = pooled
        else:
            for e in rows:
                np.maximum(screens[e, 0], screens[e, 1], out=pooled[e])
            source = pooled
        size, frames, interpolation = (self.size, self.size), self.frames, self.interpolation
        envs = range(rows.start, rows.stop) if isinstance(rows, slice) else rows
        for e in envs:
            cv2.resize(source[e], size, dst=frames[e], interpolation=interpolation)

    def reset(self, envs: list[int]) -> None:
        """Start a new game in ``envs``: ``frames`` gets their first frame, ``elapsed`` 0."""
        self._fresh = False
        for e in envs:
            obj = self._objs[e]
            ale_lib.reset_game(obj)
            ale_lib.getScreenGrayscale(obj, self._scr_ptr[e][1])
            self.screens[e, 0] = self.screens[e, 1]
            self.elapsed[e] = 0
            self.game_over[e] = False
        self._resize(envs)

    def read_lives(self) -> np.ndarray:
        """``lives`` ``[E, A]`` refreshed from the emulators (< 0: the seat is out)."""
        for obj, ptr in zip(self._objs, self._lives_ptr, strict=True):
            ale_lib.lives(obj, ptr)
        return self.lives

    def reseed(self, seed: int) -> None:
        """Reload the ROMs with seeds ``seed + i``, as PettingZoo's ``reset(seed=...)`` does."""
        if self._fresh and seed == self.seed:
            return  # loaded just so
        for i, (ale, mode) in enumerate(zip(self.ales, self.modes, strict=True)):
            ale.setInt(b"random_seed", (seed + i) % 2**31)
            ale.loadROM(str(self.rom))
            ale.setMode(mode)
        self.seed, self._fresh = seed, True

    # ------------------------------------------------------------------ misc

    def rgb(self, env: int) -> np.ndarray:
        """The current RGB screen of ``env``, ``uint8 [H, W, 3]``."""
        return np.asarray(self.ales[env].getScreenRGB(), np.uint8)

    def save(self, env: int) -> bytes:
        """Emulator state of ``env`` including its RNG (``cloneSystemState``), serialized."""
        ale = self.ales[env]
        ref = ale.cloneSystemState()
        try:
            return bytes(ale.encodeState(ref))
        finally:
            ale.deleteState(ref)

    def load(self, env: int, data: bytes) -> None:
        ale = self.ales[env]
        ref = ale.decodeState(np.frombuffer(data, np.uint8).copy())
        try:
            ale.restoreSystemState(ref)
        finally:
            ale.deleteState(ref)
