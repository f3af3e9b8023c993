"""Fast, vectorized, action-masked torch distributions for every :mod:`games.core` action space.

No ``torch.distributions`` objects: argument validation and one object per component are slow.
Everything here is raw ``log_softmax`` / ``softmax`` / ``gather`` plus inverse-CDF sampling, which
needs one uniform draw per categorical (not one per logit, like Gumbel-max) and is the fastest
sampler on CPU.

Masks are bool, ``True`` = legal. Conventions shared by all masked distributions:

- illegal logits are replaced by ``NEG_LOGIT`` (-1e8, not ``-inf``), so gradients stay finite and
  illegal probabilities are exactly 0; sampling never returns an illegal value;
- entropy counts only legal values (renormalized over them);
- a categorical with no legal value (a row, a component or a grid cell whose mask is all False)
  yields action 0 and contributes 0 to ``log_prob`` and ``entropy``;
- ``log_prob`` of an *illegal* value is about ``-1e8`` (finite), a sign of a bookkeeping bug.

Grid actions (``MultiDiscrete`` with ``cells``) take logits ``[B, cells, sum(nvec)]`` (cell-major:
a gridnet head's ``[B, sum(nvec), H, W]`` output permuted to ``[B, H, W, sum(nvec)]`` and
reshaped), or the same flattened to ``[B, cells * sum(nvec)]``. Cells with no legal value at all
(in microRTS: every cell without an own unit, usually > 90%) are dropped before any math, which
makes the grid case fast.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from games.core import ActionSpace, Box, Discrete, MultiDiscrete

NEG_LOGIT = -1e8  # what illegal logits become; exp() of it (minus the lse) is exactly 0
_LOG_2PI = math.log(2.0 * math.pi)

__all__ = [
    "NEG_LOGIT",
    "ActionDist",
    "CompactGridMask",
    "compact_grid_mask",
    "DiagGaussian",
    "GridMaskIndex",
    "MaskedCategorical",
    "MaskedMultiCategorical",
    "make_dist",
    "num_params",
    "param_shape",
]


class ActionDist(Protocol):
    """A batch of ``B`` action distributions."""

    def sample(self, generator: torch.Generator | None = None,
               temperature: float = 1.0) -> Tensor:
        """Actions ``[B, *action_shape]`` (int64 for discrete spaces), detached; drawn from
        the distribution sharpened (``temperature`` < 1) or flattened (> 1): categorical
        logits divided by it, a Gaussian's standard deviation multiplied by it."""
        ...

    def mode(self) -> Tensor:
        """The most likely (deterministic) action ``[B, *action_shape]``."""
        ...

    def log_prob(self, actions: Tensor) -> Tensor:
        """Log-probability ``[B]`` of ``actions`` ``[B, *action_shape]``."""
        ...

    def entropy(self, actions: Tensor | None = None) -> Tensor:
        """Entropy ``[B]``; ``actions`` only matters for gated multi-discrete spaces."""
        ...


# --------------------------------------------------------------------------- helpers


def _as_bool(mask: Tensor) -> Tensor:
    return mask if mask.dtype == torch.bool else mask.to(torch.bool)


