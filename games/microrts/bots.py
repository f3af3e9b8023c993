"""The scripted and search bots shipped in the engine's jars, by case-insensitive name.

Constructor signatures were read from the jars (``microrts.jar`` and ``lib/bots/*.jar`` of
gym-microrts 0.6.0) with JPype reflection. Search bots (NaiveMCTS, the competition bots) spend a
time budget of about 100 ms per game cycle, so an environment with one is ~1,000x slower than one
with a scripted rush. A fully qualified Java class name with a ``(UnitTypeTable)`` or no-argument
constructor also works (``ai.abstraction.WorkerRush``).

Bots that use randomness (RandomBiased, Random, the search bots, the economy rushes) draw from
``java.util.Random`` generators that Java seeds from the clock: their own fields
(:func:`seed_bot` reseeds them) and static ones shared by every game in the JVM (``util.Sampler``,
which RandomBiased samples from, the MCTS nodes, ``rts.PlayerActionGenerator``;
:func:`seed_engine` reseeds them). :attr:`BotSpec.deterministic`
marks the bots observed to play the same game every time without it (same map, sides and
opponent): the scripted bots, except Mayari (wall-clock budget), CoacAI (draws from a fresh
``java.util.Random`` in some fights) and the economy rushes, EconomyLightRush included (an
unseeded ``Random`` field).

Every public ``ai.core.AI`` class in the jars was tried (constructed, 60 cycles driven from
Python, then games of 200-300 cycles on basesWorkers8x8 against WorkerRush from both sides and
against Passive, through the engine's bot-vs-bot client). Named here: those that construct from
a ``UnitTypeTable`` (or nothing) and give their units orders. Not named (reachable by class
name where they construct at all):

- ``ai.scv.SCV``: needs Weka, which no shipped jar contains (``NoClassDefFoundError``).
- ``ai.ahtn.AHTNAI``, ``ai.mcts.informedmcts.InformedNaiveMCTS``: read data files
  (``data/ahtn/*.lisp``, ``data/bayesianmodels/...``) that gym-microrts does not ship.
- ``ai.RandomNoAttackAI``, ``ai.socket.*``, ``ai.jni.JNIAI``: agents driven from outside
  (socket or JNI), with no ``(UnitTypeTable)`` constructor or no one to answer them; wrappers
  and parts built from other AIs or scripts (``ai.core.ContinuingAI``, ``UnitScriptsAI``,
  ``SingleChoiceConfigurableScript``, MixedBot's ``ImprovedStrategyTactics``).
- ``ai.minimax.ABCD.ABCD``, ``ai.minimax.RTMiniMax.RTMinimax``: fixed-depth searches with no
  time budget (those three games had not ended after 13 minutes for ABCD, 4 for RTMinimax;
  the others took 0-60 s); their iterative-deepening versions IDABCD and
  IDRTMinimax(Randomized) are named.
- In the competition jars: classes that fail in their first cycles (Izanagi's GAB/SAB/IDABCD
  variants and CMAB MCTS builders, Droplet's GuidedGreedyNaiveMCTS, GRojoA3N's ChromosomeAI and
  GuidedA3NW, the PGS/SSS ``*SCriptChoice*`` and configurable-script variants: null scripts or
  class names built from missing settings), scripts that order nothing in a game's first 60
  cycles (Izanagi's combat-only ``*Strategy`` classes, GRojoA3N's ``ChromosomeAI_UCB`` with its
  default script), Izanagi's ``SandBox`` and test classes, and MixedBot's copy of SSSmRTS.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any, Literal

from games.core import GameError
from games.microrts.engine import java_error_message


@dataclass(frozen=True)
class BotSpec:
    name: str  # canonical spelling
    java_class: str
    args: Literal["utt", "none"]  # constructor: (UnitTypeTable) or ()
    kind: Literal["scripted", "random", "search"]
    summary: str = ""
    deterministic: bool = False  # plays the same game every time (see the module docstring)


_A = "ai.abstraction."
_BOTS: tuple[BotSpec, ...] = (
    BotSpec("WorkerRush", _A + "WorkerRush", "utt", "scripted", "all workers attack"),
    BotSpec("LightRush", _A + "LightRush", "utt", "scripted", "barracks, light units attack"),
    BotSpec("HeavyRush", _A + "HeavyRush", "utt", "scripted", "barracks, heavy units attack"),
    BotSpec("RangedRush", _A + "RangedRush", "utt", "scripted", "barracks, ranged units attack"),
    BotSpec("WorkerDefense", _A + "WorkerDefense", "utt", "scripted"),
    BotSpec("LightDefense", _A + "LightDefense", "utt", "scripted"),
    BotSpec("HeavyDefense", _A + "HeavyDefense", "utt", "scripted"),
    BotSpec("RangedDefense", _A + "RangedDefense", "utt", "scripted"),
    BotSpec("EconomyRush", _A + "EconomyRush", "utt", "scripted"),
    BotSpec("EconomyMilitaryRush", _A + "EconomyMilitaryRush", "utt", "scripted"),
    BotSpec("EconomyRushBurster", _A + "EconomyRushBurster", "utt", "scripted"),
    BotSpec("SimpleEconomyRush", _A + "SimpleEconomyRush", "utt", "scripted"),
    BotSpec("WorkerRushPlusPlus", _A + "WorkerRushPlusPlus", "utt", "scripted"),
    BotSpec("EMRDeterministico", _A + "EMRDeterministico", "utt", "scripted"),
    BotSpec("CRush_V1", _A + "cRush.CRush_V1", "utt", "scripted"),
    BotSpec("CRush_V2", _A + "cRush.CRush_V2", "utt", "scripted"),
    BotSpec("POWorkerRush", _A + "partialobservability.POWorkerRush", "utt", "scripted",
            "WorkerRush for partial observability"),
    BotSpec("POLightRush", _A + "partialobservability.POLightRush", "utt", "scripted"),
    BotSpec("POHeavyRush", _A + "partialobservability.POHeavyRush", "utt", "scripted"),
    BotSpec("PORangedRush", _A + "partialobservability.PORangedRush", "utt", "scripted"),
    BotSpec("Passive", "ai.PassiveAI", "utt", "scripted", "does nothing"),
    BotSpec("RandomBiased", "ai.RandomBiasedAI", "none", "random",
            "random, biased towards attack/harvest/return"),
    BotSpec("Random", "ai.RandomAI", "utt", "random", "uniformly random legal actions"),
    BotSpec("RandomBiasedSingleUnit", "ai.RandomBiasedSingleUnitAI", "none", "random"),
    BotSpec("CoacAI", "ai.coac.CoacAI", "utt", "scripted", "microRTS 2020 competition winner"),
    BotSpec("Mayari", "mayariBot.mayari", "utt", "scripted", "microRTS 2021 competition winner"),
    BotSpec("Droplet", "GNS.Droplet", "utt", "search", "2019 competition bot"),
    BotSpec("Izanagi", "ai.competition.IzanagiBot.Izanagi", "utt", "search"),
    BotSpec("Tiamat", "ai.competition.tiamat.Tiamat", "utt", "search"),
    BotSpec("MixedBot", "ai.JZ.MixedBot", "utt", "search"),
    BotSpec("GRojoA3N", "ai.competition.GRojoA3N.GuidedRojoA3N", "utt", "search"),
    BotSpec("Rojo", "ai.competition.rojobot.Rojo", "utt", "scripted"),
    BotSpec("NaiveMCTS", "ai.mcts.naivemcts.NaiveMCTS", "utt", "search"),
    BotSpec("UCT", "ai.mcts.uct.UCT", "utt", "search"),
    BotSpec("MonteCarlo", "ai.montecarlo.MonteCarlo", "utt", "search"),
    BotSpec("PortfolioGreedySearch", "ai.portfolio.portfoliogreedysearch.PGSAI", "utt", "search"),
    BotSpec("PuppetSearchMCTS", "ai.puppet.PuppetSearchMCTS", "utt", "search"),
    BotSpec("IDRTMinimax", "ai.minimax.RTMiniMax.IDRTMinimax", "utt", "search"),
    BotSpec("LSI", "ai.montecarlo.lsi.LSI", "utt", "search"),
    # the rest of microrts.jar's AI classes that construct from a UnitTypeTable and play
    BotSpec("Portfolio", "ai.portfolio.PortfolioAI", "utt", "search",
            "simulates a portfolio of scripts, plays the best"),
    BotSpec("IDRTMinimaxRandomized", "ai.minimax.RTMiniMax.IDRTMinimaxRandomized", "utt",
            "search"),
    BotSpec("IDABCD", "ai.minimax.ABCD.IDABCD", "utt", "search"),
    BotSpec("TwoPhaseNaiveMCTS", "ai.mcts.naivemcts.TwoPhaseNaiveMCTS", "utt", "search"),
    BotSpec("TwoPhaseNaiveMCTSPerNode", "ai.mcts.naivemcts.TwoPhaseNaiveMCTSPerNode", "utt",
            "search"),
    BotSpec("MLPSMCTS", "ai.mcts.mlps.MLPSMCTS", "utt", "search"),
    BotSpec("BS1_NaiveMCTS", "ai.mcts.believestatemcts.BS1_NaiveMCTS", "utt", "search",
            "NaiveMCTS on a belief state (partial observability)"),
    BotSpec("BS2_NaiveMCTS", "ai.mcts.believestatemcts.BS2_NaiveMCTS", "utt", "search"),
    BotSpec("BS3_NaiveMCTS", "ai.mcts.believestatemcts.BS3_NaiveMCTS", "utt", "search"),
    BotSpec("UCTUnitActions", "ai.mcts.uct.UCTUnitActions", "utt", "search"),
    BotSpec("DownsamplingUCT", "ai.mcts.uct.DownsamplingUCT", "utt", "search"),
    BotSpec("UCTFirstPlayUrgency", "ai.mcts.uct.UCTFirstPlayUrgency", "utt", "search"),
    BotSpec("PuppetSearchAB", "ai.puppet.PuppetSearchAB", "utt", "search"),
    BotSpec("PuppetNoPlan", "ai.puppet.PuppetNoPlan", "utt", "search"),
    BotSpec("BasicConfigurableScript", "ai.puppet.BasicConfigurableScript", "utt", "scripted",
            "Puppet Search's script with its default choices"),
    BotSpec("UnitActionProbabilityDistribution",
            "ai.stochastic.UnitActionProbabilityDistributionAI", "utt", "random",
            "random actions from a fixed distribution over action types"),
    # the competition jars' other bots (building blocks of Droplet, Izanagi and MixedBot)
    BotSpec("EconomyLightRush", "GNS.EconomyLightRush", "utt", "scripted", "from Droplet.jar"),
    BotSpec("HeavyRushPlan", "ai.CMAB.ScriptsAbstractions.HeavyRushPlan", "utt", "scripted",
            "from Izanagi.jar"),
    BotSpec("LightRushPlan", "ai.CMAB.ScriptsAbstractions.LightRushPlan", "utt", "scripted"),
    BotSpec("RangedRushPlan", "ai.CMAB.ScriptsAbstractions.RangedRushPlan", "utt", "scripted"),
    BotSpec("PGSLimit", "ai.asymmetric.GAB.PGSLimit", "utt", "search"),
    BotSpec("PGSLimitScriptC", "ai.asymmetric.GAB.PGSLimitScriptC", "utt", "search"),
    BotSpec("PGSSelection", "ai.asymmetric.PGS.PGSSelection", "utt", "search"),
    BotSpec("PGSmRTS", "ai.asymmetric.PGS.PGSmRTS", "utt", "search"),
    BotSpec("SSSmRTS", "ai.asymmetric.SSS.SSSmRTS", "utt", "search",
            "stratified strategy selection"),
    BotSpec("SSSLimit", "ai.asymmetric.SAB.SSSLimit", "utt", "search"),
    BotSpec("SSSLimitRandom", "ai.asymmetric.SAB.SSSLimitRandom", "utt", "search"),
    BotSpec("SSSLimitScriptChoose", "ai.asymmetric.SAB.SSSLimitScriptChoose", "utt", "search"),
    BotSpec("LightSSSLimitScriptChoose", "ai.asymmetric.SAB.LightSSSLimitScriptChoose", "utt",
            "search"),
    BotSpec("ImprovedCapivara", "ai.JZ.competition.capivara.ImprovedCapivara", "utt", "search",
            "from MixedBot.jar"),
    BotSpec("ImprovedTiamat", "ai.JZ.competition.tiamat.ImprovedTiamat", "utt", "search"),
)
_NOT_DETERMINISTIC = {"Mayari", "CoacAI", "EconomyRush", "EconomyMilitaryRush",
                      "EconomyRushBurster", "SimpleEconomyRush", "EconomyLightRush"}
_BOTS = tuple(replace(b, deterministic=b.kind == "scripted" and b.name not in _NOT_DETERMINISTIC)
              for b in _BOTS)
_BY_KEY: dict[str, BotSpec] = {b.name.lower(): b for b in _BOTS}
_ALIASES = {"coac": "CoacAI", "mayaribot": "Mayari", "guidedrojoa3n": "GRojoA3N",
            "randombiasedai": "RandomBiased", "passiveai": "Passive", "randomai": "Random",
            "pgs": "PortfolioGreedySearch", "mcts": "NaiveMCTS", "portfolioai": "Portfolio",
            "unitactionprobabilitydistributionai": "UnitActionProbabilityDistribution"}


def bot_names() -> list[str]:
    """Canonical names of every shipped bot."""
    return [b.name for b in _BOTS]


def bot_aliases() -> dict[str, str]:
    """Other names of shipped bots (lower case, e.g. the Java class's ``randomai``) ->
    canonical names."""
    return {alias.lower(): name for alias, name in _ALIASES.items()}


def resolve_bot(name: str) -> BotSpec:
    """The :class:`BotSpec` for ``name`` (case-insensitive, or a Java class name, which names
    the bot in full: the name resolves to the same class wherever it is passed on)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key).lower()
    if key in _BY_KEY:
        return _BY_KEY[key]
    if "." in name and not name.strip().endswith("."):
        return BotSpec(name.strip(), name.strip(), "utt", "scripted", "custom class")
    close = difflib.get_close_matches(key, list(_BY_KEY) + list(_ALIASES), n=2, cutoff=0.6)
    suggestions = dict.fromkeys(_canonical(c) for c in close)  # an alias and its bot: once
    hint = f" (did you mean {', '.join(suggestions)}?)" if close else ""
    raise GameError(f"unknown microRTS bot {name!r}{hint}; known: {', '.join(bot_names())}")


