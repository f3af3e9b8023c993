"""microRTS maps: the engine's shipped maps by name, or a user's XML map by path.

Shipped maps are found by file stem, case-insensitively (``basesWorkers8x8``,
``basesWorkers16x16``, ``(4)BloodBath.scmA``...), or by their path inside the engine folder
(``maps/16x16/basesWorkers16x16.xml``, as MicroRTS-Py spells them). Anything ending in ``.xml``
that is not a shipped map is read as a path. Maps are parsed without resolving entities: a map
that declares a DOCTYPE or ENTITY is refused (the engine's own XML parser would resolve them).
The check runs on expat's parse of the file, so it holds in every encoding expat reads (UTF-8,
UTF-16, Latin-1...), not only where the bytes spell ``<!DOCTYPE`` in ASCII.
"""

from __future__ import annotations

import difflib
import re
import xml.etree.ElementTree as ET
import xml.parsers.expat
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from games.core import GameError
from games.microrts.engine import ensure_engine

try:  # optional hardening; the DOCTYPE/ENTITY check below already refuses entity tricks
    from defusedxml.ElementTree import (  # type: ignore[import-untyped,unused-ignore]
        fromstring as _fromstring,
    )
except ImportError:  # pragma: no cover - depends on the environment
    _fromstring = ET.fromstring

# "<!" at the start of a token expat rejects, in the byte forms of the encodings it reads
_DECLARATION_STARTS = {"<!".encode(enc): enc for enc in ("utf-8", "utf-16-le", "utf-16-be")}
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)\b", re.IGNORECASE)


@dataclass(frozen=True)
class MapInfo:
    """A parsed map: where it is and what the adapter needs from it."""

    name: str
    path: Path
    height: int
    width: int
    walls: np.ndarray  # bool [H, W] terrain that blocks movement

    @property
    def shape(self) -> tuple[int, int]:
        return (self.height, self.width)


def shipped_maps(home: Path | None = None) -> dict[str, Path]:
    """Every shipped map, by file stem."""
    root = (home or ensure_engine()) / "maps"
    return {p.stem: p for p in sorted(root.rglob("*.xml"))}


UNIT_TYPES = ("Resource", "Base", "Barracks", "Worker", "Light", "Heavy", "Ranged")
"""The unit types of the engine's ``UnitTypeTable`` (any other name is a Java null pointer)."""


def parse_map(path: Path, name: str | None = None) -> MapInfo:
    """Read a map's size and terrain; :class:`GameError` for anything the engine would reject
    (for a shipped map, naming the command that repairs the engine's files)."""
    try:
        return _parse_map(path, name)
    except GameError as exc:
        from games.microrts.engine import engine_home

        try:
            shipped = path.resolve().is_relative_to(engine_home().resolve())
        except OSError:
            shipped = False
        if not shipped:
            raise
        raise GameError(f"{exc}; it is one of the engine's own maps: `selfplay setup "
                        "microrts` checks the engine's files and fetches damaged ones again"
                        ) from exc


def _parse_map(path: Path, name: str | None) -> MapInfo:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GameError(f"cannot read microRTS map {str(path)!r}: {exc.strerror or exc}") from exc
    _refuse_declarations(data, path)
    try:
        root = _fromstring(data)
    except ET.ParseError as exc:
        raise GameError(f"invalid XML in microRTS map {str(path)!r}: {exc}") from exc
    except Exception as exc:  # defusedxml's own refusals
        raise GameError(f"microRTS map {str(path)!r} refused: {exc}") from exc
    if root.tag != "rts.PhysicalGameState":
        raise GameError(f"microRTS map {str(path)!r}: root element is <{root.tag}>, expected "
                        "<rts.PhysicalGameState>")
    try:
        width, height = int(root.get("width", "")), int(root.get("height", ""))
    except ValueError:
        raise GameError(f"microRTS map {str(path)!r}: width/height attributes missing or not "
                        "integers") from None
    if not (0 < width <= 256 and 0 < height <= 256):
        raise GameError(f"microRTS map {str(path)!r}: size {width}x{height} out of range")
    terrain_el = root.find("terrain")
    terrain = (terrain_el.text or "").strip() if terrain_el is not None else ""
    if len(terrain) != width * height or set(terrain) - {"0", "1"}:
        raise GameError(f"microRTS map {str(path)!r}: <terrain> must be {width * height} "
                        f"characters of 0/1, got {len(terrain)}")
    walls = (np.frombuffer(terrain.encode(), np.uint8) == ord("1")).reshape(height, width)
    problem = _players_and_units_problem(root, width, height)
    if problem is not None:
        raise GameError(f"microRTS map {str(path)!r}: {problem}")
    return MapInfo(name or path.stem, path.resolve(), height, width, walls)


