"""Networks build for every torso and action space; the NumPy acting mirror matches PyTorch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch

from games.core import Box, Discrete, GameSpec, MultiDiscrete
from selfplay.config import ConfigError, NetworkConfig, NormalizeConfig
from selfplay.config_files import build_config
from selfplay.inference import NumpyActorCritic, supports
from selfplay.networks import ActorCritic, count_parameters


def spec(obs_shape: tuple[int, ...], space: object, obs_kind: str = "vector",
         state_shape: tuple[int, ...] | None = None, dtype: type = np.float32) -> GameSpec:
    return GameSpec("test", 2, 1, obs_shape, np.dtype(dtype), space,  # type: ignore[arg-type]
                    state_shape=state_shape, obs_kind=obs_kind)


def unet_agent(planes: int, space: MultiDiscrete, channels: list[int], hidden: int,
               head: dict[str, object]) -> ActorCritic:
    """A seeded U-Net GridNet (shared torso) over ``planes`` input planes of ``space``'s grid,
    with the head settings ``head``."""
    assert space.grid is not None
    torch.manual_seed(0)
    return ActorCritic(spec((planes, *space.grid), space, "grid"),
                       NetworkConfig(channels=channels, hidden=[hidden], grid_skips=True,
                                     shared_torso=True, **head),  # type: ignore[arg-type]
                       NormalizeConfig())


@pytest.mark.parametrize("kind", ["nature_cnn", "impala_cnn"])
def test_image_torsos(kind: str) -> None:
    agent = ActorCritic(spec((4, 84, 84), Discrete(6), "image", dtype=np.uint8),
                        NetworkConfig(kind=kind, shared_torso=True), NormalizeConfig())
    obs = torch.randint(0, 255, (3, 4, 84, 84), dtype=torch.uint8)
    dist, value = agent.forward_all(obs, torch.ones(3, 6, dtype=torch.bool), obs)
    assert dist.sample().shape == (3,) and value.shape == (3,)
    assert agent.shared


def test_nature_cnn_on_images_too_small_for_it_is_a_config_error() -> None:
    """36x36 is the smallest image its unpadded convolutions take (35 left nothing to flatten:
    a torch RuntimeError traceback); the Impala torso, padded, takes any size."""
    with pytest.raises(ConfigError, match=r"network.kind 'nature_cnn' needs images of at least "
                                          r"36x36; these are 20x20 \(raise the game's screen"):
        ActorCritic(spec((4, 20, 20), Discrete(6), "image", dtype=np.uint8),
                    NetworkConfig(kind="nature_cnn"), NormalizeConfig())
    for kind, side in (("nature_cnn", 36), ("impala_cnn", 20)):
        agent = ActorCritic(spec((4, side, side), Discrete(6), "image", dtype=np.uint8),
                            NetworkConfig(kind=kind), NormalizeConfig())
        obs = torch.zeros(2, 4, side, side, dtype=torch.uint8)
        assert agent.forward_all(obs, torch.ones(2, 6, dtype=torch.bool), obs)[1].shape == (2,)


def test_gridnet_for_grid_actions() -> None:
    space = MultiDiscrete((6, 4, 4, 4, 4, 7, 49), grid=(8, 8),
                          gates=(None, (1,), (2,), (3,), (4,), (4,), (5,)))
    agent = ActorCritic(spec((27, 8, 8), space, "grid", state_shape=(29, 8, 8)),
                        NetworkConfig(), NormalizeConfig())
    assert agent.kind == "gridnet" and agent.critic_reads_state
    obs, state = torch.rand(2, 27, 8, 8), torch.rand(2, 29, 8, 8)
    mask = torch.rand(2, 64, 78) > 0.5
    dist, value = agent.forward_all(obs, mask, state)
    action = dist.sample()
    assert action.shape == (2, 64, 7) and value.shape == (2,)
    assert torch.isfinite(dist.log_prob(action)).all()


def test_centralized_critic_reads_state() -> None:
    agent = ActorCritic(spec((5,), Discrete(3), state_shape=(11,)), NetworkConfig(kind="mlp"),
                        NormalizeConfig())
    assert agent.critic_reads_state
    assert agent.value(torch.rand(4, 11)).shape == (4,)
    obs_critic = ActorCritic(spec((5,), Discrete(3), state_shape=(11,)),
                             NetworkConfig(kind="mlp", critic_input="obs"), NormalizeConfig())
    assert not obs_critic.critic_reads_state
    with pytest.raises(ValueError, match="no global state"):
        ActorCritic(spec((5,), Discrete(3)), NetworkConfig(critic_input="state"),
                    NormalizeConfig())


def test_orthogonal_init_and_head_gains() -> None:
    agent = ActorCritic(spec((8,), Discrete(4)), NetworkConfig(kind="mlp"), NormalizeConfig())
    head = agent.actor_head.weight.detach()
    assert head.abs().max() < 0.05  # actor head gain 0.01
    hidden = agent.actor_torso[1].weight.detach()  # [64, 8]: orthonormal columns * sqrt(2)
    assert torch.allclose(hidden.T @ hidden, 2.0 * torch.eye(8), atol=1e-4)
    assert count_parameters(agent) > 0


@pytest.mark.parametrize("space,obs_dim", [
    (Discrete(5), 7), (Box((-1.0, -1.0, -1.0), (1.0, 1.0, 1.0)), 6),
    (MultiDiscrete((3, 4)), 4)])
@pytest.mark.parametrize("shared,activation", [(False, "tanh"), (True, "relu")])
def test_numpy_mirror_matches_torch(space: object, obs_dim: int, shared: bool,
                                    activation: str) -> None:
    torch.manual_seed(0)
    agent = ActorCritic(spec((obs_dim,), space), NetworkConfig(kind="mlp", shared_torso=shared,
                                                               activation=activation),
                        NormalizeConfig())
    for p in agent.parameters():  # make the heads non-trivial
        p.data.normal_(0, 0.5)
    assert supports(agent)
    mirror = NumpyActorCritic(agent)
    obs = np.random.default_rng(0).normal(size=(64, obs_dim)).astype(np.float32)
    mask = None
    if not isinstance(space, Box):
        n = space.n if isinstance(space, Discrete) else sum(space.nvec)
        mask = np.random.default_rng(1).random((64, n)) > 0.3
        firsts = [0] if isinstance(space, Discrete) else np.cumsum([0, *space.nvec[:-1]])
        mask[:, firsts] = True  # every component keeps a legal value
    action, logp, value = mirror.act(obs, mask, np.random.default_rng(2))
    obs_t = torch.from_numpy(obs)
    dist, value_t = agent.forward_all(obs_t, torch.from_numpy(mask) if mask is not None else None,
                                      obs_t)
    np.testing.assert_allclose(value, value_t.detach().numpy(), rtol=1e-4, atol=1e-5)
    expected_logp = dist.log_prob(torch.from_numpy(action)).detach().numpy()
    np.testing.assert_allclose(logp, expected_logp, rtol=1e-4, atol=1e-4)
    if mask is not None:
        flat = action.reshape(64, -1)
        offsets = np.concatenate([[0], np.cumsum(space.nvec)[:-1]]) if isinstance(
            space, MultiDiscrete) else np.array([0])
        assert mask[np.arange(64)[:, None], flat + offsets].all()


def test_mirror_refuses_unsupported() -> None:
    agent = ActorCritic(spec((5,), Discrete(3), state_shape=(9,)), NetworkConfig(kind="mlp"),
                        NormalizeConfig())
    assert not supports(agent)
    with pytest.raises(ValueError):
        NumpyActorCritic(agent)


def test_gridnet_shares_its_encoder_when_the_state_is_the_observation() -> None:
    """A fully observed grid game (state_is_obs): in auto mode the critic reads the obs, and
    with shared_torso its head sits on the actor's encoder (no second encoder)."""
    space = MultiDiscrete((6, 4, 4, 4, 4, 7, 49), grid=(8, 8),
                          gates=(None, (1,), (2,), (3,), (4,), (4,), (5,)))
    full = spec((27, 8, 8), space, "grid", state_shape=(27, 8, 8))
    full = dataclasses.replace(full, state_is_obs=True)
    shared = ActorCritic(full, NetworkConfig(shared_torso=True), NormalizeConfig())
    separate = ActorCritic(full, NetworkConfig(), NormalizeConfig())
    assert not shared.critic_reads_state and shared.shared
    assert not hasattr(shared, "critic_torso") and hasattr(separate, "critic_torso")
    assert count_parameters(shared) < count_parameters(separate)
    obs = torch.rand(3, 27, 8, 8)
    dist, value = shared.forward_all(obs, torch.rand(3, 64, 78) > 0.5, obs)
    assert value.shape == (3,)
    torch.testing.assert_close(value, shared.value_normalized(obs))
    value.sum().backward()  # the critic's gradient reaches the shared encoder
    assert shared.actor_torso.net[0].weight.grad is not None


