"""GAE, the clipped PPO loss and explained variance against hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from selfplay.losses import explained_variance, gae, ppo_loss

GAMMA, LAM = 0.9, 0.8  # gamma * lam = 0.72

# T=4, N=2; dones[t] = the episode ended after step t
REWARDS = [[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [1.0, 3.0]]
VALUES = [[0.5, 1.0], [1.0, 0.0], [0.2, 0.5], [0.4, 1.5]]
DONES = [[0, 1], [1, 0], [0, 0], [0, 1]]
LAST_VALUES = [2.0, -1.0]

# By hand, delta_t = r_t + 0.9 * V_{t+1} * (1 - d_t) - V_t, A_t = delta_t + 0.72 (1 - d_t) A_{t+1}
# env 0 (ends after t=1):
#   t=3: delta = 1 + 0.9*2.0 - 0.4 = 2.4                       A = 2.4
#   t=2: delta = 2 + 0.9*0.4 - 0.2 = 2.16                      A = 2.16 + 0.72*2.4 = 3.888
#   t=1: done, delta = 0 - 1.0 = -1.0                          A = -1.0
#   t=0: delta = 1 + 0.9*1.0 - 0.5 = 1.4                       A = 1.4 + 0.72*(-1.0) = 0.68
# env 1 (ends after t=0 and after t=3):
#   t=3: done, delta = 3 - 1.5 = 1.5                           A = 1.5
#   t=2: delta = 0 + 0.9*1.5 - 0.5 = 0.85                      A = 0.85 + 0.72*1.5 = 1.93
#   t=1: delta = 1 + 0.9*0.5 - 0.0 = 1.45                      A = 1.45 + 0.72*1.93 = 2.8396
#   t=0: done, delta = 0 - 1.0 = -1.0                          A = -1.0
EXPECTED_ADV = [[0.68, -1.0], [-1.0, 2.8396], [3.888, 1.93], [2.4, 1.5]]
EXPECTED_RET = [[1.18, 0.0], [0.0, 2.8396], [4.088, 2.43], [2.8, 3.0]]  # A + V


def _t(x: list, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(x, dtype=dtype)


def test_gae_matches_hand_computed_values() -> None:
    adv, ret = gae(_t(REWARDS), _t(VALUES), _t(DONES, torch.bool), _t(LAST_VALUES), GAMMA, LAM)
    torch.testing.assert_close(adv, _t(EXPECTED_ADV), atol=1e-5, rtol=0)
    torch.testing.assert_close(ret, _t(EXPECTED_RET), atol=1e-5, rtol=0)


def test_gae_equals_discounted_sum_of_deltas_within_episodes() -> None:
    """The non-recursive form A_t = sum_l (gamma lam)^l delta_{t+l}, stopping at episode ends."""
    gen = torch.Generator().manual_seed(0)
    steps, envs = 9, 3
    rewards = torch.randn(steps, envs, generator=gen, dtype=torch.float64)
    values = torch.randn(steps, envs, generator=gen, dtype=torch.float64)
    dones = torch.rand(steps, envs, generator=gen) < 0.3
    last = torch.randn(envs, generator=gen, dtype=torch.float64)
    adv, _ = gae(rewards, values, dones.float(), last, GAMMA, LAM)
    for n in range(envs):
        for t in range(steps):
            total, scale = 0.0, 1.0
            for s in range(t, steps):
                nxt = last[n] if s == steps - 1 else values[s + 1, n]
                end = bool(dones[s, n])
                delta = rewards[s, n] + GAMMA * nxt * (0.0 if end else 1.0) - values[s, n]
                total += scale * float(delta)
                if end:
                    break
                scale *= GAMMA * LAM
            assert adv[t, n].item() == pytest.approx(total, abs=1e-9)


def test_gae_truncation_bootstrap_through_the_reward() -> None:
    """done + gamma * V(final_obs) in the reward = the episode continuing with that value."""
    rewards = _t([[1.0], [2.0]])
    values = _t([[0.3], [0.6]])
    v_final = 5.0
    cont_adv, _ = gae(rewards, values, _t([[0.0], [0.0]]), _t([v_final]), GAMMA, LAM)
    trunc_rewards = rewards.clone()
    trunc_rewards[1, 0] += GAMMA * v_final
    trunc_adv, _ = gae(trunc_rewards, values, _t([[0.0], [1.0]]), _t([-99.0]), GAMMA, LAM)
    torch.testing.assert_close(trunc_adv, cont_adv)


def test_a_cut_chain_bootstraps_from_the_cut_steps_value() -> None:
    """``cut[t0]``: the steps before t0 get the advantages of a rollout ending at t0 with
    ``V_{t0}`` as its bootstrap, t0 gets 0, and nothing at or after t0 (rewards, values, the
    last values) reaches them; columns without a cut are unchanged."""
    gen = torch.Generator().manual_seed(1)
    steps, cols, t0 = 7, 3, 4
    rewards = torch.randn(steps, cols, generator=gen, dtype=torch.float64)
    values = torch.randn(steps, cols, generator=gen, dtype=torch.float64)
    dones = torch.zeros(steps, cols)
    dones[1, 2] = 1.0
    last = torch.randn(cols, generator=gen, dtype=torch.float64)
    cut = torch.zeros(steps, cols, dtype=torch.bool)
    cut[t0, 0] = cut[t0, 2] = True
    adv, ret = gae(rewards, values, dones, last, GAMMA, LAM, cut)
    short, _ = gae(rewards[:t0], values[:t0], dones[:t0], values[t0], GAMMA, LAM)
    full, _ = gae(rewards, values, dones, last, GAMMA, LAM)
    torch.testing.assert_close(adv[:t0, [0, 2]], short[:, [0, 2]])
    torch.testing.assert_close(adv[:, 1], full[:, 1])  # no cut
    assert adv[t0, 0] == 0.0 and ret[t0, 0] == values[t0, 0]
    later = rewards.clone()
    later[t0:, 0] += 100.0
    moved, _ = gae(later, values, dones, last + 100.0, GAMMA, LAM, cut)
    torch.testing.assert_close(moved[:t0, 0], adv[:t0, 0])


def test_a_seat_waiting_at_the_rollouts_end_has_its_last_move_cut() -> None:
    """Turn-based seats (:func:`selfplay.losses.waiting_at_the_end`): a seat that waits
    after the rollout, its game going on since its last move, has that move cut; one whose
    game ended after it, one that acts next, and one that never moved have none."""
    from selfplay.losses import waiting_at_the_end

    moves = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1], [1, 0], [0, 1]], dtype=torch.bool)
    trained = torch.cat([moves, moves, torch.zeros(6, 1, dtype=torch.bool)], 1)  # [6, 5]
    dones = torch.zeros(6, 5, dtype=torch.bool)
    dones[5, 2:4] = True  # columns 2 and 3: their game ended after the last step
    acts_next = torch.tensor([True, False, True, False, False])
    cut = waiting_at_the_end(trained, dones, acts_next)
    assert cut.nonzero().tolist() == [[5, 1]]
    dones[4, 1] = True  # the game ended after the other seat's move, since column 1's
    assert waiting_at_the_end(trained, dones, acts_next).nonzero().tolist() == [[5, 1]]
    dones[5, 1] = True
    assert not waiting_at_the_end(trained, dones, acts_next).any()


def test_a_seat_out_of_its_episode_bootstraps_nothing() -> None:
    """Not turn-based (:func:`selfplay.losses.idle_at_the_end`): a seat that does not act
    after the rollout is out of its episode until it ends: no cut, a bootstrap value of 0
    (it was the critic's output on a position it never trains on); a turn-based game keeps
    the values and cuts."""
    from selfplay.losses import idle_at_the_end

    trained = torch.tensor([[True, True], [True, False], [True, False]])
    dones = torch.zeros(3, 2, dtype=torch.bool)
    acts_next = torch.tensor([True, False])
    last = torch.tensor([0.5, -0.7])
    cut, values = idle_at_the_end(trained, dones, acts_next, last, turn_based=False)
    assert cut is None and values.tolist() == [0.5, 0.0]
    cut, values = idle_at_the_end(trained, dones, acts_next, last, turn_based=True)
    assert cut is not None and cut.nonzero().tolist() == [[0, 1]]
    assert values.tolist() == pytest.approx([0.5, -0.7])


def test_gae_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="last_values"):
        gae(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3), 0.9, 0.9)


# --------------------------------------------------------------------------- PPO

RATIOS = [0.5, 0.5, 1.1, 1.5]
ADV = [1.0, -1.0, 1.0, -1.0]
# max(-A r, -A clip(r, 0.8, 1.2)):
#   r=0.5, A=+1: max(-0.5, -0.8) = -0.5
#   r=0.5, A=-1: max( 0.5,  0.8) =  0.8   (clipped)
#   r=1.1, A=+1: max(-1.1, -1.1) = -1.1
#   r=1.5, A=-1: max( 1.5,  1.2) =  1.5
PG_LOSS = (-0.5 + 0.8 - 1.1 + 1.5) / 4  # 0.175
NEW_V = [0.5, -0.5, 0.1, 2.0]
OLD_V = [0.0, 0.0, 0.0, 0.0]
RETURNS = [1.0, 1.0, 0.0, 0.0]
# unclipped (V - R)^2 = [0.25, 2.25, 0.01, 4.0]; V_clipped = [0.2, -0.2, 0.1, 0.2]
# clipped (Vc - R)^2 = [0.64, 1.44, 0.01, 0.04]; max = [0.64, 2.25, 0.01, 4.0]
V_LOSS_CLIPPED = 0.5 * (0.64 + 2.25 + 0.01 + 4.0) / 4  # 0.8625
V_LOSS_PLAIN = 0.5 * (0.25 + 2.25 + 0.01 + 4.0) / 4  # 0.81375
ENTROPY = [1.0, 2.0, 3.0, 4.0]  # mean 2.5


def _ppo(**overrides: object) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    kwargs: dict = dict(
        new_log_prob=torch.log(_t(RATIOS)),
        old_log_prob=torch.zeros(4),
        advantages=_t(ADV),
        new_values=_t(NEW_V),
        old_values=_t(OLD_V),
        returns=_t(RETURNS),
        entropy=_t(ENTROPY),
        clip_coef=0.2,
        clip_vloss=True,
        vf_coef=0.5,
        ent_coef=0.01,
        norm_adv=False,
    )
    kwargs.update(overrides)
    return ppo_loss(**kwargs)


def test_ppo_loss_matches_hand_computed_clipping() -> None:
    loss, stats = _ppo()
    assert stats["policy_loss"].item() == pytest.approx(PG_LOSS, abs=1e-6)
    assert stats["value_loss"].item() == pytest.approx(V_LOSS_CLIPPED, abs=1e-6)
    assert stats["entropy"].item() == pytest.approx(2.5)
    assert loss.item() == pytest.approx(PG_LOSS - 0.01 * 2.5 + 0.5 * V_LOSS_CLIPPED, abs=1e-6)
    assert stats["clip_frac"].item() == pytest.approx(0.75)  # |r - 1| > 0.2 for 0.5, 0.5, 1.5
    kl = sum((r - 1) - math.log(r) for r in RATIOS) / 4
    assert stats["approx_kl"].item() == pytest.approx(kl, abs=1e-6)

    _, plain = _ppo(clip_vloss=False)
    assert plain["value_loss"].item() == pytest.approx(V_LOSS_PLAIN, abs=1e-6)


def test_ppo_clipped_samples_get_no_policy_gradient() -> None:
    new_lp = torch.log(_t(RATIOS)).requires_grad_(True)
    loss, _ = _ppo(new_log_prob=new_lp, ent_coef=0.0, vf_coef=0.0)
    loss.backward()
    assert new_lp.grad is not None
    # d/dlogp of -A r / 4 = -A r / 4 where unclipped; 0 where the clipped term is the max
    torch.testing.assert_close(new_lp.grad, _t([-0.5 / 4, 0.0, -1.1 / 4, 1.5 / 4]))


def test_ppo_weights_drop_padded_samples() -> None:
    weights = _t([1.0, 1.0, 1.0, 0.0])
    loss_w, stats_w = _ppo(weights=weights, norm_adv=True)
    loss_s, stats_s = ppo_loss(
        torch.log(_t(RATIOS[:3])),
        torch.zeros(3),
        _t(ADV[:3]),
        _t(NEW_V[:3]),
        _t(OLD_V[:3]),
        _t(RETURNS[:3]),
        _t(ENTROPY[:3]),
        clip_coef=0.2,
        clip_vloss=True,
        vf_coef=0.5,
        ent_coef=0.01,
        norm_adv=True,
    )
    assert loss_w.item() == pytest.approx(loss_s.item(), abs=1e-6)
    for key in stats_s:
        assert stats_w[key].item() == pytest.approx(stats_s[key].item(), abs=1e-6), key


def test_ppo_advantage_normalization() -> None:
    adv = _t([1.0, 2.0, 3.0, 6.0])
    _, stats = _ppo(new_log_prob=torch.zeros(4), advantages=adv, norm_adv=True)
    normed = (adv - 3.0) / (adv.std() + 1e-8)  # unbiased std, as CleanRL
    assert stats["policy_loss"].item() == pytest.approx(-normed.mean().item(), abs=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_ppo_minibatch_of_one_is_finite(weighted: bool) -> None:
    one = torch.ones(1)
    loss, stats = ppo_loss(
        one * -0.1,
        one * -0.2,
        one * 3.0,
        one,
        one,
        one,
        one,
        clip_coef=0.2,
        clip_vloss=True,
        vf_coef=0.5,
        ent_coef=0.01,
        norm_adv=True,
        weights=one if weighted else None,
    )
    assert torch.isfinite(loss)
    assert all(torch.isfinite(v) for v in stats.values())
    ratio = math.exp(0.1)
    assert stats["policy_loss"].item() == pytest.approx(-3.0 * ratio, abs=1e-5)  # unnormalized


def test_explained_variance() -> None:
    target = np.array([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target) == pytest.approx(1.0)
    assert explained_variance(np.full(4, 2.5), target) == pytest.approx(0.0)
    pred = torch.tensor([1.5, 1.5, 3.5, 3.5])
    expected = 1.0 - np.var(target - pred.numpy()) / np.var(target)
    assert explained_variance(pred, torch.from_numpy(target)) == pytest.approx(expected)
    assert math.isnan(explained_variance(pred, torch.ones(4)))


def test_a_time_limit_bootstraps_only_the_seats_that_acted() -> None:
    """Guards (review): a truncated game added ``gamma * V(final obs)`` to every seat,
    a seat already out of its game (a PettingZoo player without lives) included: its value
    there (of a position the critic never trains on) reached its last move's advantage
    through the idle steps (lam 1), A = 2.28 where nothing more came to it (A = -1)."""
    import numpy as np

    from games.core import Batch, EpisodeStats
    from selfplay.losses import bootstrap_truncated

    e, a = 2, 2
    batch = Batch(obs=np.zeros((e, a, 1), np.float32), action_mask=None, state=None,
                  reward=np.zeros((e, a), np.float32),
                  terminated=np.array([False, False]), truncated=np.array([True, False]),
                  alive=np.ones((e, a), bool), episodes=EpisodeStats.empty(),
                  final_obs=np.zeros((e, a, 1), np.float32))

    def value(obs: np.ndarray, state: np.ndarray | None) -> torch.Tensor:
        return torch.full((obs.shape[0] * obs.shape[1],), 5.0)

    reward = np.zeros((e, a), np.float32)
    bootstrap_truncated(batch, reward, 0.9, value, acted=np.array([[True, False],
                                                                   [True, True]]))
    assert reward.tolist() == [[pytest.approx(4.5), 0.0], [0.0, 0.0]]
    reward = np.zeros((e, a), np.float32)
    bootstrap_truncated(batch, reward, 0.9, value)  # turn-based: every seat
    assert reward.tolist() == [[pytest.approx(4.5), pytest.approx(4.5)], [0.0, 0.0]]


def test_a_lost_step_after_a_game_ended_adds_no_bootstrap() -> None:
    """Guards (review): recollecting steps lost with a worker bootstrapped the step before
    them from the lost step's value even where that step had ended its game (the lost step's
    observation was the next game's first): a terminal reward 1.0 became 3.7."""
    from dataclasses import replace

    from games.registry import make_game
    from selfplay.rollout import RolloutBuffer

    game = make_game("CartPole-v1", 1, 0)
    spec = replace(game.spec, num_envs=2)
    game.close()
    buf = RolloutBuffer(spec, 4, torch.float32, None, torch.float32)
    buf.rewards[1] = 1.0
    buf.dones[1, 0] = 1.0  # env 0's game ended at step 1; env 1's goes on
    buf.values[2] = 3.0
    buf.drop_steps(slice(0, 2), [2], gamma=0.9)
    assert buf.rewards[1, :, 0].tolist() == pytest.approx([1.0, 1.0 + 0.9 * 3.0])
    assert buf.dones[1, :, 0].tolist() == [1.0, 1.0]