def _as_float(logits: Tensor) -> Tensor:
    """Distributions compute in float32 at least (half-precision logits would overflow -1e8)."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


def _any(mask: Tensor) -> Tensor:
    """``mask.any(-1)`` for bool ``mask``, several times faster on CPU.

    Bool ``any`` over a short last dim is slow; instead each row's bytes are read as the widest
    integers that tile it (a bool byte is 0 or 1, so a word is non-zero iff one of its bytes is)
    and reduced with ``amax``, which needs no dtype conversion.
    """
    n = mask.shape[-1]
    if n == 0:
        return mask.new_zeros(mask.shape[:-1])
    raw = mask.contiguous().view(torch.uint8)
    for word, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if n % size == 0 and raw.storage_offset() % size == 0:
            return raw.view(word).amax(-1) != 0
    return raw.amax(-1) != 0


def _checked(temperature: float) -> float:
    """``temperature`` when it is a positive finite number, else a :class:`ValueError`."""
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"a sampling temperature must be > 0, got {temperature}")
    return float(temperature)


def _sample_rows(
    probs: Tensor,  # [R, n] rows summing to ~1, exactly 0 where illegal
    mask: Tensor | None,  # bool [R, n]
    mode: Tensor,  # int64 [R] always-legal fallback
    generator: torch.Generator | None,
) -> Tensor:
    """One inverse-CDF draw per row: ``#{j : cdf_j <= u * cdf_last}`` is the drawn index.

    With ``u < 1`` the threshold is below the last legal entry's cdf, and a zero-probability
    entry never starts the first cdf step above the threshold, so the draw is legal. Rounding in
    a parallel (GPU) cumsum could in theory break that by one ulp; such draws fall back to the
    mode, as do rows with no legal value (whose mode is 0).
    """
    cdf = probs.cumsum(-1)  # [R, n]
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=probs.dtype)
    idx = (cdf <= u * cdf[:, -1:]).sum(-1).clamp_(max=probs.shape[-1] - 1)  # [R]
    if mask is None:
        return idx
    legal = mask.gather(-1, idx[:, None])[:, 0]
    return torch.where(legal, idx, mode)


@lru_cache(maxsize=64)
def _gate_table(
    nvec: tuple[int, ...], gates: tuple[tuple[int, ...] | None, ...], device: torch.device
) -> Tensor:
    """bool ``[nvec[0], k]``: ``table[t, i]`` iff action type ``t`` uses component ``i``."""
    table = torch.ones((nvec[0], len(nvec)), dtype=torch.bool)
    for i, used_by in enumerate(gates):
        if i > 0 and used_by is not None:
            table[:, i] = False
            table[list(used_by), i] = True
    return table.to(device)


@lru_cache(maxsize=64)
def _segment_matrix(nvec: tuple[int, ...], device: torch.device, dtype: torch.dtype) -> Tensor:
    """``[sum(nvec), k]`` one-hot of each flat column's component (per-component sums by matmul)."""
    comp = torch.repeat_interleave(torch.arange(len(nvec)), torch.tensor(nvec))
    return torch.nn.functional.one_hot(comp, len(nvec)).to(device=device, dtype=dtype)


# --------------------------------------------------------------------------- Discrete


class MaskedCategorical:
    """Categorical over ``n`` values with an optional legal-action mask.

    ``logits [B, n]``, ``mask`` bool ``[B, n]`` or ``None`` (all legal).
    """

    def __init__(self, logits: Tensor, mask: Tensor | None = None) -> None:
        logits = _as_float(logits)
        self.mask = None if mask is None else _as_bool(mask)
        if self.mask is not None:
            logits = torch.where(self.mask, logits, NEG_LOGIT)
        self.logits = logits  # [B, n] masked
        self.log_probs = logits.log_softmax(-1)  # [B, n]
        self.has_legal = None if self.mask is None else _any(self.mask)  # [B]
        self._probs: Tensor | None = None

    @property
    def probs(self) -> Tensor:
        """``[B, n]``; from ``softmax`` (``exp`` of -1e8 takes a slow denormal path on CPU)."""
        if self._probs is None:
            self._probs = self.logits.softmax(-1)
        return self._probs

    def mode(self) -> Tensor:
        return self.logits.argmax(-1)  # an all-masked row is all equal: argmax is 0

    def sample(self, generator: torch.Generator | None = None,
               temperature: float = 1.0) -> Tensor:
        with torch.no_grad():
            probs = (self.probs if temperature == 1.0 else
                     (self.logits / _checked(temperature)).softmax(-1))
            return _sample_rows(probs, self.mask, self.mode(), generator)

    def log_prob(self, actions: Tensor) -> Tensor:
        lp = self.log_probs.gather(-1, actions.long()[:, None])[:, 0]  # [B]
        return lp if self.has_legal is None else torch.where(self.has_legal, lp, 0.0)

    def entropy(self, actions: Tensor | None = None) -> Tensor:
        ent = -(self.probs * self.log_probs).sum(-1)  # [B]; illegal terms are 0 * -1e8 = 0
        return ent if self.has_legal is None else torch.where(self.has_legal, ent, 0.0)


# --------------------------------------------------------------------------- MultiDiscrete


