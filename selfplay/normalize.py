"""Running statistics for observation, reward and value normalization."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn


class RunningMeanStd(nn.Module):
    """Parallel-algorithm running mean/variance kept as buffers (saved with the agent)."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    mean: Tensor
    var: Tensor
    count: Tensor

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold a batch ``[N, *shape]`` into the statistics."""
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        if x.shape[0] == 0:
            return
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        batch_count = x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        new_mean = self.mean + delta * batch_count / total
        m2 = (self.var * self.count + batch_var * batch_count
              + delta**2 * self.count * batch_count / total)
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def _views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """NumPy views sharing memory with the buffers (cached; buffers are updated in place)."""
        views = self.__dict__.get("_np_views")
        if views is None or views[0].ctypes.data != self.mean.data_ptr():
            views = (self.mean.numpy(), self.var.numpy(), self.count.numpy())
            self.__dict__["_np_views"] = views
        return views  # type: ignore[no-any-return]

    def update_np(self, x: np.ndarray) -> None:
        """:meth:`update` for NumPy input, computed in NumPy (no torch dispatch cost)."""
        mean, var, count = self._views()
        x = x.reshape(-1, *mean.shape)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = x.sum(0, dtype=np.float64) / n
        centered = x - batch_mean
        batch_var = (centered * centered).sum(0) / n
        delta = batch_mean - mean
        total = count + n
        var *= count
        var += batch_var * n + delta * delta * (count * n / total)
        var /= total
        mean += delta * (n / total)
        count[...] = total

    def normalize_np(self, x: np.ndarray, clip: float | None = None) -> np.ndarray:
        """:meth:`normalize` for NumPy input; float32 output."""
        mean, var, _ = self._views()
        out = ((x - mean) / np.sqrt(var + 1e-8)).astype(np.float32)
        return np.clip(out, -clip, clip, out=out) if clip is not None else out

    def normalize(self, x: Tensor, clip: float | None = None) -> Tensor:
        out = (x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + 1e-8)
        return out.clamp(-clip, clip) if clip is not None else out

    def denormalize(self, x: Tensor) -> Tensor:
        return x * torch.sqrt(self.var.to(x.dtype) + 1e-8) + self.mean.to(x.dtype)


class RewardScaler:
    """Divides rewards by the running std of a discounted return per ``[E, A]`` stream.

    The same scheme as Stable-Baselines3's ``VecNormalize`` (and gym's old ``NormalizeReward``):
    returns accumulate ``G = gamma G + r`` and reset after an episode's last step; rewards are
    scaled (not centered) and clipped.
    """

    def __init__(self, shape: tuple[int, ...], gamma: float, clip: float) -> None:
        self.gamma = gamma
        self.clip = clip
        self.returns = np.zeros(shape, np.float64)
        self.played = np.zeros(shape, bool)  # the stream's seat acted in its episode so far
        self.stats = RunningMeanStd(())

    def __call__(self, reward: np.ndarray, done: np.ndarray,
                 envs: slice = slice(None), learner: np.ndarray | None = None) -> np.ndarray:
        """Scale ``reward [E', A]`` of the envs ``envs`` (default: all); ``done [E']`` ends
        their accumulated returns after this step. Only the streams of ``learner`` (bool
        ``[E', A]``: the seats the learner acted for this step; default all) feed the
        statistics, from that seat's first move in its episode to the episode's end, acting
        or not: a turn-based game's loss arrives on the other seat's move. Opponents' streams,
        and seats that never act (a bot env's engine seat), do not set the learner's scale."""
        returns = self.returns[envs]  # a view: updated in place
        played = self.played[envs]  # a view
        returns *= self.gamma
        returns += reward
        if learner is not None:
            played |= learner
        sample = returns if learner is None else returns[played]
        if sample.size:
            self.stats.update_np(sample)
        std = float(np.sqrt(self.stats.var.item() + 1e-8))
        scaled = np.clip(reward / std, -self.clip, self.clip).astype(np.float32)
        returns[done] = 0.0
        played[done] = False
        return scaled

    def state_dict(self) -> dict[str, object]:
        return {"returns": torch.from_numpy(self.returns.copy()),
                "played": torch.from_numpy(self.played.copy()),
                "stats": self.stats.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        returns = state["returns"]
        assert isinstance(returns, Tensor)
        self.returns = returns.numpy().copy()
        played = state.get("played")  # checkpoints before it: streams join at their next move
        self.played = (played.numpy().copy() if isinstance(played, Tensor)
                       else np.zeros_like(self.returns, bool))
        self.stats.load_state_dict(state["stats"])  # type: ignore[arg-type]