def _players_and_units_problem(root: ET.Element, width: int, height: int) -> str | None:
    """What the engine would fail on (an index error naming neither the map nor the fix, a
    Java NullPointerException), or what would make every game end at once: a map must have
    players 0 and 1 with whole resources, each owning a unit, and units with distinct whole
    IDs, owned by -1 (nobody), 0 or 1, on distinct cells of the board, of the unit types the
    engine's table holds."""
    players = root.find("players")
    ids = sorted(p.get("ID", "") for p in (players if players is not None else [])
                 if p.tag == "rts.Player")
    if ids != ["0", "1"]:
        return f"<players> must hold rts.Player ID=\"0\" and ID=\"1\", got IDs {ids}"
    for player in players if players is not None else []:
        value = player.get("resources", "0")
        if not value.strip().isdigit():
            return (f"player {player.get('ID')}: resources must be a whole number, got "
                    f"{value!r}")
    units = root.find("units")
    seen: set[str] = set()
    cells: dict[tuple[int, int], str] = {}
    owners: set[int] = set()
    for unit in units if units is not None else []:
        ident = unit.get("ID")
        if ident is None or not ident.strip().isdigit():
            return f"a unit's ID must be a whole number, got {ident!r}"
        if ident in seen:
            return f"two units have ID {ident!r}; unit IDs must differ"
        seen.add(ident)
        if unit.get("type") not in UNIT_TYPES:
            return (f"unit {ident!r} has type {unit.get('type')!r}; the engine's types are "
                    f"{', '.join(UNIT_TYPES)}")
        for key in ("resources", "hitpoints"):
            amount = unit.get(key)
            if amount is not None and not amount.strip().lstrip("-").isdigit():
                return f"unit {ident!r}: {key} must be an integer, got {amount!r}"
        try:
            owner, x, y = (int(unit.get(key, "")) for key in ("player", "x", "y"))
        except ValueError:
            return f"unit {unit.get('ID')!r}: player, x and y must be integers"
        if owner not in (-1, 0, 1):
            return f"unit {unit.get('ID')!r} belongs to player {owner}; owners are -1, 0 and 1"
        if not (0 <= x < width and 0 <= y < height):
            return f"unit {unit.get('ID')!r} at ({x}, {y}) is outside the {width}x{height} board"
        if (x, y) in cells:
            return f"units {cells[x, y]!r} and {ident!r} are both at ({x}, {y})"
        cells[x, y] = ident
        owners.add(owner)
    for side in (0, 1):
        if side not in owners:  # every game would end at its first step
            return f"player {side} has no units"
    return None


class _Declared(Exception):
    """Raised from expat's handlers: the map declares a DOCTYPE or an ENTITY."""


def _refuse_declarations(data: bytes, path: Path) -> None:
    """:class:`GameError` if ``data`` declares a DOCTYPE or ENTITY, in whatever encoding: expat
    decodes the document (byte-order mark, ``encoding=`` declaration) and reports both
    declarations to handlers that refuse them. An ENTITY outside a DOCTYPE is a syntax error to
    expat; a declaration keyword at the error's position is refused the same way."""
    def doctype(name: str, *_: object) -> None:
        raise _Declared(f"DOCTYPE {name!r}")

    def entity(name: str, *_: object) -> None:
        raise _Declared(f"ENTITY {name!r}")

    parser = xml.parsers.expat.ParserCreate()
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    try:
        parser.Parse(data, True)
    except _Declared as exc:
        raise GameError(f"microRTS map {str(path)!r} declares a DOCTYPE/ENTITY ({exc}); refused "
                        "(maps are plain XML: remove the declaration)") from None
    except xml.parsers.expat.ExpatError:
        at = data[parser.ErrorByteIndex:] if parser.ErrorByteIndex >= 0 else b""
        for start, encoding in _DECLARATION_STARTS.items():
            if at.startswith(start):
                match = _DECLARATION.match(at[:64].decode(encoding, errors="replace"))
                if match:
                    raise GameError(f"microRTS map {str(path)!r} declares a DOCTYPE/ENTITY "
                                    f"(<!{match.group(1).upper()} at line "
                                    f"{parser.ErrorLineNumber}); refused (maps are plain XML: "
                                    "remove the declaration)") from None
        # other syntax errors are reported by the parse that follows, with ElementTree's words