def _canonical(key: str) -> str:
    return _ALIASES.get(key) or _BY_KEY[key].name


def make_bot(spec: BotSpec, utt: Any) -> Any:
    """A new Java ``ai.core.AI`` for ``spec`` (the JVM must be running)."""
    import jpype

    try:
        cls = jpype.JClass(spec.java_class)
    except Exception as exc:  # JPype raises TypeError or a Java ClassNotFoundException
        missing = ("needs a class missing from the engine jars" if "NoClassDefFound" in str(exc)
                   else "not found in the engine jars")
        raise GameError(f"bot {spec.name!r}: Java class {spec.java_class} {missing} "
                        f"({exc})") from exc
    if not jpype.JClass("ai.core.AI").class_.isAssignableFrom(cls.class_):
        raise GameError(f"bot {spec.name!r}: {spec.java_class} is not an ai.core.AI")
    try:
        try:
            return cls(utt) if spec.args == "utt" else cls()
        except TypeError:  # no (UnitTypeTable) constructor: try the no-argument one
            try:
                return cls()
            except TypeError as exc:
                raise GameError(f"bot {spec.name!r}: {spec.java_class} has neither a "
                                f"(UnitTypeTable) nor a () constructor") from exc
    except jpype.JException as exc:  # the constructor threw (e.g. a data file it reads)
        raise GameError(f"bot {spec.name!r}: constructing {spec.java_class} failed: "
                        f"{java_error_message(exc)}") from exc