class CompactGridMask(NamedTuple):
    """A grid mask ``[B, cells, sum(nvec)]`` reduced to its cells with a legal value: ``rows``
    (ascending flat indices ``b * cells + cell``) and their mask rows ``mask`` ``[M, sum(nvec)]``.
    :class:`MaskedMultiCategorical` takes it in place of the dense mask (same results)."""

    batch: int
    rows: Tensor
    mask: Tensor


def compact_grid_mask(mask: Tensor, cells: int) -> CompactGridMask:
    """A dense grid mask ``[B, cells, sum(nvec)]`` (or ``[B, cells * sum(nvec)]``) as a
    :class:`CompactGridMask`: its cells with a legal value and their rows."""
    batch = mask.shape[0]
    flat = _as_bool(mask).reshape(batch * cells, -1)
    rows = _any(flat).nonzero()[:, 0]  # ascending
    return CompactGridMask(batch, rows, flat[rows])


class GridMaskIndex:
    """The cells with a legal value in a whole rollout's grid masks ``[N, cells, sum(nvec)]``,
    found and gathered once; :meth:`select` then gives a minibatch's :class:`CompactGridMask`
    without reading the dense masks again (in microRTS under 10 % of the cells have an own
    unit, so this reads a few hundred kB per minibatch instead of tens of MB)."""

    def __init__(self, mask: Tensor, cells: int) -> None:
        self.num = mask.shape[0]
        self.cells = cells
        flat = _as_bool(mask).reshape(self.num * cells, -1)
        rows = _any(flat).nonzero()[:, 0]  # ascending
        self.mask = flat[rows]  # [U, S]
        self.sample = torch.div(rows, cells, rounding_mode="floor")  # [U]
        self.cell = rows - self.sample * cells  # [U]

    def select(self, samples: Tensor) -> CompactGridMask:
        """The mask of rows ``samples`` (distinct indices into ``0..N-1``), in that order."""
        position = torch.full((self.num,), -1, dtype=torch.long, device=samples.device)
        position[samples] = torch.arange(len(samples), device=samples.device)
        where = position[self.sample]  # [U]: the legal cell's row in the minibatch, or -1
        keep = (where >= 0).nonzero()[:, 0]
        rows = where[keep] * self.cells + self.cell[keep]
        order = rows.argsort()
        return CompactGridMask(len(samples), rows[order], self.mask[keep[order]])