@pytest.mark.parametrize("grid", [(48, 48), (9, 8), (5, 7)])
def test_unet_gridnet_plays_any_board_and_trains_every_layer(grid: tuple[int, int]) -> None:
    """``network.grid_skips``: logits for every cell of boards of any size (odd ones crop the
    upsampled maps to the encoder's), a finite loss, a gradient in every parameter."""
    h, w = grid
    space = MultiDiscrete((3, 4), grid=grid, gates=(None, (1,)))
    agent = ActorCritic(spec((5, h, w), space, "grid"),
                        NetworkConfig(channels=[8, 16, 16], hidden=[16], grid_skips=True,
                                      shared_torso=True), NormalizeConfig())
    obs = torch.rand(2, 5, h, w)
    dist, value = agent.forward_all(obs, torch.ones(2, h * w, 7, dtype=torch.bool), obs)
    action = dist.sample()
    assert action.shape == (2, h * w, 2) and value.shape == (2,)
    (dist.log_prob(action).sum() + value.sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.parameters())


def per_cell_accuracy(grid_skips: bool, steps: int = 200) -> float:
    """Train a gridnet for ``steps`` Adam steps to name, per cell, which of 3 planes is lit at
    that cell (32x32 boards): what a Lux policy must do for a unit's own cell."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    size = 32
    space = MultiDiscrete((3,), grid=(size, size))
    agent = ActorCritic(spec((3, size, size), space, "grid"),
                        NetworkConfig(channels=[16, 32, 32], hidden=[16], shared_torso=True,
                                      grid_skips=grid_skips), NormalizeConfig())

    def boards(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        lit = torch.randint(0, 3, (n, size, size), generator=gen)
        return torch.nn.functional.one_hot(lit, 3).permute(0, 3, 1, 2).float(), lit

    return fit_cells(agent, boards, steps)


def fit_cells(agent: ActorCritic,
              boards: Callable[[int], tuple[torch.Tensor, torch.Tensor]], steps: int) -> float:
    """Adam steps (8 boards each) on the per-cell cross-entropy of ``agent``'s logits against
    the labels ``boards`` draws; the accuracy on 8 fresh boards."""
    optim = torch.optim.Adam(agent.parameters(), lr=3e-3)
    for _ in range(steps):
        obs, label = boards(8)
        logits = agent.dist_params(obs)  # [B, cells, classes]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 label.reshape(-1))
        optim.zero_grad()
        loss.backward()
        optim.step()
    obs, label = boards(8)
    with torch.no_grad():
        return float((agent.dist_params(obs).argmax(-1) == label.reshape(8, -1)).float().mean())


def test_unet_sees_each_cell_where_the_plain_decoder_cannot() -> None:
    """Per-cell precision: the U-Net learns the identity of every cell's planes (measured:
    0.96 after 200 steps); the plain encoder-decoder, which reads every cell through a 4x4 map
    of the 32x32 board, stays at chance (0.33)."""
    assert per_cell_accuracy(True) > 0.9
    assert per_cell_accuracy(False) < 0.4


def test_a_squeezed_unet_head_still_reads_each_cell_and_old_networks_keep_their_weights() -> None:
    """``network.grid_head``: a 1x1 convolution before the logits' 3x3 one. Every cell's logits
    still read that cell's own planes at full resolution (a gradient path from each input cell
    to its logits), the network is smaller, and ``grid_head: 0`` keeps the weights' names of
    networks saved before the option (a checkpoint loads as before)."""
    size = 12
    space = MultiDiscrete((3, 4), grid=(size, size))
    game = spec((5, size, size), space, "grid")

    def net(head: int) -> ActorCritic:
        torch.manual_seed(0)
        return ActorCritic(game, NetworkConfig(channels=[16, 32], hidden=[16], shared_torso=True,
                                               grid_skips=True, grid_head=head),
                           NormalizeConfig())

    plain, squeezed = net(0), net(4)
    assert not any("squeeze" in key for key in plain.state_dict())
    assert any("squeeze" in key for key in squeezed.state_dict())
    assert sum(p.numel() for p in squeezed.parameters()) < sum(
        p.numel() for p in plain.parameters())
    obs = torch.rand(1, 5, size, size, requires_grad=True)
    logits = squeezed.dist_params(obs)  # [1, cells, 7]
    assert logits.shape == (1, size * size, 7)
    cell = 5 * size + 7
    (grad,) = torch.autograd.grad(logits[0, cell].sum(), obs)
    assert grad[0, :, 5, 7].abs().sum() > 0  # its own planes
    with pytest.raises(ConfigError, match="network.grid_head needs network.grid_skips"):
        build_config("microrts", overrides=["network.grid_head=8"])


@pytest.mark.parametrize(("grid", "head"), [
    ((9, 8), {}), ((12, 12), {"grid_head": 4}), ((7, 10), {"grid_hidden": 6}),
    ((7, 10), {"grid_cells": [12, 10]}), ((9, 8), {"grid_cells": [6], "grid_cell_radius": 0}),
    ((5, 11), {"grid_cells": [6], "grid_cell_radius": 2}),
    ((9, 8), {"grid_cells": [6], "grid_cell_pool": 2}),
    ((7, 10), {"grid_cells": [6, 5], "grid_cell_pool": 3}),
    ((9, 8), {"grid_cells": [6], "grid_cell_context": True}),
    ((7, 10), {"grid_cells": [6], "grid_cell_bins": 5})])
def test_unet_logits_of_legal_cells_only_match_the_full_convolution(
        grid: tuple[int, int], head: dict[str, object]) -> None:
    """A U-Net policy computes the logits of the cells with a legal value only
    (``GridDecoder.forward_rows``, ``CellDecoder.forward_rows``): log-probabilities,
    entropies, modes and every parameter's gradient are those of the logits computed over the
    whole board, corner and edge cells included (the convolutions' zero padding), from a dense
    mask or a compact one, and with no legal cell at all."""
    from selfplay.distributions import GridMaskIndex, make_dist

    h, w = grid
    space = MultiDiscrete((3, 4, 2), grid=grid, gates=(None, (1,), (2,)))
    agent = unet_agent(5, space, [8, 16], 16, head)
    obs = torch.rand(3, 5, h, w)
    mask = torch.rand(3, h * w, 9) > 0.5
    mask[:, torch.rand(h * w) > 0.3] = False  # most cells without a unit
    for corner in (0, w - 1, (h - 1) * w, h * w - 1):
        mask[1, corner] = True
    mask[2] = False  # a board without a legal cell

    def grads(loss: torch.Tensor) -> list[torch.Tensor]:
        agent.zero_grad()
        loss.backward()
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                for p in agent.parameters()]

    features = agent.actor_torso(obs)
    dense = make_dist(space, agent.params_from_features(obs, features), mask)
    actions = dense.sample()
    dense_out = [dense.log_prob(actions), dense.entropy(), dense.entropy(actions)]
    dense_grads = grads(sum(x.sum() for x in dense_out))
    for given in (mask, GridMaskIndex(mask, h * w).select(torch.arange(3))):
        rows = agent.dist(obs, given)
        assert rows.logits[0].shape[0] == int(mask.any(-1).sum())  # only the legal cells
        out = [rows.log_prob(actions), rows.entropy(), rows.entropy(actions)]
        for a, b in zip(out, dense_out, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert torch.equal(rows.mode(), dense.mode())
        for a, b in zip(grads(sum(x.sum() for x in out)), dense_grads, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert float(agent.dist(obs[2:], mask[2:]).log_prob(actions[2:]).detach()) == 0.0


def gated_step_accuracy(grid_hidden: int = 0, steps: int = 600, size: int = 12,
                        grid_cells: tuple[int, ...] = ()) -> float:
    """Train a U-Net for ``steps`` Adam steps to name, per cell, the neighbour (of 4) with the
    largest value of plane 0 where the cell's gate (plane 2) is on, else of plane 1: what a
    Lux robot does when its cargo decides whether it heads for ice or for home."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    space = MultiDiscrete((4,), grid=(size, size))
    agent = ActorCritic(spec((3, size, size), space, "grid"),
                        NetworkConfig(channels=[16, 32], hidden=[16], shared_torso=True,
                                      grid_skips=True, grid_hidden=grid_hidden,
                                      grid_cells=list(grid_cells)),
                        NormalizeConfig())

    def boards(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        planes = 0.1 + 0.9 * torch.rand(n, 3, size, size, generator=gen)  # off the board: 0
        planes[:, 2] = (planes[:, 2] > 0.55).float()
        pad = torch.nn.functional.pad(planes[:, :2], (1, 1, 1, 1))
        near = torch.stack([pad[:, :, :-2, 1:-1], pad[:, :, 1:-1, 2:], pad[:, :, 2:, 1:-1],
                            pad[:, :, 1:-1, :-2]], 2)  # [n, 2, up right down left, S, S]
        best = near.argmax(2)
        return planes, torch.where(planes[:, 2] > 0, best[:, 0], best[:, 1])

    return fit_cells(agent, boards, steps)


@pytest.mark.slow
def test_a_hidden_unet_head_lets_a_cell_gate_its_neighbours() -> None:
    """``network.grid_hidden``: with a hidden layer between the 3x3 convolution and the logits,
    a cell's own plane can decide which neighbouring values its logits follow (measured: 0.83
    after 600 steps, 0.96 after 1,200); the linear 3x3 head cannot gate them (0.62, and 0.65
    after 1,200 steps; chance 0.25). Slow (24 s): the cell head's test below learns the same
    task in the default suite."""
    hidden, linear = gated_step_accuracy(64), gated_step_accuracy(0)
    assert hidden > 0.75 and hidden - linear > 0.12


def test_a_hidden_unet_head_needs_the_skips() -> None:
    with pytest.raises(ConfigError, match="network.grid_hidden needs network.grid_skips"):
        build_config("microrts", overrides=["network.grid_hidden=8"])


def test_a_cell_head_gates_neighbours_and_replaces_the_unet_decoder() -> None:
    """``network.grid_cells``: an MLP of each cell's 3x3 neighbourhood of the input planes (and
    the encoder's coarser maps over it) learns the gated step as the U-Net's hidden head does
    (measured: 0.88 after 600 steps and 0.97 after 1,200, where the hidden head reaches 0.83
    and the linear one 0.62); it has no transposed convolutions, and the settings it replaces
    or needs are checked."""
    assert gated_step_accuracy(grid_cells=(64,)) > 0.8
    size = 12
    agent = ActorCritic(spec((3, size, size), MultiDiscrete((4,), grid=(size, size)), "grid"),
                        NetworkConfig(channels=[16, 32], hidden=[16], shared_torso=True,
                                      grid_skips=True, grid_cells=[8]), NormalizeConfig())
    assert not any(isinstance(m, torch.nn.ConvTranspose2d) for m in agent.modules())
    for settings, message in ((["network.grid_cells=[8]", "network.grid_skips=false"],
                               "network.grid_cells needs network.grid_skips"),
                              (["network.grid_cells=[8]", "network.grid_skips=true",
                                "network.grid_hidden=4"],
                               "network.grid_cells replaces the U-Net decoder"),
                              (["network.grid_cells=[0]", "network.grid_skips=true"],
                               "network.grid_cells: every hidden width must be > 0"),
                              (["network.grid_cells=[8]", "network.grid_skips=true",
                                "network.grid_cell_radius=-1"],
                               "network.grid_cell_radius must be >= 0"),
                              (["network.grid_skips=true", "network.grid_cell_pool=2"],
                               "network.grid_cell_pool needs network.grid_cells")):
        with pytest.raises(ConfigError, match=message):
            build_config("microrts", overrides=settings)


def board_count_accuracy(context: bool, steps: int = 600, size: int = 24) -> float:
    """Train a cell head for ``steps`` Adam steps to name, at every cell, whether the board
    has more lit cells on plane 0 than on plane 1 (2-6 of each, anywhere): a decision on the
    team as a whole, as a Lux factory's on the water of all its team's factories."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    space = MultiDiscrete((2,), grid=(size, size))
    agent = ActorCritic(spec((2, size, size), space, "grid"),
                        NetworkConfig(channels=[8, 16], hidden=[16], shared_torso=True,
                                      grid_skips=True, grid_cells=[32],
                                      grid_cell_context=context), NormalizeConfig())

    def boards(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        planes = torch.zeros(n, 2, size * size)
        more = torch.zeros(n, dtype=torch.long)
        for b in range(n):
            counts = torch.randperm(5, generator=gen)[:2] + 2  # two different counts
            cells = torch.randperm(size * size, generator=gen)[:int(counts.sum())]
            planes[b, 0, cells[:counts[0]]] = 1.0
            planes[b, 1, cells[counts[0]:]] = 1.0
            more[b] = int(counts[0] > counts[1])
        return planes.view(n, 2, size, size), more[:, None].expand(n, size * size)

    return fit_cells(agent, boards, steps)


def test_a_cell_head_with_board_context_decides_on_the_whole_board() -> None:
    """``network.grid_cell_context``: with the final map's mean and max over the board every
    cell reads counts no neighbourhood holds (measured: 0.92 after 600 steps); without it the
    cells far from the lit ones guess (0.68). It needs the cell head."""
    with_context, without = board_count_accuracy(True), board_count_accuracy(False)
    assert with_context > 0.85 and with_context - without > 0.15
    with pytest.raises(ConfigError, match="network.grid_cell_context needs network.grid_cells"):
        build_config("microrts", overrides=["network.grid_cell_context=true"])


def threshold_accuracy(bins: int, steps: int = 300, size: int = 12) -> float:
    """Train a cell head for ``steps`` Adam steps to name, at every cell, which quarter of
    [0, 1] its number (a uint8 plane, as Lux's cargo and water) lies in, odd or even, where
    every number lies 1-6 steps of 255 from a quarter's edge: a scripted teacher's thresholds
    (home at half the cargo) with the numbers where the decisions are made."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    space = MultiDiscrete((2,), grid=(size, size))
    game = dataclasses.replace(spec((1, size, size), space, "grid", dtype=np.uint8),
                               obs_scale=1.0 / 255.0)
    agent = ActorCritic(game, NetworkConfig(channels=[8, 16], hidden=[16], shared_torso=True,
                                            grid_skips=True, grid_cells=[32],
                                            grid_cell_bins=bins), NormalizeConfig())

    def boards(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        edge = torch.tensor([63.75, 127.5, 191.25])[torch.randint(0, 3, (n, size * size),
                                                                   generator=gen)]
        away = torch.randint(1, 7, (n, size * size), generator=gen) - 0.5
        side = torch.randint(0, 2, (n, size * size), generator=gen) * 2 - 1
        value = torch.round(edge + side * away).clamp(0, 255)
        quarter = torch.floor(value / 255.0 * 4).clamp(max=3).long()
        return value.to(torch.uint8).view(n, 1, size, size), quarter % 2

    return fit_cells(agent, boards, steps)


def test_binned_numbers_let_a_cell_head_learn_thresholds() -> None:
    """``network.grid_cell_bins``: with each cell's number one-hot in 4 bins the head names
    the quarters at once (measured: 1.00 after 300 steps); reading the number's value alone
    it learns a slope across each edge, not a step, and guesses at the numbers close to
    them (0.51, chance). It needs the cell head."""
    binned, plain = threshold_accuracy(4), threshold_accuracy(0)
    assert binned > 0.95 and binned - plain > 0.2
    with pytest.raises(ConfigError, match="network.grid_cell_bins needs network.grid_cells"):
        build_config("microrts", overrides=["network.grid_cell_bins=8"])


def test_the_pooled_critic_follows_the_encoders_average_pooling() -> None:
    """``network.grid_cell_pool``: the encoder's stages read the board pooled, so the critic's
    on-board mask is pooled the same way before the stages' max-pools: a feature cell counts
    when any board cell under it is on the board."""
    from selfplay.grid_networks import BoardPool, GridEncoder

    board = torch.zeros(1, 2, 6, 6)
    board[:, 0, :, 3:] = 1.0  # plane 0: padding right of column 2
    head = BoardPool(channels=4, hidden=8, stages=1, pad_plane=0, pool=2)
    on = head.on_board(board)
    assert on is not None and on.shape == (1, 1, 2, 2)
    # pooled by 2: columns {0,1} {2,3} on, {4,5} off; the stage's 3x3 max-pool: both on
    assert on.flatten().tolist() == [1.0, 1.0, 1.0, 1.0]
    features = GridEncoder(2, [4], skips=True, pool=2)(board)
    assert features.final.shape[-2:] == on.shape[-2:]  # type: ignore[union-attr]
    wide = torch.zeros(1, 2, 6, 12)
    wide[:, 0, :, 2:] = 1.0  # only columns 0-1 on the board
    on = BoardPool(channels=4, hidden=8, stages=1, pad_plane=0, pool=2).on_board(wide)
    assert on is not None and on.flatten().tolist() == [1.0, 0.0, 0.0] * 2


def test_a_shared_cell_head_network_pools_its_critics_board_mask_as_its_encoder() -> None:
    """Through :class:`ActorCritic`: with a padding plane and ``grid_cell_pool: 2`` the shared
    encoder's maps are pooled, and so is the critic's on-board mask (its shape follows them)."""
    from selfplay.grid_networks import BoardPool

    size = 12
    base = spec((3, size, size), MultiDiscrete((4,), grid=(size, size)), "grid")
    padded = dataclasses.replace(base, pad_plane=0)
    torch.manual_seed(0)
    agent = ActorCritic(padded, NetworkConfig(channels=[8, 16], hidden=[8], shared_torso=True,
                                              grid_skips=True, grid_cells=[8],
                                              grid_cell_pool=2, grid_critic="pool"),
                        NormalizeConfig())
    obs = torch.rand(2, 3, size, size)
    obs[:, 0] = 0.0
    obs[1, 0, :, 8:] = 1.0  # board 1: columns 8-11 are padding
    on = agent.critic_head.on_board(obs)
    final = agent.actor_torso(obs).final  # type: ignore[union-attr]
    assert on is not None and on.shape[-2:] == final.shape[-2:]
    unpooled = BoardPool(channels=16, hidden=8, stages=2, pad_plane=0, pool=1).on_board(obs)
    assert unpooled is not None and unpooled.shape[-2:] != final.shape[-2:]
    value = agent.value(obs)
    assert value.shape == (2,) and torch.isfinite(value).all()


def test_ignored_planes_reach_neither_the_actor_nor_the_cell_head() -> None:
    """``network.ignore_planes``: the named planes are zeroed at the actor's input (logits and
    value do not move when they change; another plane's change moves them); the weights are
    the same tensors as without them, so either network loads the other's state; a name the
    game lacks or a game without plane names is a one-line error."""
    size, names = 9, ("ice", "queued_dig", "unit_ice")
    space = MultiDiscrete((3, 4), grid=(size, size), gates=(None, (1,)))
    named = dataclasses.replace(spec((3, size, size), space, "grid", dtype=np.uint8),
                                obs_scale=1 / 255, plane_names=names, state_is_obs=True,
                                state_shape=(3, size, size))
    config = NetworkConfig(channels=[8, 16], hidden=[16], shared_torso=True, grid_skips=True,
                           grid_cells=[16])
    torch.manual_seed(0)
    agent = ActorCritic(named, dataclasses.replace(config, ignore_planes=["queued_dig"]),
                        NormalizeConfig())
    plain = ActorCritic(named, config, NormalizeConfig())
    plain.load_state_dict(agent.state_dict())  # strict: no buffer of its own is saved
    obs = torch.randint(0, 256, (2, 3, size, size), dtype=torch.uint8)
    mask = torch.ones(2, size * size, 7, dtype=torch.bool)

    action = torch.randint(0, 3, (2, size * size, 2))

    def outputs(net: ActorCritic, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dist, value = net.forward_all(x, mask, x)
        return dist.log_prob(action), dist.entropy(), value

    base = outputs(agent, obs)
    changed = obs.clone()
    changed[:, 1] = 255 - changed[:, 1]
    for a, b in zip(base, outputs(agent, changed), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(outputs(plain, obs), outputs(plain, changed), strict=True):
        assert not torch.equal(a, b)  # the same weights read the plane when it is not ignored
    other = obs.clone()
    other[:, 2] = 255 - other[:, 2]
    assert not torch.equal(base[0], outputs(agent, other)[0])
    with pytest.raises(ValueError, match="test has no plane 'queued_move' \\(its planes: ice, "):
        ActorCritic(named, dataclasses.replace(config, ignore_planes=["queued_move"]),
                    NormalizeConfig())
    with pytest.raises(ValueError, match="test's observation planes have no names"):
        ActorCritic(dataclasses.replace(named, plane_names=None),
                    dataclasses.replace(config, ignore_planes=["ice"]), NormalizeConfig())
    with pytest.raises(ValueError, match="ignore_planes needs network.kind gridnet, not 'mlp'"):
        ActorCritic(spec((4,), Discrete(2)), NetworkConfig(ignore_planes=["x"]),
                    NormalizeConfig())


@pytest.mark.parametrize("head", [{}, {"grid_cells": [32], "grid_cell_context": True,
                                       "grid_cell_bins": 8}])
def test_the_legal_cells_gradients_repeat_bit_for_bit_on_two_threads(
        head: dict[str, object]) -> None:
    """``forward_rows`` gathers neighbourhoods, map cells and boards that repeat, for rows in
    any order; their gradients add up in one order however the CPU's threads run (indexing's
    backward did not: with rows out of order two backward passes differed in the last bits,
    and a seed's Lux cloning run did not repeat across processes)."""
    h = w = 48
    space = MultiDiscrete((3, 4), grid=(h, w), gates=(None, (1,)))
    agent = unet_agent(8, space, [32, 64], 32, head)
    obs = torch.rand(32, 8, h, w)
    rows = torch.randperm(32 * h * w)[:3000]  # duplicates in every gather, out of order
    weight = torch.rand(3000, 7)

    def grads() -> list[torch.Tensor]:
        agent.zero_grad()
        logits = agent.actor_head.forward_rows(agent.actor_torso(obs), rows)
        (logits * weight).sum().backward()
        return [p.grad.clone() for p in agent.parameters() if p.grad is not None]

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first = grads()
        for _ in range(4):
            for a, b in zip(grads(), first, strict=True):
                assert torch.equal(a, b)
    finally:
        torch.set_num_threads(threads)


def test_an_mlp_on_uint8_planes_is_a_one_line_error() -> None:
    """Guards: ``network.kind=mlp`` on Lux (uint8 board planes) failed at the first forward
    pass, after the engine compiled, with torch's dtype error."""
    from games.registry import make_game

    game = make_game("pettingzoo/pong_v3", 1, 0)
    spec = game.spec
    game.close()
    config = build_config("pettingzoo/pong_v3", overrides=["network.kind=mlp"])
    with pytest.raises(ConfigError, match=r"network.kind 'mlp' reads float features; "
                                          r"pettingzoo/pong_v3's observations are uint8 image "
                                          r"planes .*use auto, nature_cnn or impala_cnn"):
        ActorCritic(spec, config.network, config.normalize)
    normalized = build_config("pettingzoo/pong_v3", overrides=["network.kind=mlp",
                                                               "normalize.obs=true"])
    ActorCritic(spec, normalized.network, normalized.normalize)  # floats reach the torso