_RANDOM_FIELDS: dict[tuple[str, bool], list[Any]] = {}  # (class, static) -> reflected fields


def _random_fields(cls: Any, static: bool = False) -> list[Any]:
    """The accessible ``java.util.Random`` fields (static or not) of Java class ``cls`` and its
    superclasses (reflected once per class)."""
    key = (str(cls.getName()), static)
    if key not in _RANDOM_FIELDS:
        import jpype

        random_cls = jpype.JClass("java.util.Random").class_
        modifier = jpype.JClass("java.lang.reflect.Modifier")
        found = []
        while cls is not None:
            for f in cls.getDeclaredFields():
                if (bool(modifier.isStatic(f.getModifiers())) != static
                        or not random_cls.isAssignableFrom(f.getType())):
                    continue
                try:
                    f.setAccessible(True)
                except jpype.JException:  # a module that does not open the field: leave it
                    continue
                found.append(f)
            cls = cls.getSuperclass()
        _RANDOM_FIELDS[key] = found
    return _RANDOM_FIELDS[key]


# classes whose static java.util.Random fields bots draw from (found with javap in the jars)
_STATIC_GENERATORS = ("util.Sampler", "rts.PlayerActionGenerator", "rts.GameState",
                      "rts.UnitAction", "ai.mcts.MCTSNode", "ai.mcts.uct.UCTNode",
                      "ai.mcts.uct.UCTNodeFirstPlayUrgency", "ai.mcts.uct.UCTUnitActionsNode",
                      "ai.mcts.uct.DownsamplingUCTNode")


def _reseed(fields: list[Any], owner: Any, seed: int) -> int:
    count = 0
    for f in fields:
        generator = f.get(owner)
        if generator is not None:
            generator.setSeed(seed)
            count += 1
    return count


def seed_engine(seed: int) -> int:
    """Seed the engine's static ``java.util.Random`` fields (shared by every game in this JVM,
    so games stepped together draw from them in stepping order); how many were seeded."""
    import jpype

    count = 0
    for name in _STATIC_GENERATORS:
        try:
            cls = jpype.JClass(name).class_
        except TypeError:  # JPype's "Class ... is not found": not in this engine build
            continue
        count += _reseed(_random_fields(cls, static=True), None, seed)
    return count


def seed_bot(ai: Any, seed: int) -> int:
    """Seed every non-static ``java.util.Random`` field of the Java bot ``ai`` (its class and
    superclasses) with ``seed``; how many were seeded."""
    return _reseed(_random_fields(ai.getClass()), ai, seed)


def canonical_pool(names: list[str]) -> list[str]:
    """The canonical names of ``names`` (game options' ``bots``), each once, in order."""
    return list(dict.fromkeys(resolve_bot(name).name for name in names))
