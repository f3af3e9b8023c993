"""Reading a run's settings: ``hyperparams/<family>.yaml``, a user's ``--config`` file and
``--set`` overrides, layered into a :class:`~selfplay.config.TrainConfig`.

Resolution order (later wins): dataclass defaults, the family file's top level, its
``games.<name>`` section, a user ``--config`` file (which may name ``base: <family or file>``;
the base's top level, then its ``games.<name>`` section, then the file's own top level and its
``games.<name>`` section, so that a copy of a family file works as a ``--config``),
``--set key=value`` overrides, and the explicit CLI flags. Unknown keys and wrong types raise
:class:`~selfplay.config.ConfigError` naming the dotted key.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from games.core import GameError
from games.options import OptionError, from_mapping, to_mapping
from selfplay.config import ConfigError, GameConfig, TrainConfig, check_new_settings, validate


def _hyperparams_dir() -> Path:
    """The family files: the installed ``selfplay.hyperparams`` package (the checkout's
    top-level ``hyperparams/`` folder, mapped there by pyproject.toml), else that folder beside
    this package (a checkout used without installing)."""
    try:
        spec = importlib.util.find_spec("selfplay.hyperparams")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.origin is not None:
        return Path(spec.origin).parent
    return Path(__file__).resolve().parent.parent / "hyperparams"


HYPERPARAMS_DIR = _hyperparams_dir()


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-3`` as a float (YAML 1.2), as users write it, and
    refuses a key given twice in one mapping (YAML keeps the last one, silently); merge keys
    (``<<: *defaults``) merge as in YAML, the mapping's own keys winning."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        merges = 0
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *defaults``: merged below
                merges += 1
                if merges > 1:
                    raise yaml.constructor.ConstructorError(
                        None, None, "duplicate key '<<'; merge several with <<: [*a, *b]",
                        key_node.start_mark)
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key must be a name, not a {type(key).__name__}",
                    key_node.start_mark)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes the strings :class:`_Loader` would read as floats (``"1e5"``:
    YAML 1.1 writes it bare, and a saved config read it back as 100000.0)."""


for _first, _resolvers in _Loader.yaml_implicit_resolvers.items():
    for _tag, _pattern in _resolvers:
        if _tag == "tag:yaml.org,2002:float":
            _Dumper.add_implicit_resolver(_tag, _pattern, [_first])


def yaml_load(text: str) -> object:
    """A YAML document as plain Python values; a value YAML parses but Python cannot hold
    (an integer of thousands of digits, a mapping that contains itself through an anchor) is
    a :class:`yaml.YAMLError` too."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:  # int("9" * 5000): Python's digit limit
        raise yaml.YAMLError(str(exc).split(";")[0]) from exc
    _check_acyclic(data)
    return data


def _check_acyclic(value: object, path: tuple[int, ...] = (),
                   done: set[int] | None = None) -> None:
    """:class:`yaml.YAMLError` if ``value`` contains itself (``x: &a {y: *a}``); a mapping or
    list reached again through another alias is checked once (``done``)."""
    done = set() if done is None else done
    if isinstance(value, dict | list) and id(value) not in done:
        if id(value) in path:
            raise yaml.YAMLError("an anchor (&name) is used inside itself")
        for item in value.values() if isinstance(value, dict) else value:
            _check_acyclic(item, (*path, id(value)), done)
        done.add(id(value))


def yaml_dump(data: object) -> str:
    """``data`` as YAML that :func:`yaml_load` reads back as it was."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from ``path``; clear errors for a missing, non-UTF-8 or malformed file."""
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder; name a .yaml file")
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a regular file; name a .yaml file")
    try:
        data = yaml_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}: "
                          f"{exc.object[exc.start]:#04x}); save it as UTF-8") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc) or "invalid YAML"
        raise ConfigError(f"malformed YAML in {path}{where}: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config keys, got {type(data).__name__}")
    return data