@lru_cache(maxsize=256)
def _cached_parse(path: str, mtime: float, name: str) -> MapInfo:
    return parse_map(Path(path), name)


def _listing(maps: dict[str, Path], root: Path) -> str:
    """Map names grouped by folder, smallest size first: ``4x4: a, b; 8x8: c; BroodWar: d;
    other: e`` (``other``: the maps directly in ``maps/``)."""
    groups: dict[str, list[str]] = {}
    for stem, path in maps.items():
        folder = path.parent.relative_to(root).as_posix()
        groups.setdefault("other" if folder == "." else folder, []).append(stem)

    def order(folder: str) -> tuple[int, str]:
        size = re.fullmatch(r"(\d+)x(\d+)", folder)
        return (int(size.group(1)) * int(size.group(2)) if size else 1 << 30, folder)

    return "; ".join(f"{folder}: {', '.join(sorted(groups[folder], key=str.lower))}"
                     for folder in sorted(groups, key=order))


def resolve_map(name: str) -> MapInfo:
    """A shipped map by name (or engine-relative path), else a path to a user's XML map.
    Its :attr:`MapInfo.name` is the shipped map's name, or the user's map's absolute path."""
    home = ensure_engine()
    maps = shipped_maps(home)
    by_key = {stem.lower(): path for stem, path in maps.items()}
    key = name.strip()
    given = Path(key).expanduser()
    is_xml = given.suffix.lower() == ".xml"
    base = (given.stem if is_xml else given.name).lower()
    if is_xml and not given.is_absolute() and (home / given).is_file():
        path = home / given  # "maps/16x16/basesWorkers16x16.xml"
    elif is_xml and given.is_file():
        path = given  # a user's map
    elif base in by_key and (not is_xml or given.parent == Path(".")):
        path = by_key[base]  # a name ("basesWorkers8x8", "8x8/basesWorkers8x8"), not a path
    elif is_xml:  # a path to a file that is not there: never a shipped map of that name
        raise GameError(f"microRTS map file {key!r} does not exist or is not a file")
    elif given.is_file():
        raise GameError(f"microRTS map {key!r} is not an XML map file (.xml)")
    elif given.exists():
        raise GameError(f"microRTS map {key!r} is a folder, not an XML map file")
    else:
        close = difflib.get_close_matches(base, list(by_key), n=3, cutoff=0.6)
        stems = {k: p.stem for k, p in by_key.items()}
        hint = f" (did you mean {', '.join(stems[c] for c in close)}?)" if close else ""
        raise GameError(f"unknown microRTS map {name!r}{hint}; use a shipped map or a path to "
                        f"an XML map file. The {len(maps)} shipped maps (in {home / 'maps'}), "
                        f"by folder: {_listing(maps, home / 'maps')}")
    # a shipped map is known by its name; a user's by its absolute path, which finds it
    # again (in a replay's metadata, a recording plan, a tournament's id)
    shipped = path.resolve().is_relative_to((home / "maps").resolve())
    return _cached_parse(str(path.resolve()), path.stat().st_mtime,
                         path.stem if shipped else str(path.resolve()))


def resolve_maps(names: Sequence[str], same_size: bool = True) -> list[MapInfo]:
    """Several maps; with ``same_size`` they must share one size (a batch of one grid shape,
    where no padding is wanted)."""
    if not names:
        raise GameError("no microRTS map given")
    infos = [resolve_map(n) for n in names]
    shapes = {m.shape for m in infos}
    if same_size and len(shapes) > 1:
        listed = ", ".join(f"{m.name} ({m.height}x{m.width})" for m in infos)
        raise GameError(f"microRTS maps in one environment must have the same size; got {listed}")
    return infos