class MaskedMultiCategorical:
    """Independent categoricals ``nvec`` chosen together, optionally once per grid cell.

    ``logits`` ``[B, sum(nvec)]``, or with ``cells`` ``[B, cells, sum(nvec)]`` (or flattened
    ``[B, cells * sum(nvec)]``); ``mask`` bool of the same shape or ``None``. ``log_prob`` and
    ``entropy`` sum over components (and cells) to ``[B]``.

    ``gates[i]`` (``i >= 1``) lists the action types (values of component 0) that use component
    ``i``. ``log_prob(actions)`` counts component ``i`` only where ``actions[..., 0]`` is in
    ``gates[i]``. ``sample`` draws every component (an unused component's value is arbitrary
    but legal; the game ignores it).

    Entropy with gates: ``entropy(actions)`` counts a gated component only where the given
    action type uses it (the rl-algo-impls / MicroRTS-Py convention: pass the sampled or stored
    actions). ``entropy()`` without actions uses the *expected* weighting
    ``H(type) + sum_i P(type uses i) * H(component i)``, which is the exact entropy of the
    gated joint distribution and differentiable in the type's logits.

    ``compact`` (default: ``True`` for grid spaces with a mask) drops cells whose mask has no
    legal value before computing anything; results are identical, only faster. A
    :class:`CompactGridMask` in place of ``mask`` has them dropped already; with
    ``logits_rows`` its logits are too: ``logits`` ``[M, sum(nvec)]`` are the rows
    ``mask.rows`` of the grid logits (a network that computes only those cells).
    """

    def __init__(
        self,
        logits: Tensor,
        mask: Tensor | CompactGridMask | None,
        nvec: tuple[int, ...],
        cells: int | None = None,
        gates: tuple[tuple[int, ...] | None, ...] | None = None,
        compact: bool | None = None,
        *,
        logits_rows: bool = False,
    ) -> None:
        self.nvec = tuple(int(n) for n in nvec)
        self.cells = cells
        total = sum(self.nvec)
        per = 1 if cells is None else cells
        if logits_rows:
            if not isinstance(mask, CompactGridMask) or cells is None:
                raise ValueError("logits_rows needs grid logits and a CompactGridMask")
            if tuple(logits.shape) != (mask.rows.numel(), total):
                raise ValueError(f"logits of the mask's rows have shape {tuple(logits.shape)}; "
                                 f"its {mask.rows.numel()} rows need [{mask.rows.numel()}, "
                                 f"{total}]")
            self.batch = mask.batch
        else:
            self.batch = logits.shape[0]
        self.num_rows = self.batch * per
        flat = _as_float(logits) if logits_rows else _as_float(logits).reshape(self.num_rows,
                                                                              total)  # [R, S]

        # rows (cells) with at least one legal value; None = every row is kept
        self.rows: Tensor | None = None
        flat_mask: Tensor | None
        rows: Tensor | None = None  # the mask rows kept (flat_mask holds only those)
        if isinstance(mask, CompactGridMask):
            if cells is None or mask.batch != self.batch:
                raise ValueError(f"a CompactGridMask of {mask.batch} rows needs grid logits "
                                 f"with as many, got {tuple(logits.shape)}")
            rows, flat_mask = mask.rows, mask.mask
        else:
            flat_mask = None if mask is None else _as_bool(mask).reshape(self.num_rows, total)
            if compact is None:
                compact = cells is not None
            if compact and flat_mask is not None:
                rows = _any(flat_mask).nonzero()[:, 0]  # [M]
                flat_mask = flat_mask[rows]
        if rows is not None and rows.numel() < self.num_rows:
            self.rows = rows
            flat = flat if logits_rows else flat[rows]
            self._row_batch = torch.div(rows, per, rounding_mode="floor")  # [M]

        self.gate_table = (
            None if gates is None else _gate_table(self.nvec, tuple(gates), flat.device)
        )
        self.masks: list[Tensor] | None = None  # k x bool [M, n_i]
        self.has_legal: Tensor | None = None  # bool [M, k] components with a legal value
        if flat_mask is not None:
            self.masks = list(flat_mask.split(self.nvec, -1))
            counts = flat_mask.to(flat.dtype) @ _segment_matrix(self.nvec, flat.device, flat.dtype)
            self.has_legal = counts > 0.5
        parts = flat.split(self.nvec, -1)
        if self.masks is not None:  # one where per component: contiguous [M, n_i] outputs
            parts = tuple(
                torch.where(m, p, NEG_LOGIT) for p, m in zip(parts, self.masks, strict=True)
            )
        self.logits: list[Tensor] = list(parts)  # k x [M, n_i] masked
        self.log_probs = [p.log_softmax(-1) for p in self.logits]  # k x [M, n_i]
        self._probs: list[Tensor] | None = None

    # ----------------------------------------------------------------- internals

    @property
    def probs(self) -> list[Tensor]:
        """k x ``[M, n_i]``."""
        if self._probs is None:
            self._probs = [p.softmax(-1) for p in self.logits]
        return self._probs

    def to_batch(self, per_row: Tensor) -> Tensor:
        """Sum ``[M]`` per-row values (the kept rows: cells with a legal value) to ``[B]``."""
        if self.rows is None:
            return per_row.view(self.batch, -1).sum(1)
        out = per_row.new_zeros(self.batch)
        return out.index_add(0, self._row_batch, per_row)

    def _to_actions(self, picks: Tensor) -> Tensor:
        """``[M, k]`` per-row picks to ``[B, (cells,) k]``, zeros for dropped rows."""
        if self.rows is not None:
            full = picks.new_zeros((self.num_rows, len(self.nvec)))
            picks = full.index_copy(0, self.rows, picks)
        shape = (
            (self.batch, len(self.nvec))
            if self.cells is None
            else (self.batch, self.cells, len(self.nvec))
        )
        return picks.view(shape)

    def _from_actions(self, actions: Tensor) -> Tensor:
        """``[B, (cells,) k]`` actions to the kept rows ``[M, k]``."""
        flat = actions.reshape(self.num_rows, len(self.nvec)).long()
        return flat if self.rows is None else flat[self.rows]

    def _weights(self, rows_actions: Tensor | None) -> Tensor | None:
        """bool ``[M, k]``: which components count, from legality and gating."""
        used = None
        if self.gate_table is not None and rows_actions is not None:
            used = self.gate_table[rows_actions[:, 0]]  # [M, k]
        if used is None:
            return self.has_legal
        return used if self.has_legal is None else used & self.has_legal

    def _modes(self) -> Tensor:
        return torch.stack([p.argmax(-1) for p in self.logits], -1)  # [M, k]

    def expected_use(self) -> Tensor:
        """``[M, k]``: the probability that component ``i`` is used (that the action type
        drawn uses it), 0 for a component with no legal value. Needs ``gates``."""
        assert self.gate_table is not None
        p_type = self.probs[0]  # [M, n0]
        if self.has_legal is not None:  # no legal type: the type is 0 for sure
            forced = torch.zeros_like(p_type)
            forced[:, 0] = 1.0
            p_type = torch.where(self.has_legal[:, :1], p_type, forced)
        use = p_type @ self.gate_table.to(p_type.dtype)
        return use if self.has_legal is None else torch.where(self.has_legal, use, 0.0)

    # ----------------------------------------------------------------- API

    def mode(self) -> Tensor:
        return self._to_actions(self._modes())

    def sample(self, generator: torch.Generator | None = None,
               temperature: float = 1.0) -> Tensor:
        """Every component at once by the Gumbel-max trick: ``argmax(logits + G)`` with ``G``
        standard Gumbel noise is a draw from ``softmax(logits)``. A handful of ops on the
        ``[M, sum(nvec)]`` rows instead of a sampler per component (acting in microRTS builds
        7 of them per step). Illegal values sit at -1e8, far below any legal value plus noise;
        a component with no legal value gets 0, as :meth:`mode` does. With ``temperature``
        the draw is from ``softmax(logits / temperature)`` (illegal values stay far below)."""
        with torch.no_grad():
            logits = torch.cat(self.logits, -1)  # [M, S] masked
            if temperature != 1.0:
                logits = logits / _checked(temperature)
            noise = torch.rand(logits.shape, generator=generator, device=logits.device,
                               dtype=logits.dtype)
            # u = 0 (drawn about once in 2^24) would give -inf noise and let an illegal value
            # (-1e8 + finite noise) beat a component's only legal one
            noise.clamp_(min=torch.finfo(logits.dtype).tiny)
            scores = noise.log_().neg_().log_().neg_().add_(logits)  # logits + Gumbel noise
            picks = torch.stack([part.argmax(-1) for part in scores.split(self.nvec, -1)], -1)
            if self.has_legal is not None:
                picks = picks.masked_fill_(~self.has_legal, 0)
            return self._to_actions(picks)

    def log_prob(self, actions: Tensor) -> Tensor:
        acts = self._from_actions(actions)  # [M, k]
        lp = torch.stack(
            [lp.gather(-1, acts[:, i : i + 1])[:, 0] for i, lp in enumerate(self.log_probs)], -1
        )  # [M, k]
        weights = self._weights(acts)
        if weights is not None:
            lp = torch.where(weights, lp, 0.0)
        return self.to_batch(lp.sum(-1))

    def entropy(self, actions: Tensor | None = None) -> Tensor:
        ent = torch.stack(
            [-(p * lp).sum(-1) for p, lp in zip(self.probs, self.log_probs, strict=True)], -1
        )  # [M, k]
        if self.gate_table is not None and actions is None:
            ent = ent * self.expected_use()  # expected weighting: P(type uses component i)
        else:
            weights = self._weights(None if actions is None else self._from_actions(actions))
            if weights is not None:
                ent = torch.where(weights, ent, 0.0)
        return self.to_batch(ent.sum(-1))


