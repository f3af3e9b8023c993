"""Typed options: build a dataclass from a plain mapping (YAML, CLI), naming any bad key.

Used for game options (``game.options`` in a config) and for the training config itself.
Supported field types: bool, int, float, str, ``X | None``, ``Literal[...]``, ``list[X]``,
``tuple[X, ...]``, ``dict[str, X]`` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class OptionError(ValueError):
    """A configuration value that does not fit its declared type, or an unknown key."""


MAX_REWARD_WEIGHT = 1e6
"""the largest reward (or map) weight a game option takes: beyond it float32 rewards and their
squares in the value loss overflow"""


def _unknown_key(key: str, known: list[str], where: str) -> OptionError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return OptionError(f"unknown key '{where}{key}'{hint} (known: {', '.join(sorted(known))})")


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """Instantiate dataclass ``cls`` from ``data``; ``where`` prefixes key names in errors."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise OptionError(f"{where.rstrip('.') or 'config'} must be a mapping, "
                          f"got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            raise _unknown_key(str(key), list(fields), where)
        kwargs[key] = convert(hints[key], value, f"{where}{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, OptionError):
            raise
        raise OptionError(f"{where.rstrip('.') or 'config'}: {exc}") from exc


def convert(tp: Any, value: Any, name: str) -> Any:
    """Check/convert ``value`` against type ``tp``; ``name`` is the dotted key for errors."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, name)
            except OptionError as exc:
                errors.append(str(exc))
        raise OptionError(errors[0] if len(errors) == 1 else
                          f"{name}: {value!r} matches none of {_type_name(tp)}")
    if origin is typing.Literal:
        if value not in args:
            raise OptionError(f"{name}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_mapping(tp, value, f"{name}.")
    if origin in (list, tuple):
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise OptionError(f"{name}: expected a list, got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(args[0], v, f"{name}[{i}]") for i, v in enumerate(value))
        if origin is tuple and args:
            if len(args) != len(value):
                raise OptionError(f"{name}: expected {len(args)} items, got {len(value)}")
            pairs = enumerate(zip(args, value, strict=True))
            return tuple(convert(a, v, f"{name}[{i}]") for i, (a, v) in pairs)
        item = args[0] if args else Any
        return [convert(item, v, f"{name}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise OptionError(f"{name}: expected a mapping, got {value!r}")
        vt = args[1] if len(args) == 2 else Any
        return {str(k): convert(vt, v, f"{name}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise OptionError(f"{name}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise OptionError(f"{name}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                digits = int(abs(int(value)).bit_length() * 0.30103) + 1
                raise OptionError(f"{name}: a number of about {digits} digits is too large"
                                  ) from None
        raise OptionError(f"{name}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise OptionError(f"{name}: expected a string, got {value!r}")
    raise OptionError(f"{name}: unsupported option type {_type_name(tp)}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def to_mapping(obj: Any) -> Any:
    """Plain-data (YAML/JSON-ready) view of a dataclass, tuples as lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_mapping(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_mapping(v) for k, v in obj.items()}
    return obj
