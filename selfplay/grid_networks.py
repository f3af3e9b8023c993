"""GridNet parts for per-cell actions on boards: the strided encoder (a U-Net's when it keeps
its finer maps), the transposed-convolution decoder and the size-agnostic pooled critic head."""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import torch
from torch import Tensor, nn
from torch.nn import functional

from selfplay.layers import layer_init


class GridFeatures(NamedTuple):
    """A skip-connected grid encoder's output: its final feature map, and the finer maps the
    decoder joins back in (the scaled input, then every stage's output but the last)."""

    final: Tensor
    skips: tuple[Tensor, ...]


def final_features(features: Tensor | GridFeatures) -> Tensor:
    """The final feature map of an encoder's output (what critics read)."""
    return features.final if isinstance(features, GridFeatures) else features


class GridEncoder(nn.Module):
    """Strided conv encoder over a ``[C, H, W]`` board; keeps the feature map for a decoder
    (with ``skips``, every finer map too: :class:`GridFeatures`)."""

    def __init__(self, in_channels: int, channels: list[int], scale: float = 1.0,
                 skips: bool = False, pool: int = 1, ignored: tuple[int, ...] = ()) -> None:
        """``pool``: the stages read the board average-pooled by this factor (the input kept
        for a decoder stays at full size; a cell decoder reads it there). ``ignored``: input
        planes zeroed before anything reads them."""
        super().__init__()
        self.scale = scale  # the game's obs_scale (quantized planes), not a parameter
        per_plane = None
        if ignored:  # per plane: the scale, 0 where ignored (not saved: the config says it)
            per_plane = torch.full((1, in_channels, 1, 1), float(scale))
            per_plane[:, list(ignored)] = 0.0
        self.plane_scale: Tensor | None
        self.register_buffer("plane_scale", per_plane, persistent=False)
        self.skips = skips
        self.pool = pool
        layers: list[nn.Module] = []
        c = in_channels
        for out_c in channels:
            layers += [layer_init(nn.Conv2d(c, out_c, 3, padding=1)),
                       nn.MaxPool2d(3, 2, padding=1), nn.ReLU()]
            c = out_c
        self.net = nn.Sequential(*layers)
        self.out_channels = c

    def forward(self, x: Tensor) -> Tensor | GridFeatures:
        # channels-last (NHWC) activations: oneDNN/cuDNN convolve them without reordering, and
        # the decoder's per-cell logits come out already laid out as [B, H, W, C]
        x = x.to(torch.float32, memory_format=torch.channels_last)
        if self.plane_scale is not None:
            x = x * self.plane_scale
        elif self.scale != 1.0:
            x = x * self.scale
        kept = [x]
        if self.pool > 1:
            x = functional.avg_pool2d(x, self.pool, ceil_mode=True)
        if not self.skips:
            return cast(Tensor, self.net(x))
        for layer in self.net:
            x = layer(x)
            if isinstance(layer, nn.ReLU):  # the end of a stage
                kept.append(x)
        return GridFeatures(kept.pop(), tuple(kept))