# --------------------------------------------------------------------------- Box


class DiagGaussian:
    """Diagonal Gaussian: ``mean [B, d]``, ``log_std [d]`` (state-independent) or ``[B, d]``.

    Actions are unbounded; clipping to the space's bounds is the game's job.
    """

    def __init__(self, mean: Tensor, log_std: Tensor) -> None:
        self.mean = mean  # [B, d]
        self.log_std = log_std.expand_as(mean)  # [B, d]

    def mode(self) -> Tensor:
        return self.mean

    def sample(self, generator: torch.Generator | None = None,
               temperature: float = 1.0) -> Tensor:
        with torch.no_grad():
            noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device,
                                dtype=self.mean.dtype)
            return self.mean + noise * self.log_std.exp() * _checked(temperature)

    def log_prob(self, actions: Tensor) -> Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.square() - self.log_std - 0.5 * _LOG_2PI).sum(-1)

    def entropy(self, actions: Tensor | None = None) -> Tensor:
        return (self.log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1)


# --------------------------------------------------------------------------- factory


def param_shape(space: ActionSpace) -> tuple[int, ...]:
    """Per-sample shape of the policy head's output: ``(n,)``, ``(sum(nvec),)``,
    ``(cells, sum(nvec))`` for grid spaces (cell-major), or ``(d,)`` (the mean) for ``Box``."""
    if isinstance(space, Discrete):
        return (space.n,)
    if isinstance(space, MultiDiscrete):
        total = int(sum(space.nvec))
        return (total,) if space.cells is None else (space.cells, total)
    if isinstance(space, Box):
        return (len(space.low),)
    raise TypeError(f"unknown action space {space!r}; expected Discrete, MultiDiscrete or Box")


