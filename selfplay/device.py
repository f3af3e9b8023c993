"""Which torch device a run uses: checked once, with a message that names the setting."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available) as a checked device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device: {name!r} is not a torch device (cpu, cuda, cuda:N, auto)") \
            from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {name!r} asked for, but this torch build sees no CUDA GPU "
                         "(use device=cpu or device=auto)")
    if device.type == "cuda" and device.index is not None \
            and device.index >= torch.cuda.device_count():
        raise ValueError(f"device: {name!r} asked for, but only {torch.cuda.device_count()} "
                         "CUDA device(s) are visible")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device: {name!r} is not supported (cpu, cuda, cuda:N, auto)")
    return device


def learner_autocast(device: torch.device, precision: str) -> torch.autocast:
    """Where the learner's forward passes and losses run: under bfloat16 autocast with
    ``precision: bfloat16`` (matrix products and convolutions in bfloat16; the weights, the
    optimizer and the distributions' log-probabilities in float32), else a disabled context.
    The backward pass runs outside it, as torch advises."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")
