"""Actor-critic networks: MLP, Nature CNN, IMPALA CNN and GridNet (:mod:`selfplay.grid_networks`,
with a per-cell MLP head in :mod:`selfplay.cell_decoder`).

An :class:`ActorCritic` maps (normalized) observations to action-distribution parameters and
its critic input (the observation, or the game's global state for a centralized critic) to a
value. Observation normalization statistics live in the module, so a saved policy carries them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import torch
from torch import Tensor, nn

from games.core import Box, Discrete, GameSpec, MultiDiscrete
from selfplay.cell_decoder import CellDecoder
from selfplay.config import ConfigError, NetworkConfig, NormalizeConfig
from selfplay.distributions import ActionDist, CompactGridMask, compact_grid_mask, make_dist
from selfplay.grid_networks import (
    BoardPool,
    GridDecoder,
    GridEncoder,
    GridFeatures,
    final_features,
)
from selfplay.layers import layer_init, mlp
from selfplay.normalize import RunningMeanStd


class NatureCNN(nn.Module):
    """The DQN/PPO Atari torso: 3 convs and a 512-unit layer; uint8 input scaled by 1/255."""

    MIN_SIZE = 36  # the smallest side its convolutions leave a cell of

    def __init__(self, in_shape: tuple[int, ...], scale: float) -> None:
        super().__init__()
        self.scale = scale
        channels = in_shape[0]
        if min(in_shape[1:]) < self.MIN_SIZE:  # the unpadded 8/4, 4/2, 3/1 convs leave nothing
            raise ConfigError(f"network.kind 'nature_cnn' needs images of at least "
                              f"{self.MIN_SIZE}x{self.MIN_SIZE}; these are "
                              f"{'x'.join(map(str, in_shape[1:]))} (raise the game's screen "
                              "size, e.g. game.options.screen_size, or use impala_cnn)")
        self.convs = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(), nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, *in_shape)).shape[1]
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, 512)), nn.ReLU())
        self.out_dim = 512

    def forward(self, x: Tensor) -> Tensor:
        return cast(Tensor, self.fc(self.convs(x.float() * self.scale)))


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        out = self.conv0(torch.relu(x))
        out = self.conv1(torch.relu(out))
        return x + out


class ImpalaCNN(nn.Module):
    """IMPALA torso: per stage conv + max-pool + 2 residual blocks, then a 256-unit layer."""

    def __init__(self, in_shape: tuple[int, ...], channels: list[int], scale: float) -> None:
        super().__init__()
        self.scale = scale
        layers: list[nn.Module] = []
        c, h, w = in_shape
        for out_c in channels:
            layers += [nn.Conv2d(c, out_c, 3, padding=1), nn.MaxPool2d(3, 2, padding=1),
                       _ResidualBlock(out_c), _ResidualBlock(out_c)]
            c, h, w = out_c, (h + 1) // 2, (w + 1) // 2
        layers += [nn.Flatten(), nn.ReLU()]
        self.stages = nn.Sequential(*layers)
        self.fc = nn.Sequential(layer_init(nn.Linear(c * h * w, 256)), nn.ReLU())
        self.out_dim = 256

    def forward(self, x: Tensor) -> Tensor:
        return cast(Tensor, self.fc(self.stages(x.float() * self.scale)))


def ignored_planes(spec: GameSpec, names: list[str]) -> tuple[int, ...]:
    """The indices of ``network.ignore_planes`` among the game's named planes; a clear error
    for a game without named planes or a name it does not have."""
    if not names:
        return ()
    if spec.plane_names is None:
        raise ConfigError(f"network.ignore_planes: {spec.name}'s observation planes have no names")
    unknown = [n for n in names if n not in spec.plane_names]
    if unknown:
        raise ConfigError(f"network.ignore_planes: {spec.name} has no plane {unknown[0]!r} "
                         f"(its planes: {', '.join(spec.plane_names)})")
    return tuple(sorted({spec.plane_names.index(n) for n in names}))


def _flat_dim(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape)) if shape else 1


def check_board_sizes(agent: ActorCritic, boards: Mapping[str, Sequence[int]]) -> None:
    """A :class:`ConfigError` when the envs of one run play ``boards`` (``{map: [height,
    width]}``) of several sizes and ``agent`` is tied to one: it trained on the mix padded to
    the largest, then played no map of the mix alone."""
    sizes = sorted({(int(h), int(w)) for h, w in boards.values()})
    if len(sizes) > 1 and not agent.plays_any_board:
        shown = ", ".join(f"{h}x{w}" for h, w in sizes)
        tied = ("network.grid_critic: flatten ties the network" if agent.kind == "gridnet"
                else f"network.kind {agent.kind} ties the network")
        raise ConfigError(f"the maps of this run have {len(sizes)} board sizes ({shown}, "
                          f"height x width); {tied} to one: start the run with the gridnet "
                          "and grid_critic: pool, which plays every size")


class ActorCritic(nn.Module):
    """Policy and value networks for one :class:`GameSpec`."""

    def __init__(self, spec: GameSpec, net: NetworkConfig, norm: NormalizeConfig) -> None:
        super().__init__()
        self.space = spec.action_space
        self.clip_obs = norm.clip_obs
        kind = net.kind
        if kind == "auto":
            if isinstance(self.space, MultiDiscrete) and self.space.grid is not None:
                kind = "gridnet"
            elif spec.obs_kind == "image":
                kind = "nature_cnn"
            else:
                kind = "mlp"
        self.kind = kind
        self.pooled_critic = False  # gridnet's critic pools over the board (below)
        if net.ignore_planes and kind != "gridnet":
            raise ConfigError(f"network.ignore_planes needs network.kind gridnet, not {kind!r}")
        self.ignore_planes = tuple(sorted(set(net.ignore_planes)))
        use_state = net.critic_input == "state" or (
            net.critic_input == "auto" and spec.state_shape is not None
            and not spec.state_is_obs)
        if use_state and spec.state_shape is None:
            raise ConfigError(f"network.critic_input is 'state' but {spec.name} has no "
                              "global state")
        self.critic_reads_state = use_state
        critic_shape = spec.state_shape if use_state else spec.obs_shape
        assert critic_shape is not None
        image_scale = 1.0 / 255.0 if spec.obs_dtype == np.uint8 else 1.0

        self.obs_rms = RunningMeanStd(spec.obs_shape) if norm.obs else None
        self.state_rms = (RunningMeanStd(critic_shape) if norm.obs and use_state else None)
        self.value_rms = RunningMeanStd(()) if norm.value else None

        n_out = self._num_outputs()
        self.shared = net.shared_torso and not use_state
        if kind == "mlp":
            if spec.obs_dtype == np.uint8 and not norm.obs:  # raw planes (normalized: floats)
                raise ConfigError(
                    f"network.kind 'mlp' reads float features; {spec.name}'s observations are "
                    f"uint8 {spec.obs_kind} planes {tuple(spec.obs_shape)}: use auto, "
                    f"{'gridnet' if spec.obs_kind == 'grid' else 'nature_cnn or impala_cnn'}")
            self.actor_torso, a_dim = self._mlp_torso(spec.obs_shape, net)
            self.actor_head = layer_init(nn.Linear(a_dim, n_out), gain=0.01)
            if not self.shared:
                self.critic_torso, c_dim = self._mlp_torso(critic_shape, net)
            else:
                c_dim = a_dim
            self.critic_head = layer_init(nn.Linear(c_dim, 1), gain=1.0)
        elif kind in ("nature_cnn", "impala_cnn"):
            if len(spec.obs_shape) != 3:
                raise ConfigError(f"network.kind {kind!r} needs image observations; {spec.name}'s "
                                  f"are {spec.obs_shape} (use mlp or auto)")
            cnn = self._cnn(kind, spec.obs_shape, net, image_scale)
            self.actor_torso = cnn
            a_dim = cnn.out_dim
            self.actor_head = layer_init(nn.Linear(a_dim, n_out), gain=0.01)
            if not self.shared:
                self.critic_torso = self._cnn(kind, critic_shape, net, image_scale)
            self.critic_head = layer_init(nn.Linear(a_dim, 1), gain=1.0)
        elif kind == "gridnet":
            if not (isinstance(self.space, MultiDiscrete) and self.space.grid is not None):
                raise ConfigError("network.kind 'gridnet' needs per-cell grid actions")
            self.actor_torso = GridEncoder(spec.obs_shape[0], net.channels, spec.obs_scale,
                                           skips=net.grid_skips, pool=net.grid_cell_pool,
                                           ignored=ignored_planes(spec, net.ignore_planes))
            n_logits = int(sum(self.space.nvec))
            self.actor_head = (
                CellDecoder(spec.obs_shape[0], net.channels, net.grid_cells, n_logits,
                            net.grid_cell_radius, net.grid_cell_pool, net.grid_cell_context,
                            spec.pad_plane, net.grid_cell_bins) if net.grid_cells else
                GridDecoder(net.channels, n_logits, spec.obs_shape[0] if net.grid_skips else None,
                            net.grid_head, net.grid_hidden))
            self.pooled_critic = net.grid_critic == "pool"
            if self.pooled_critic and norm.obs and spec.pad_plane is not None:
                raise ConfigError("normalize.obs would rescale the padding plane the pooled "
                                 "critic reads; keep it off for one-hot boards")
            if not self.shared:  # else the critic head reads the actor's encoder features
                encoder = GridEncoder(critic_shape[0], net.channels, spec.obs_scale)
                self.critic_torso = (encoder if self.pooled_critic
                                     else nn.Sequential(encoder, nn.Flatten()))
            if self.pooled_critic:
                self.critic_head = BoardPool(net.channels[-1], net.hidden[-1],
                                             len(net.channels), spec.pad_plane,
                                             net.grid_cell_pool if self.shared else 1)
            else:
                with torch.no_grad():
                    torso = self.actor_torso if self.shared else self.critic_torso
                    flat = final_features(torso(torch.zeros(1, *critic_shape))
                                          ).flatten(1).shape[1]
                self.critic_head = nn.Sequential(
                    layer_init(nn.Linear(flat, net.hidden[-1])), nn.ReLU(),
                    layer_init(nn.Linear(net.hidden[-1], 1), gain=1.0))
        else:
            raise ConfigError(f"unknown network.kind {kind!r}")
        self.log_std: nn.Parameter | None = None
        if isinstance(self.space, Box):
            dims = len(self.space.low)
            self.log_std = nn.Parameter(torch.full((dims,), float(net.log_std_init)))

    def _num_outputs(self) -> int:
        space = self.space
        if isinstance(space, Discrete):
            return space.n
        if isinstance(space, MultiDiscrete):
            return int(sum(space.nvec)) * (space.cells or 1)
        return len(space.low)

    @staticmethod
    def _mlp_torso(shape: tuple[int, ...], net: NetworkConfig) -> tuple[nn.Module, int]:
        body, out = mlp(_flat_dim(shape), net.hidden, net.activation)
        return nn.Sequential(nn.Flatten(), *body), out

    @staticmethod
    def _cnn(kind: str, shape: tuple[int, ...], net: NetworkConfig,
             scale: float) -> NatureCNN | ImpalaCNN:
        if kind == "nature_cnn":
            return NatureCNN(shape, scale)
        return ImpalaCNN(shape, net.channels, scale)

    # ----------------------------------------------------------------- normalization

    def normalize_obs(self, obs: Tensor, update: bool = False) -> Tensor:
        """Observation as the actor reads it; ``update`` folds it into the running stats."""
        if self.obs_rms is None:
            return obs
        if update:
            self.obs_rms.update(obs)
        return self.obs_rms.normalize(obs.float(), self.clip_obs).float()

    def normalize_critic_input(self, obs: Tensor, state: Tensor | None,
                               update: bool = False) -> Tensor:
        """The critic's (normalized) input: the global state or the observation."""
        if not self.critic_reads_state:
            return self.normalize_obs(obs, update=False) if self.obs_rms is not None else obs
        assert state is not None, "the critic reads the global state but none was given"
        if self.state_rms is None:
            return state
        if update:
            self.state_rms.update(state)
        return self.state_rms.normalize(state.float(), self.clip_obs).float()

    # ----------------------------------------------------------------- forward

    def dist_params(self, obs: Tensor) -> Tensor:
        """Distribution parameters: logits ``[B, n]``, ``[B, cells, sum(nvec)]`` or means."""
        return self.params_from_features(obs, self.actor_torso(obs))

    def params_from_features(self, obs: Tensor, features: Tensor | GridFeatures) -> Tensor:
        """Distribution parameters from the actor torso's ``features`` of ``obs``."""
        if self.kind == "gridnet":  # logits for the cells of this board, whatever its size
            return cast(Tensor, self.actor_head(features, (obs.shape[-2], obs.shape[-1])))
        out = self.actor_head(features)
        space = self.space
        if isinstance(space, MultiDiscrete) and space.cells is not None and out.dim() == 2:
            out = out.view(out.shape[0], space.cells, -1)
        return cast(Tensor, out)

    def dist(self, obs: Tensor, mask: Tensor | CompactGridMask | None) -> ActionDist:
        return self._dist(obs, self.actor_torso(obs), mask)

    def _dist(self, obs: Tensor, features: Tensor | GridFeatures,
              mask: Tensor | CompactGridMask | None) -> ActionDist:
        """The distribution from the actor torso's ``features``. A U-Net grid decoder or a cell
        decoder with a mask computes only the logits of the cells with a legal value
        (``forward_rows``), which are all the distribution reads."""
        space = self.space
        if (mask is not None and isinstance(features, GridFeatures)
                and isinstance(space, MultiDiscrete) and space.cells is not None):
            if obs.shape[-2] * obs.shape[-1] != space.cells:
                raise ValueError(f"observations of a {obs.shape[-2]}x{obs.shape[-1]} board for "
                                 f"actions on {space.cells} cells")
            compact = (mask if isinstance(mask, CompactGridMask)
                       else compact_grid_mask(mask, space.cells))
            head = cast(GridDecoder | CellDecoder, self.actor_head)
            logits = head.forward_rows(features, compact.rows)
            return make_dist(space, logits, compact, logits_rows=True)
        return make_dist(space, self.params_from_features(obs, features), mask, self.log_std)

    @property
    def plays_any_board(self) -> bool:
        """Whether the weights fit boards of every size (a gridnet with the pooled critic);
        other networks are tied to the board size they were built for."""
        return self.kind == "gridnet" and self.pooled_critic

    def value_normalized(self, critic_in: Tensor,
                         obs_features: Tensor | GridFeatures | None = None) -> Tensor:
        """Critic output ``[B]`` in the (possibly normalized) value space."""
        if self.shared:
            feats = final_features(obs_features if obs_features is not None
                                   else self.actor_torso(critic_in))
        else:
            feats = self.critic_torso(critic_in)
        if self.kind == "gridnet" and self.pooled_critic:
            return cast(Tensor, self.critic_head(feats, critic_in))
        return cast(Tensor, self.critic_head(feats.flatten(1))).squeeze(-1)

    def value(self, critic_in: Tensor) -> Tensor:
        """Value ``[B]`` in return units."""
        v = self.value_normalized(critic_in)
        return self.value_rms.denormalize(v).float() if self.value_rms is not None else v

    def forward_all(self, obs: Tensor, mask: Tensor | CompactGridMask | None,
                    critic_in: Tensor) -> tuple[ActionDist, Tensor]:
        """Distribution and normalized value in one pass (shares the torso when configured)."""
        features = self.actor_torso(obs)
        dist = self._dist(obs, features, mask)
        value = self.value_normalized(critic_in, features if self.shared else None)
        return dist, value

    def to_value_space(self, returns: Tensor) -> Tensor:
        """Returns mapped into the critic's output space (normalized when configured)."""
        if self.value_rms is None:
            return returns
        return self.value_rms.normalize(returns).float()

    def from_value_space(self, values: Tensor) -> Tensor:
        if self.value_rms is None:
            return values
        return self.value_rms.denormalize(values).float()


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
