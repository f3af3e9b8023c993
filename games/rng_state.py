"""NumPy generators' states as plain arrays, so checkpoints hold them without pickling."""

from __future__ import annotations

import numpy as np

from games.core import GameError


def encode_rng(rng: np.random.Generator) -> np.ndarray:
    """A PCG64 generator's state as ``uint64 [6]`` (plain array, for checkpoints)."""
    st = rng.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise GameError(f"cannot encode {st['bit_generator']} state; expected PCG64")
    mask = (1 << 64) - 1
    inner = st["state"]
    return np.array([inner["state"] >> 64, inner["state"] & mask, inner["inc"] >> 64,
                     inner["inc"] & mask, st["has_uint32"], st["uinteger"]], np.uint64)


def decode_rng(code: np.ndarray) -> np.random.Generator:
    """Inverse of :func:`encode_rng`."""
    v = [int(x) for x in np.asarray(code, np.uint64)]
    if len(v) != 6:
        raise GameError(f"a generator state has 6 numbers, not {len(v)}")
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64",
                    "state": {"state": (v[0] << 64) | v[1], "inc": (v[2] << 64) | v[3]},
                    "has_uint32": v[4], "uinteger": v[5]}
    return np.random.Generator(bitgen)
