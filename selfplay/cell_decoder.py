"""A per-cell MLP head over a U-Net encoder's maps (``network.grid_cells``), computed at the
cells with a legal action only.

Each cell's logits are an MLP of its neighbourhood of the input planes (``radius`` cells each
way, zero beyond the board's edge) joined with, from every coarser encoder map, the feature
vector of the map cell over it. The decisions a unit of a large board makes are mostly a
nonlinear function of its own cell and its neighbours (its cargo deciding towards which
neighbour it steps), which an MLP computes and a U-Net's linear 3x3 logits do not; and where
a U-Net decodes every cell of a 48x48 board back to full resolution, this head reads the maps
at a seat's few dozen units and factories only (:meth:`CellDecoder.forward_rows`).

With ``board_context`` every cell also reads the whole board: the mean and the max of the
encoder's final map over the board (global pooling, as in KataGo's and AlphaStar's networks),
for the decisions that hang on the team as a whole (how much water all its factories hold,
how many robots it has), which no cell's neighbourhood or map cell sees.

With ``bins`` each cell's own input planes also enter binned, a learned vector per (plane,
bin) added to the first hidden layer (one-hot numbers, as embeddings of numerical features
do): a scripted teacher's thresholds (home at half the cargo, water above a reserve) are steps
between bins, where weights on the plane's value learn only a slope across them.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn
from torch.nn import functional

from selfplay.grid_networks import GridFeatures, board_cells, pooled_board
from selfplay.layers import layer_init


def bin_index(values: Tensor, bins: int) -> Tensor:
    """``long``, the shape of ``values``: which of ``bins`` equal bins over [0, 1] each value
    falls in (the small offset keeps a value on a bin's edge, as 51 / 255 is 0.2, in the upper
    bin despite float rounding)."""
    return torch.clamp((values * bins + 1e-3).floor().long(), 0, bins - 1)

class CellDecoder(nn.Module):
    """Logits ``[B, H*W, n_out]`` from an encoder's :class:`GridFeatures` (input planes of
    ``in_channels``, then maps of ``channels`` each half the size of the one before)."""

    def __init__(self, in_channels: int, channels: list[int], hidden: list[int], n_out: int,
                 radius: int = 1, pool: int = 1, board_context: bool = False,
                 pad_plane: int | None = None, bins: int = 0) -> None:
        """``pool``: the encoder's stages read the board average-pooled by this factor, so its
        ``k``-th map has cells of ``pool * 2 ** k`` board cells a side. ``board_context``:
        every cell also reads the final map's mean and max over the board (cells of padding,
        where the input's ``pad_plane`` is set, left out). ``bins``: each cell's own planes,
        each cut into this many bins over [0, 1], add a learned vector per (plane, bin)."""
        super().__init__()
        if not hidden:
            raise ValueError("a cell decoder needs at least one hidden layer")
        self.radius = radius
        self.pool = pool
        self.in_channels = in_channels
        self.map_channels = list(channels)
        self.board_context = board_context
        self.pad_plane = pad_plane
        width = ((2 * radius + 1) ** 2 * in_channels + sum(channels)
                 + (2 * channels[-1] if board_context else 0))
        layers: list[nn.Module] = []
        for h in hidden:
            layers.append(layer_init(nn.Linear(width, h)))
            width = h
        self.hidden = nn.ModuleList(layers)
        self.out = layer_init(nn.Linear(width, n_out), gain=0.01)
        self.bins = bins
        self.bin_table = (nn.Parameter(torch.zeros(in_channels * bins, hidden[0]))
                          if bins > 0 else None)

    def _binned(self, values: Tensor) -> Tensor:
        """``[N, hidden[0]]``: the sum of the bin vectors of ``values`` ``[N, in_channels]``
        (planes in [0, 1])."""
        assert self.bin_table is not None
        index = bin_index(values, self.bins)
        index = index + torch.arange(values.shape[1], device=values.device) * self.bins
        return functional.embedding_bag(index, self.bin_table, mode="sum")

    def _first_rows(self, features: GridFeatures, rows: Tensor) -> Tensor:
        """The first hidden layer's pre-activations ``[M, hidden[0]]`` at the flat cells
        ``rows`` (``b * H * W + y * W + x``)."""
        planes, maps = features.skips[0], (*features.skips[1:], features.final)
        b, c, h, w = planes.shape
        k = 2 * self.radius + 1
        cell = rows % (h * w)
        board = torch.div(rows, h * w, rounding_mode="floor")
        y, x = torch.div(cell, w, rounding_mode="floor"), cell % w
        offset = torch.arange(k * k, device=rows.device)
        dy = torch.div(offset, k, rounding_mode="floor") - self.radius
        dx = offset % k - self.radius  # row-major (dy, dx), as the first layer's columns
        ny, nx = y[:, None] + dy, x[:, None] + dx
        inside = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
        near = torch.where(inside, rows[:, None] + dy * w + dx, rows[:, None])
        table = planes.permute(0, 2, 3, 1).reshape(b * h * w, c)  # a view when channels-last
        # index_select, not table[index]: indexing's backward adds the gradients of repeated
        # rows (neighbourhoods overlap, rows share a board) in a thread-dependent order on a
        # CPU, and a run would not repeat bit for bit
        parts = [(table.index_select(0, near.reshape(-1)).view(len(rows), k * k, c)
                  * inside.unsqueeze(2).to(planes.dtype)).reshape(len(rows), k * k * c)]
        for level, fmap in enumerate(maps, start=1):  # the map cell over each row's cell
            _, fc, fh, fw = fmap.shape
            side = self.pool * 2 ** level
            fy = torch.clamp(torch.div(y, side, rounding_mode="floor"), max=fh - 1)
            fx = torch.clamp(torch.div(x, side, rounding_mode="floor"), max=fw - 1)
            ftable = fmap.permute(0, 2, 3, 1).reshape(-1, fc)
            parts.append(ftable.index_select(0, board * fh * fw + fy * fw + fx))
        if self.board_context:
            parts.append(self._context(features).index_select(0, board))
        first = cast(nn.Linear, self.hidden[0])
        pre = functional.linear(torch.cat(parts, 1), first.weight, first.bias)
        if self.bin_table is not None:
            pre = pre + self._binned(table.index_select(0, rows))
        return pre

    def _context(self, features: GridFeatures) -> Tensor:
        """``[B, 2 * channels[-1]]``: the final map's mean and max over each board."""
        on = board_cells(features.skips[0], self.pad_plane, self.pool, len(self.map_channels))
        return pooled_board(features.final, on)

    def _rest(self, pre: Tensor) -> Tensor:
        """From the first layer's pre-activations to the logits (the last axis is features)."""
        x = functional.relu(pre)
        for layer in self.hidden[1:]:
            x = functional.relu(layer(x))
        return cast(Tensor, self.out(x))

    def forward_rows(self, features: GridFeatures, rows: Tensor) -> Tensor:
        """The logits ``[M, n_out]`` of the flat cells ``rows`` only."""
        return self._rest(self._first_rows(features, rows))

    def forward(self, features: Tensor | GridFeatures, grid: tuple[int, int]) -> Tensor:
        """The logits of every cell, ``[B, H*W, n_out]``: the first layer as a convolution
        over the input planes plus each coarser map's projection spread over its cells (the
        same numbers as :meth:`forward_rows` at every cell, without gathering neighbourhoods)."""
        if not isinstance(features, GridFeatures):
            raise TypeError("a cell decoder reads a U-Net encoder's maps (network.grid_skips)")
        planes, maps = features.skips[0], (*features.skips[1:], features.final)
        h, w = grid
        k, c = 2 * self.radius + 1, self.in_channels
        first = cast(nn.Linear, self.hidden[0])
        weight = first.weight  # [hidden, k * k * c + sum(channels)]
        conv_weight = weight[:, :k * k * c].reshape(-1, k, k, c).permute(0, 3, 1, 2)
        pre = functional.conv2d(planes, conv_weight, first.bias, padding=self.radius)
        start = k * k * c
        for level, fmap in enumerate(maps, start=1):
            part = weight[:, start:start + fmap.shape[1]]
            start += fmap.shape[1]
            proj = functional.conv2d(fmap, part[:, :, None, None])  # [B, hidden, fh, fw]
            side = self.pool * 2 ** level
            fy = torch.clamp(torch.arange(h, device=fmap.device) // side, max=fmap.shape[2] - 1)
            fx = torch.clamp(torch.arange(w, device=fmap.device) // side, max=fmap.shape[3] - 1)
            pre = pre + proj[:, :, fy][:, :, :, fx]
        if self.board_context:
            part = weight[:, start:start + 2 * features.final.shape[1]]
            pre = pre + functional.linear(self._context(features), part)[:, :, None, None]
        pre = pre.permute(0, 2, 3, 1)  # [B, H, W, hidden]
        if self.bin_table is not None:
            b = planes.shape[0]
            binned = self._binned(planes.permute(0, 2, 3, 1).reshape(b * h * w, c))
            pre = pre + binned.view(b, h, w, -1)
        logits = self._rest(pre)  # [B, H, W, n_out]
        return logits.reshape(logits.shape[0], h * w, -1)