class GridDecoder(nn.Module):
    """Transposed convs back to per-cell logits ``[B, H*W, n_out]`` for any board ``H x W``.

    With ``in_channels`` (a U-Net: the encoder keeps its finer maps), each upsampled map is
    joined with the encoder's map of the same size, the last with the input planes, and a
    3x3 conv gives the logits: every cell's logits see its own planes at full resolution, which
    large boards need (48x48 Lux boards reach a 6x6 map after three stages)."""

    def __init__(self, channels: list[int], n_out: int, in_channels: int | None = None,
                 head: int = 0, hidden: int = 0) -> None:
        """U-Net only: ``head``, channels of a 1x1 convolution (and ReLU) between the joined
        full-size maps and the 3x3 convolution; 0: none. ``hidden``: that 3x3 convolution
        gives this many channels, and after a ReLU a 1x1 convolution the logits (a nonlinear
        function of each cell's neighbourhood); 0: it gives the logits."""
        super().__init__()
        rev = list(reversed(channels))
        self.unet = in_channels is not None
        self.cell_logits: nn.Conv2d | None = None  # the 1x1 convolution after ``hidden``
        if in_channels is not None:
            ups: list[nn.Module] = []
            c = rev[0]
            for i in range(len(rev)):
                out_c = rev[i + 1] if i + 1 < len(rev) else rev[-1]
                ups.append(layer_init(nn.ConvTranspose2d(c, out_c, 3, stride=2, padding=1,
                                                         output_padding=1)))
                c = out_c + (rev[i + 1] if i + 1 < len(rev) else in_channels)
            self.ups = nn.ModuleList(ups)
            self.squeeze = (nn.Sequential(layer_init(nn.Conv2d(c, head, 1)), nn.ReLU())
                            if head > 0 else nn.Identity())
            if hidden > 0:
                self.out = layer_init(nn.Conv2d(head or c, hidden, 3, padding=1))
                self.cell_logits = cast(nn.Conv2d, layer_init(nn.Conv2d(hidden, n_out, 1),
                                                              gain=0.01))
            else:
                self.out = layer_init(nn.Conv2d(head or c, n_out, 3, padding=1), gain=0.01)
            return
        layers: list[nn.Module] = []
        for i, c in enumerate(rev):
            out_c = rev[i + 1] if i + 1 < len(rev) else n_out
            last = i + 1 == len(rev)
            layers.append(layer_init(nn.ConvTranspose2d(c, out_c, 3, stride=2, padding=1,
                                                        output_padding=1),
                                     gain=0.01 if last else math.sqrt(2)))
            if not last:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def _joined(self, features: GridFeatures) -> Tensor:
        """U-Net: the full-size maps the logits' 3x3 convolution reads, ``[B, C, H, W]``."""
        x = features.final
        for up, skip in zip(self.ups, reversed(features.skips), strict=True):
            x = functional.relu(up(x))[:, :, :skip.shape[2], :skip.shape[3]]
            x = torch.cat([x, skip], 1)
        return cast(Tensor, self.squeeze(x))

    def forward_rows(self, features: GridFeatures, rows: Tensor) -> Tensor:
        """U-Net: the logits ``[M, n_out]`` of the flat cells ``rows`` (``b * H * W + y * W
        + x``) only, the same numbers as :meth:`forward`'s at those cells (up to rounding):
        the logits' 3x3 convolution as one matrix product over the rows' 3x3 neighbourhoods
        (zero beyond the board's edge, the convolution's padding). Policies only read the
        cells with a legal action, a few dozen of a 48x48 Lux board's 2,304, and that
        convolution over every cell was about 40 % of a Lux update."""
        x = self._joined(features)
        b, c, h, w = x.shape
        table = x.permute(0, 2, 3, 1).reshape(b * h * w, c)  # a view when channels-last
        cell = rows % (h * w)
        y, col = torch.div(cell, w, rounding_mode="floor"), cell % w
        offset = torch.arange(9, device=rows.device)
        dy, dx = torch.div(offset, 3, rounding_mode="floor") - 1, offset % 3 - 1  # row-major
        ny, nx = y[:, None] + dy, col[:, None] + dx  # [M, 9] the neighbourhood, row-major
        inside = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
        near = torch.where(inside, rows[:, None] + dy * w + dx, rows[:, None])
        # one gather (its backward: one scatter into the full-size map, not one per offset);
        # index_select, whose backward adds repeated rows in a fixed order (indexing's does
        # not on a CPU with threads, and a run would not repeat bit for bit)
        patches = (table.index_select(0, near.reshape(-1)).view(len(rows), 9, c)
                   * inside.unsqueeze(2).to(x.dtype))
        conv = cast(nn.Conv2d, self.out)
        weight = conv.weight  # [n_out, C, 3, 3] -> [n_out, 3 * 3 * C], as the patches
        flat_weight = weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1)
        assert conv.bias is not None
        out = torch.addmm(conv.bias, patches.reshape(len(rows), 9 * c), flat_weight.t())
        last = self.cell_logits
        if last is None:
            return out
        return functional.linear(functional.relu(out), last.weight.flatten(1), last.bias)

    def forward(self, features: Tensor | GridFeatures, grid: tuple[int, int]) -> Tensor:
        if isinstance(features, GridFeatures):
            out = self.out(self._joined(features))
            if self.cell_logits is not None:
                out = self.cell_logits(functional.relu(out))
        else:
            out = self.net(features)  # [B, n_out, H', W'] with H' >= H, W' >= W
        h, w = grid
        if out.shape[2:] != (h, w):
            out = out[:, :, :h, :w]
        return out.permute(0, 2, 3, 1).reshape(out.shape[0], h * w, -1)  # a view if NHWC


def board_cells(board: Tensor, pad_plane: int | None, pool: int, stages: int) -> Tensor | None:
    """``float [B, 1, h, w]``: 1 where a cell of an encoder's final map covers the board
    ``[B, C, H, W]`` (read from its ``pad_plane``, 1 on padding cells), through the encoder's
    average pooling (``pool``) and ``stages``; None when there is no padding plane."""
    if pad_plane is None:
        return None
    on = (board[:, pad_plane:pad_plane + 1].float() <= 0).float()
    if pool > 1:
        on = functional.max_pool2d(on, pool, ceil_mode=True)
    for _ in range(stages):
        on = functional.max_pool2d(on, 3, 2, padding=1)
    return on


def pooled_board(features: Tensor, on: Tensor | None) -> Tensor:
    """``[B, 2C]``: the mean and the max of ``features [B, C, h, w]`` over the cells where
    ``on`` (:func:`board_cells`) is 1, every cell when it is None."""
    if on is None:
        return torch.cat([features.mean((2, 3)), features.amax((2, 3))], 1)
    count = on.sum((2, 3)).clamp_min(1.0)  # [B, 1]
    mean = (features * on).sum((2, 3)) / count
    off = (1.0 - on) * torch.finfo(features.dtype).min
    return torch.cat([mean, (features + off).amax((2, 3))], 1)


class BoardPool(nn.Module):
    """Size-agnostic critic head: the mean and the max of a grid encoder's feature map over
    the board's cells (padding cells excluded), then an MLP to one value.

    ``pad_plane`` is the input plane that is 1 on padding cells (a smaller board in a larger
    batch grid; None: every cell is on the board). A feature cell counts when any input cell it
    was pooled from is on the board: the on-board mask goes through the encoder's pools."""

    def __init__(self, channels: int, hidden: int, stages: int, pad_plane: int | None,
                 pool: int = 1) -> None:
        super().__init__()
        self.pad_plane = pad_plane
        self.stages = stages
        self.pool = pool  # the encoder's average pooling before its stages
        self.mlp = nn.Sequential(layer_init(nn.Linear(2 * channels, hidden)), nn.ReLU(),
                                 layer_init(nn.Linear(hidden, 1), gain=1.0))

    def on_board(self, board: Tensor) -> Tensor | None:
        """``float [B, 1, h, w]`` 1 where a feature cell covers the board; None if no padding."""
        return board_cells(board, self.pad_plane, self.pool, self.stages)

    def forward(self, features: Tensor, board: Tensor) -> Tensor:
        pooled = pooled_board(features, self.on_board(board))
        return cast(Tensor, self.mlp(pooled)).squeeze(-1)