def num_params(space: ActionSpace) -> int:
    """How many outputs a policy head needs per sample, flat (``prod(param_shape(space))``).

    For grid spaces that is ``cells * sum(nvec)``, laid out as ``[cells, sum(nvec)]``. For
    ``Box`` it counts the mean only; ``log_std`` is a separate parameter ``[d]``.
    """
    return math.prod(param_shape(space))


def make_dist(
    space: ActionSpace,
    params: Tensor,
    mask: Tensor | CompactGridMask | None,
    log_std: Tensor | None = None,
    *,
    compact: bool | None = None,
    logits_rows: bool = False,
) -> ActionDist:
    """The action distribution of ``space`` for head outputs ``params`` ``[B, *param_shape]``
    (or flat ``[B, num_params]``) and a bool ``mask`` ``[B, *space.mask_shape]`` (or None).
    ``logits_rows``: ``params`` are only the grid logits of the :class:`CompactGridMask`
    ``mask``'s rows, ``[M, sum(nvec)]`` (see :class:`MaskedMultiCategorical`)."""
    expected = param_shape(space)
    if logits_rows:
        if not (isinstance(space, MultiDiscrete) and space.cells is not None):
            raise ValueError(f"logits_rows needs a grid action space, not {space!r}")
        return MaskedMultiCategorical(params, mask, space.nvec, cells=space.cells,
                                      gates=space.gates, logits_rows=True)
    if params.shape[1:] != expected and params.shape[1:] != (math.prod(expected),):
        want = ", ".join(map(str, expected))
        raise ValueError(f"params have shape {tuple(params.shape)}; {space!r} needs [B, {want}]")
    if isinstance(mask, CompactGridMask):
        if not (isinstance(space, MultiDiscrete) and space.cells is not None):
            raise ValueError(f"a CompactGridMask needs a grid action space, not {space!r}")
    elif mask is not None and isinstance(space, Discrete | MultiDiscrete):
        want_mask = space.mask_shape
        if mask.shape[1:] != want_mask and mask.shape[1:] != (math.prod(want_mask),):
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}; {space!r} needs bool "
                f"[B, {', '.join(map(str, want_mask))}]"
            )
    if isinstance(space, Discrete):
        assert not isinstance(mask, CompactGridMask)
        return MaskedCategorical(params, mask)
    if isinstance(space, MultiDiscrete):
        return MaskedMultiCategorical(
            params, mask, space.nvec, cells=space.cells, gates=space.gates, compact=compact
        )
    if log_std is None:
        raise ValueError(
            "a Box action space needs log_std: pass the policy's log_std parameter [d]"
        )
    return DiagGaussian(params, log_std)