# top-level keys that hold a section (a mapping); a YAML file or --set may not replace one with
# a scalar or an empty value (an empty `ppo:` would silently drop the game's tuned settings)
SECTIONS = ("game", "ppo", "network", "normalize", "log", "checkpoint", "league", "bc",
            "distributed")


def check_sections(layer: dict[str, Any]) -> None:
    """:class:`ConfigError` if ``layer`` gives a section anything but a mapping."""
    for key in SECTIONS:
        if key in layer and not isinstance(layer[key], dict):
            value = layer[key]
            shown = "an empty value" if value is None else f"{type(value).__name__} {value!r}"
            raise ConfigError(f"{key} must be a mapping of settings (e.g. {key}.x: ...), got "
                              f"{shown}; remove the empty section or fill it in")


class DottedKeys(dict[str, Any]):
    """A mapping made from dotted ``--set`` keys (``game.options.reward_weights.win=2``): it
    merges into the value below it at any depth; a mapping given whole replaces a game
    option's mapping."""


OPTIONS_PATH = "game.options."


def deep_merge(base: dict[str, Any], override: dict[str, Any],
               path: str = "") -> dict[str, Any]:
    """``base`` updated recursively by ``override``: sections and ``game.options`` merge key by
    key; a game option's own mapping (Lux's ``reward_weights``, ``env_kwargs``) is replaced by
    a mapping given whole (its left-out keys mean none) and merged with one made of dotted
    ``--set`` keys (:class:`DottedKeys`: ``reward_weights.win=2`` keeps the other weights);
    other values replace. A section replaced by anything but a mapping is a
    :class:`ConfigError`."""
    if not path:
        check_sections(override)
    out = copy.deepcopy(base)
    for key, value in override.items():
        whole_option = path.startswith(OPTIONS_PATH) and not isinstance(value, DottedKeys)
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not whole_option:
            out[key] = deep_merge(out[key], value, f"{path}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out  # what came in as DottedKeys stays so (merged into the layers below later)


def plain(value: Any) -> Any:
    """``value`` with every :class:`DottedKeys` a plain ``dict`` (a copy)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return copy.deepcopy(value)


def family_file(family: str) -> Path:
    """The settings file of ``family``: ``hyperparams/<family>.yaml`` for selfplay's own
    families, else the file a plugin's family names (:attr:`Family.hyperparams`)."""
    own = HYPERPARAMS_DIR / f"{family}.yaml"
    if own.is_file():
        return own
    named = plugin_files().get(family)
    return named if named is not None else own


def plugin_files() -> dict[str, Path]:
    """The settings files of the registered families that name one (plugins)."""
    from games.registry import families  # local: keeps config importable without games

    return {f.name: Path(f.hyperparams) for f in families() if f.hyperparams is not None}


def family_defaults(family: str, game_name: str) -> dict[str, Any]:
    """The family file's settings for ``game_name`` (top level merged with ``games.<name>``).

    A family without a file (one a user registered) has none; a missing ``hyperparams`` folder
    means a broken installation, an error rather than silently training on bare defaults."""
    if not HYPERPARAMS_DIR.is_dir():
        raise ConfigError(f"the hyperparams folder is missing ({HYPERPARAMS_DIR}): selfplay is "
                          "installed without its default settings; reinstall it from your "
                          "checkout or wheel")
    path = family_file(family)
    if not path.is_file():
        named = plugin_files().get(family)
        if named is not None:  # a plugin's file that is not there: its install is broken
            raise ConfigError(f"game family {family!r} names the settings file {named}, which "
                              "does not exist")
        return {}
    data = read_yaml(path)
    specific = game_section(data, game_name, path)
    return deep_merge(data, specific)


def parse_set(items: list[str]) -> dict[str, Any]:
    """``["ppo.learning_rate=3e-4", ...]`` -> nested mapping; values parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            value = yaml_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            shown = raw if len(raw) <= 60 else f"{raw[:40]}...({len(raw)} characters)"
            reason = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"--set {key}: cannot parse value {shown!r}"
                              f"{f' ({reason})' if reason else ''}") from exc
        node: dict[str, Any] = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, DottedKeys())
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {part!r} is set both as a value and a section")
        last, dotted = parts[-1], f"{key.strip()}.".startswith(OPTIONS_PATH)
        below = node.get(last)
        if isinstance(below, dict) and isinstance(value, dict) and not (
                dotted and len(parts) >= 3):  # --set ppo.x=1 --set ppo={y: 2}: both
            node[last] = deep_merge(below, value, f"{key.strip()}.")  # a DottedKeys still
        elif isinstance(below, dict) and not isinstance(value, dict):
            raise ConfigError(f"--set {key}: {key!r} is set both as a section and a value")
        else:  # a game option's mapping given whole replaces it (and what came before)
            node[last] = value
    return out


def load_user_file(path: Path) -> tuple[dict[str, Any], dict[str, Any], Path | None]:
    """A user config file, with at most one level of ``base:`` (a family name or a file): the
    base file's settings (its ``games`` section kept, for :func:`build_config` to pick the
    game's own), the file's own, and the base file's path (None without a base)."""
    data = read_yaml(path)
    base = data.pop("base", None)
    if base is None:
        return {}, data, None
    if not isinstance(base, str):
        raise ConfigError(f"{path}: 'base' must be a family name or a file path")
    if base.endswith((".yaml", ".yml")):  # a file: beside the config file that names it
        base_path = Path(base) if Path(base).is_absolute() else path.parent / base
        if base_path.resolve() == path.resolve():
            raise ConfigError(f"{path}: 'base' names the file itself")
    else:
        base_path = family_file(base)
        if not base_path.is_file():
            known = sorted({p.stem for p in HYPERPARAMS_DIR.glob("*.yaml")}
                           | set(plugin_files()))
            raise ConfigError(f"{path}: base {base!r} is neither a family ({', '.join(known)}) "
                              "nor a .yaml file")
    base_data = read_yaml(base_path)
    if "base" in base_data:
        raise ConfigError(f"{base_path}: only one level of 'base' is allowed")
    return base_data, data, base_path


def game_section(data: dict[str, Any], game_name: str, path: Path | None) -> dict[str, Any]:
    """``data``'s ``games.<game_name>`` settings, removing the ``games`` section from ``data``.
    Its keys are game names as ``--game`` takes them (any case, aliases); one that names no
    game, or a second key for the same game, is an error."""
    from games.core import GameError
    from games.registry import resolve  # local: keeps config importable without games

    where = path if path is not None else "--set"
    games_section = data.pop("games", {}) or {}
    if not isinstance(games_section, dict):
        raise ConfigError(f"{where}: 'games' must map game names to settings")
    specific: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for key, settings in games_section.items():
        try:
            canonical = resolve(str(key)).name
        except GameError as exc:
            raise ConfigError(f"{where}: games.{key}: {exc}") from None
        if canonical in seen:
            raise ConfigError(f"{where}: games.{seen[canonical]} and games.{key} name the same "
                              "game; keep one")
        seen[canonical] = str(key)
        if canonical == game_name:
            if not isinstance(settings, dict) and settings is not None:
                raise ConfigError(f"{where}: games.{key} must be a mapping of settings")
            specific = settings or {}
    return specific


def build_config(game: str | None = None, config_file: str | Path | None = None,
                 overrides: list[str] | None = None, seed: int | None = None,
                 total_steps: int | None = None,
                 init_from: str | Path | None = None) -> TrainConfig:
    """Resolve a :class:`TrainConfig` from the layers described in the module docstring."""
    from games.registry import resolve  # local: keeps config importable without games

    base, own, base_path = (load_user_file(Path(config_file)) if config_file is not None
                            else ({}, {}, None))
    base_games = {"games": base.pop("games", None)}  # the base's own tuning of each game
    own_games = {"games": own.pop("games", None)}  # the file's (a copy of a family file)
    user = deep_merge(base, own)
    sets = parse_set(overrides or [])
    if "games" in sets:
        raise ConfigError("--set games.<name>...: set the game's keys directly (--set ppo.gamma"
                          "=0.9 with --game <name>); a games section belongs in a config file")
    check_sections(user)
    check_sections(sets)
    named = [(where, name) for where, name in (
        ("--game", game), ("--set game.name", sets.get("game", {}).get("name")),
        (f"{config_file} game.name", user.get("game", {}).get("name"))) if name is not None]
    if named:
        name = named[0][1]
        other = next(((where, n) for where, n in named[1:]
                      if resolve(str(n)).name != resolve(str(name)).name), None)
        if other is not None:
            raise ConfigError(f"{named[0][0]} names {name!r} but {other[0]} names "
                              f"{other[1]!r}: name the game once")
    else:
        name = _base_family_game(base_path, config_file) or GameConfig.name
    if not str(name).strip():
        raise ConfigError("the game name is empty; `selfplay games` lists the known ones")
    entry = resolve(str(name))
    # a base family's top level must not undo its own tuning of this game (``base: classic``
    # with CartPole-v1 keeps CartPole's settings): the base, its game section, the file's own
    layers = [family_defaults(entry.family, entry.name), base,
              game_section(base_games, entry.name, base_path), own,
              game_section(own_games, entry.name, Path(config_file) if config_file else None),
              sets,
              {"game": {"name": entry.name}}]
    if seed is not None:
        layers.append({"seed": seed})
    if total_steps is not None:
        layers.append({"total_steps": total_steps})
    if init_from is not None:
        layers.append({"init_from": str(init_from)})
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = deep_merge(merged, layer)
    config = config_from_mapping(plain(merged))
    check_new_settings(config)
    return config


def _base_family_game(base_path: Path | None, config_file: str | Path | None) -> str | None:
    """The game of a config file that names none but a ``base`` family: the default game if
    it is the family's, else the family's only game; an error naming its games when it has
    several (the default game, CartPole-v1, would train under another family's settings)."""
    if base_path is None:
        return None
    families = {path.resolve(): name for name, path in plugin_files().items()}
    if base_path.parent.resolve() == HYPERPARAMS_DIR.resolve():
        families[base_path.resolve()] = base_path.stem
    family = families.get(base_path.resolve())
    if family is None:
        return None
    from games.registry import family_named  # local: keeps config importable without games

    try:
        games = family_named(family).games
    except GameError:  # a settings file without a registered family
        return None
    if GameConfig.name in games:  # the default game is one of the family's
        return GameConfig.name
    if len(games) == 1:
        return games[0]
    listed = ", ".join(games) if games else f"{family_named(family).prefix}/<game>"
    raise ConfigError(f"{config_file} names base {family!r} but no game: add --game or "
                      f"game.name ({family}'s games: {listed})")


def config_from_mapping(data: dict[str, Any], on_this_machine: bool = True) -> TrainConfig:
    try:
        config = from_mapping(TrainConfig, data)
    except OptionError as exc:
        raise ConfigError(str(exc)) from exc
    validate(config, on_this_machine)
    return config


def saved_config_from_mapping(data: dict[str, Any]) -> TrainConfig:
    """A run's resolved config as saved (config.yaml, checkpoints, snapshots). Saved configs
    hold every key, so a missing one dates the run: a network without ``grid_critic`` was
    saved before size-agnostic gridnets and has the flatten critic. Its ``device`` is not
    checked against this machine: a GPU run's weights play and rate anywhere (resuming the run
    checks it, :func:`selfplay.run_dirs.saved_config`)."""
    network = data.get("network")
    if isinstance(network, dict) and "grid_critic" not in network:
        data = {**data, "network": {**network, "grid_critic": "flatten"}}
    return config_from_mapping(data, on_this_machine=False)


def config_to_yaml(config: TrainConfig) -> str:
    return yaml_dump(to_mapping(config))
