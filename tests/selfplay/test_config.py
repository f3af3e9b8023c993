"""Config loading: layers, overrides, and errors that name the bad key."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from games.core import GameError
from selfplay.config import ConfigError, PPOConfig, TrainConfig, validate
from selfplay.config_files import build_config, config_to_yaml, parse_set


def test_family_defaults_then_overrides() -> None:
    config = build_config("CartPole-v1", overrides=["ppo.learning_rate=1e-3", "game.num_envs=3"],
                          seed=5, total_steps=1234)
    assert config.game.name == "CartPole-v1"
    assert config.ppo.learning_rate == pytest.approx(1e-3)
    assert config.game.num_envs == 3
    assert config.seed == 5 and config.total_steps == 1234
    assert config.network.kind == "mlp"  # from hyperparams/classic.yaml


def test_per_game_section_overrides_family() -> None:
    config = build_config("Pendulum-v1")
    assert config.normalize.obs and config.normalize.reward
    assert build_config("CartPole-v1").normalize.obs is False


def test_game_alias_and_case() -> None:
    assert build_config("cartpole").game.name == "CartPole-v1"
    assert build_config("halfcheetah-V5").game.name == "HalfCheetah-v5"


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"ppo\.learning_rat.*did you mean 'learning_rate'"):
        build_config("CartPole-v1", overrides=["ppo.learning_rat=1e-3"])


def test_wrong_type_is_named() -> None:
    with pytest.raises(ConfigError, match=r"ppo\.num_steps: expected an integer"):
        build_config("CartPole-v1", overrides=["ppo.num_steps=abc"])
    with pytest.raises(ConfigError, match=r"network\.activation"):
        build_config("CartPole-v1", overrides=["network.activation=sigmoid"])


def test_cross_field_validation() -> None:
    with pytest.raises(ConfigError, match="gamma"):
        build_config("CartPole-v1", overrides=["ppo.gamma=1.5"])


def test_more_minibatches_than_rows_is_refused() -> None:
    """--set ppo.num_minibatches=100000 over a 512-row update trained on silently (every
    minibatch empty, so no gradient step at all)."""
    overrides = ["ppo.num_steps=128", "game.num_envs=4"]
    with pytest.raises(ConfigError, match=r"^ppo\.num_minibatches \(100000\) exceeds .*"
                                          r"\(128 \* 4 = 512\).*num_minibatches <= 512"):
        build_config("CartPole-v1", overrides=[*overrides, "ppo.num_minibatches=100000"])
    assert build_config("CartPole-v1", overrides=[*overrides, "ppo.num_minibatches=512"])
    with pytest.raises(ConfigError, match=r"ppo\.num_minibatches must be >= 1"):
        build_config("CartPole-v1", overrides=[*overrides, "ppo.num_minibatches=0"])


def test_bc_balance_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^bc\.balance must be between 0 and 1, got 1\.5"):
        build_config("tictactoe", overrides=["bc.balance=1.5"])
    assert build_config("tictactoe", overrides=["bc.balance=1"]).bc.balance == 1.0


def test_unknown_game_lists_known() -> None:
    with pytest.raises(GameError, match=r"unknown game 'CartPol-v1'.*did you mean.*known:"):
        build_config("CartPol-v1")


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        build_config("CartPole-v1", config_file=tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo:\n  learning_rate: [1, 2\n")
    with pytest.raises(ConfigError, match="malformed YAML.*line"):
        build_config("CartPole-v1", config_file=bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        build_config("CartPole-v1", config_file=scalar)


def test_non_utf8_file_is_named(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("# réglages\nppo:\n  learning_rate: 1.0e-4\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(latin1))} is not UTF-8 text "
                                          r"\(byte 3: 0xe9\); save it as UTF-8$"):
        build_config("CartPole-v1", config_file=latin1)


def test_user_file_with_base(tmp_path: Path) -> None:
    user = tmp_path / "mine.yaml"
    user.write_text("base: mujoco\ngame:\n  name: Hopper-v5\nppo:\n  learning_rate: 1.0e-4\n")
    config = build_config(config_file=user)
    assert config.game.name == "Hopper-v5"
    assert config.ppo.learning_rate == pytest.approx(1e-4)
    assert config.ppo.num_steps == 2048  # from the base family


def test_base_of_the_games_own_family_keeps_its_tuning(tmp_path: Path) -> None:
    """``base: classic`` for CartPole-v1: the family's top level must not undo the family's
    own CartPole section (it set learning_rate 2.5e-4 and 4 epochs over CartPole's 1e-3 and
    10); the file's own keys still win."""
    user = tmp_path / "mine.yaml"
    user.write_text("base: classic\ngame:\n  name: CartPole-v1\nppo:\n  gamma: 0.97\n")
    config = build_config(config_file=user)
    plain = build_config("CartPole-v1")
    assert (config.ppo.learning_rate, config.ppo.update_epochs) == (1e-3, 10)
    assert config.ppo == replace(plain.ppo, gamma=0.97)
    base = tmp_path / "base.yaml"  # a base naming no section for the game: its top level
    base.write_text("ppo:\n  learning_rate: 5.0e-4\ngames:\n  CartPole-v1:\n    ppo: "
                    "{gamma: 0.9}\n")
    other = tmp_path / "other.yaml"
    other.write_text(f"base: {base}\ngame:\n  name: Acrobot-v1\n")
    assert build_config(config_file=other).ppo.learning_rate == pytest.approx(5e-4)
    assert build_config(config_file=other).ppo.gamma == build_config("Acrobot-v1").ppo.gamma
    bad = tmp_path / "bad_base.yaml"
    bad.write_text("games:\n  CartPole-v1: 3\n")
    user.write_text(f"base: {bad}\ngame:\n  name: CartPole-v1\n")
    with pytest.raises(ConfigError, match="games.CartPole-v1 must be a mapping of settings"):
        build_config(config_file=user)


def test_a_copy_of_a_family_file_works_as_config(tmp_path: Path) -> None:
    """Copying ``hyperparams/classic.yaml`` to edit it: its ``games`` section applies to the
    game trained (after the file's top level), exactly as the family file itself does; a key
    naming no game, two keys for one game and a ``--set games...`` are one-line errors."""
    from selfplay.config_files import HYPERPARAMS_DIR

    copy = tmp_path / "classic.yaml"
    copy.write_text((HYPERPARAMS_DIR / "classic.yaml").read_text())
    for game in ("CartPole-v1", "cartpole-v1", "Acrobot-v1"):
        assert build_config(game, config_file=copy) == build_config(game)
    plain = build_config("Swimmer-v5", config_file=copy)  # no section for it there
    edited = copy.read_text() + "  Swimmer-v5:\n    ppo: {gamma: 0.9}\n"
    copy.write_text(edited)
    assert build_config("Swimmer-v5", config_file=copy).ppo == replace(plain.ppo, gamma=0.9)
    copy.write_text(edited + "  swimmer-V5:\n    ppo: {gamma: 0.8}\n")
    with pytest.raises(ConfigError, match="games.Swimmer-v5 and games.swimmer-V5 name the same"):
        build_config("Swimmer-v5", config_file=copy)
    copy.write_text(edited + "  CartPol-v1:\n    ppo: {gamma: 0.8}\n")
    with pytest.raises(ConfigError, match=r"classic.yaml: games.CartPol-v1: unknown game "
                                          r"'CartPol-v1' \(did you mean CartPole-v1"):
        build_config("CartPole-v1", config_file=copy)
    with pytest.raises(ConfigError, match="set the game's keys directly"):
        build_config("CartPole-v1", overrides=["games.CartPole-v1.ppo.gamma=0.5"])


@pytest.mark.parametrize(("overrides", "message"), [
    (["ppo.learning_rate=.inf"], "ppo.learning_rate must be a finite number, got inf"),
    (["ppo.ent_coef=.nan"], "ppo.ent_coef must be a finite number, got nan"),
    (["ppo.target_kl=.nan"], "ppo.target_kl must be a finite number, got nan"),
    (["ppo.vf_coef=.nan"], "ppo.vf_coef must be a finite number, got nan"),
    (["normalize.clip_obs=-.inf"], "normalize.clip_obs must be a finite number, got -inf"),
    (["seed=99999999999999999999"], "seed must be in 0..2**63-1, got 99999999999999999999"),
    (["game.name="], "the game name is empty"),
    # settings that trained on nonsense without a word (constant observations or rewards, one
    # epoch, a critic pushed away from the returns) or failed deep in training
    (["normalize.clip_obs=-1"], "normalize.clip_obs must be > 0 (.inf: no clipping), got -1"),
    (["normalize.clip_reward=0"], "normalize.clip_reward must be > 0"),
    (["ppo.target_kl=0"], "ppo.target_kl must be > 0 (or null: no early stop), got 0"),
    (["ppo.vf_coef=-1"], "ppo.vf_coef must be >= 0, got -1"),
    (["ppo.ent_coef=-0.01"], "ppo.ent_coef must be >= 0, got -0.01"),
    (["ppo.adam_eps=-1"], "ppo.adam_eps must be > 0, got -1"),
    (["bc.adam_eps=0"], "bc.adam_eps must be > 0, got 0"),
    (["checkpoint.every_minutes=-1"], "checkpoint.every_minutes must be >= 0 (0: off)"),
    (["network.channels=[16, 0]"], "network.channels must be >= 1, got [16, 0]"),
    # a typo such as 1e30 (an int to YAML): an overflow, a hang or an allocation in training
    (["torch_threads=1e30"], "torch_threads must be <= 1,024, got 1"),
    (["acting_threads=5000"], "acting_threads must be <= 1,024, got 5000"),
    (["log.return_window=1e30"], "log.return_window must be <= 1,000,000"),
    (["game.num_envs=1e30"], "game.num_envs must be <= 1,048,576"),
    (["network.hidden=[64, 100000000000]"], "network.hidden must be <= 65,536"),
    (["bc.validation_stride=1e30"], "bc.validation_stride must be <= 100,000"),
    (["league.eval_games=1e30"], "league.eval_games must be <= 100,000"),
    (["league.eval_envs=1e30"], "league.eval_envs must be <= 65,536"),
    ([f"total_steps={10**400}"], "total_steps must be <= 4,611,686,018,427,387,904"),
    (["ppo.update_epochs=1e18"], "ppo.update_epochs must be <= 10,000"),
    (["network.log_std_init=1e300"], "network.log_std_init must be in [-20, 20]"),
    ([f"ppo.learning_rate={10**400}"], "ppo.learning_rate: a number of about 401 digits is "
                                       "too large"),
    ([f"seed={'9' * 5000}"], "--set seed: cannot parse value '99999"),
    # accepted and ignored: acting_threads under async collection, bot_env_pfsp without a league
    (["collection=async", "acting_threads=2"], "acting_threads sets the acting passes'"),
    (["league.enabled=false", "league.bot_env_pfsp=true"],
     "league.enabled is false, yet league.bot_env_pfsp=true ask for a league"),
    (["distributed.address=10.0.0.1:6379"],
     "distributed.address=10.0.0.1:6379 names a Ray cluster, but distributed.backend is "
     "'local': add distributed.backend=ray"),
])
def test_non_finite_numbers_huge_seeds_and_empty_names_are_refused(
        overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        build_config(overrides=overrides)


def test_inf_turns_clipping_off_and_saved_runs_load_as_older_versions_wrote_them() -> None:
    """``.inf`` is "no clipping" for the clipping bounds; the checks of new settings (finite
    numbers, the seed's range, an address needing Ray) are not applied to saved configs,
    which older versions wrote without them."""
    from selfplay.config_files import saved_config_from_mapping

    config = build_config("CartPole-v1", overrides=["normalize.clip_obs=.inf",
                                                    "ppo.max_grad_norm=.inf"])
    assert config.normalize.clip_obs == float("inf") and config.ppo.max_grad_norm == float("inf")
    data = yaml.safe_load(config_to_yaml(build_config("CartPole-v1")))
    data["ppo"]["target_kl"] = float("nan")
    data["distributed"]["address"] = "auto"
    saved = saved_config_from_mapping(data)
    assert saved.distributed.address == "auto" and saved.ppo.target_kl != saved.ppo.target_kl


def test_resolved_config_round_trips() -> None:
    """Read back as saved runs are, also strings that look like numbers in YAML 1.2 (which
    the reader follows and the writer, YAML 1.1, wrote bare: "1e5" resumed as 100000.0)."""
    config = build_config("tictactoe", overrides=[
        "ppo.target_kl=0.02", 'log.wandb_project="1e5"', 'league.db=".5E3"', "league.enabled=true",
        "game.options.render=false"])
    from selfplay.config_files import config_from_mapping, yaml_load

    data = yaml_load(config_to_yaml(config))
    assert isinstance(data, dict) and data["log"]["wandb_project"] == "1e5"
    assert config_from_mapping(data) == config


@pytest.mark.parametrize(("text", "message"), [
    (f"seed: {'9' * 5000}\n", "Exceeds the limit (4300 digits)"),
    ("ppo:\n  ? [a, b]\n  : 1\n", "line 2: a key must be a name, not a list"),
    ("ppo: &p\n  x: *p\n", "an anchor (&name) is used inside itself"),
    ("game:\n  options: &o\n    x: [*o]\n", "an anchor (&name) is used inside itself"),
])
def test_yaml_python_cannot_hold_is_a_config_error(tmp_path: Path, text: str,
                                                   message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"^malformed YAML in {re.escape(str(path))}.*"
                                          f"{re.escape(message)}"):
        build_config("tictactoe", config_file=path)


def test_anchors_shared_many_times_load_at_once() -> None:
    """Every alias of a shared mapping or list is checked once for cycles (a chain of 8
    anchors, each a list of 10 aliases to the one before, took minutes)."""
    import time

    from selfplay.config_files import yaml_load

    text = "a0: &a0 [1]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    start = time.perf_counter()
    data = yaml_load(text)
    assert isinstance(data, dict) and len(data) == 9
    assert time.perf_counter() - start < 1.0


def test_parse_set_errors() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        parse_set(["ppo.learning_rate"])
    assert parse_set(["a.b=1", "a.c=[1, 2]"]) == {"a": {"b": 1, "c": [1, 2]}}


def test_nested_overrides_merge_at_every_depth(tmp_path: Path) -> None:
    """``game.options.reward_weights.win=2`` changes one weight (the others were dropped: Lux
    trained on the win alone), a mapping given whole replaces; ``--set ppo={...}`` after
    ``--set ppo.x=`` merges (it dropped x); a section then a value is refused either way;
    YAML merge keys work."""
    default = build_config("lux").game.options["reward_weights"]
    for later in ([], ["game.options={max_steps: 50}"], ["game={options: {max_steps: 50}}"],
                  ["game={num_envs: 4}"]):  # a later mapping of the section kept it too
        lux = build_config("lux", overrides=["game.options.reward_weights.win=2", *later])
        assert lux.game.options["reward_weights"] == {**default, "win": 2}, later
    # a game option's mapping given whole replaces (BENCHMARKS' "win and lichen lead" runs)
    for given in (["game.options.reward_weights={win: 1.0, lichen_lead: 0.0005}"],
                  ["game.options.reward_weights.ice=1",
                   "game.options.reward_weights={win: 1.0, lichen_lead: 0.0005}"]):
        assert build_config("lux", overrides=given).game.options["reward_weights"] == {
            "win": 1.0, "lichen_lead": 0.0005}
    assert build_config("lux", overrides=["game.options={max_steps: 500}"]).game.options[
        "reward_weights"] == build_config("lux").game.options["reward_weights"]
    config = build_config("CartPole-v1", overrides=["ppo.update_epochs=1", "ppo={gamma: 0.6}"])
    assert (config.ppo.update_epochs, config.ppo.gamma) == (1, 0.6)
    with pytest.raises(ConfigError, match="'ppo' is set both as a section and a value"):
        parse_set(["ppo.gamma=0.6", "ppo=1"])
    user = tmp_path / "merge.yaml"
    user.write_text("defaults: &tuned {gamma: 0.9, update_epochs: 2}\n"
                    "ppo:\n  <<: *tuned\n  gamma: 0.8\n".replace("defaults", "x_defaults"))
    with pytest.raises(ConfigError, match="x_defaults"):  # an unknown key, as any other
        build_config("CartPole-v1", config_file=user)
    user.write_text("ppo:\n  <<: {gamma: 0.9, update_epochs: 2}\n  gamma: 0.8\n")
    config = build_config("CartPole-v1", config_file=user)
    assert (config.ppo.gamma, config.ppo.update_epochs) == (0.8, 2)
    user.write_text("ppo:\n  <<: {gamma: 0.9}\n  <<: {update_epochs: 2}\n")
    with pytest.raises(ConfigError, match="duplicate key '<<'"):
        build_config("CartPole-v1", config_file=user)
    for path, message in ((tmp_path, "is a folder; name a .yaml file"),
                          (Path("/dev/null"), "is not a regular file")):
        with pytest.raises(ConfigError, match=message):
            build_config("CartPole-v1", config_file=path)


def test_defaults_are_valid() -> None:
    validate(TrainConfig())


def test_validate_checks_a_dataclass_built_in_code() -> None:
    """validate works on the dataclass itself, so test_defaults_are_valid can fail."""
    with pytest.raises(ConfigError, match=r"ppo\.num_minibatches must be >= 1"):
        validate(TrainConfig(ppo=PPOConfig(num_minibatches=0)))


def test_microrts_family_file_documents_every_option() -> None:
    """hyperparams/microrts.yaml lists every training setting (with a value) and every
    microRTS game option (set, or shown commented out with its default)."""
    import dataclasses

    from games.microrts.adapter import MicroRTSOptions
    from selfplay.config_files import HYPERPARAMS_DIR, read_yaml

    path = HYPERPARAMS_DIR / "microrts.yaml"
    data = read_yaml(path)

    def missing(obj: object, node: dict, prefix: str) -> list[str]:
        out = []
        for f in dataclasses.fields(obj):  # type: ignore[arg-type]
            key, value = prefix + f.name, getattr(obj, f.name)
            if key in ("game.name", "game.options"):
                continue
            if f.name not in node:
                out.append(key)
            elif dataclasses.is_dataclass(value):
                out += missing(value, node[f.name], key + ".")
        return out

    assert missing(TrainConfig(), data, "") == []
    options, text = data["game"]["options"], path.read_text()
    defaults = MicroRTSOptions()
    for f in dataclasses.fields(MicroRTSOptions):
        if f.name in options:
            continue
        shown = re.search(rf"^    # {f.name}: (.+)$", text, re.MULTILINE)
        assert shown, f"game.options.{f.name} is not documented"
        assert yaml.safe_load(shown.group(1)) == getattr(defaults, f.name), f.name


def test_config_files_refuse_duplicate_keys_self_bases_and_two_game_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: a key given twice kept the last silently; ``base: common.yaml`` read the
    working directory's file before the one beside the config; ``base: self.yaml`` and an
    unknown family gave misleading errors; ``--set game.name`` other than ``--game`` was
    ignored."""
    dup = tmp_path / "dup.yaml"
    dup.write_text("game:\n  num_envs: 3\n  num_envs: 4\n")
    with pytest.raises(ConfigError, match="duplicate key 'num_envs'"):
        build_config("CartPole-v1", dup)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cfg.yaml").write_text("base: common.yaml\n")
    (tmp_path / "sub" / "common.yaml").write_text("game:\n  num_envs: 3\n")
    (tmp_path / "common.yaml").write_text("game:\n  num_envs: 5\n")
    monkeypatch.chdir(tmp_path)
    assert build_config("CartPole-v1", Path("sub/cfg.yaml")).game.num_envs == 3
    (tmp_path / "self.yaml").write_text("base: self.yaml\n")
    with pytest.raises(ConfigError, match="'base' names the file itself"):
        build_config("CartPole-v1", tmp_path / "self.yaml")
    (tmp_path / "nf.yaml").write_text("base: nosuch\n")
    with pytest.raises(ConfigError, match="base 'nosuch' is neither a family .*microrts"):
        build_config("CartPole-v1", tmp_path / "nf.yaml")
    with pytest.raises(ConfigError, match="--game names 'tictactoe' but --set game.name names "
                                          "'CartPole-v1'"):
        build_config("tictactoe", overrides=["game.name=CartPole-v1"])
    assert build_config("cartpole", overrides=["game.name=CartPole-v1"]).game.name == \
        "CartPole-v1"  # two spellings of one game


def test_non_finite_losses_stop_the_run_before_a_checkpoint(tmp_path: Path) -> None:
    """Guards: reward weights of 1e39 (or a learning rate of 1e30) trained a network of NaNs,
    saved it and exited 0."""
    from selfplay.learning import TrainingDiverged
    from selfplay.train import run_training

    config = build_config("CartPole-v1", overrides=["ppo.learning_rate=1e30",
                                                    "log.progress=false",
                                                    "log.tensorboard=false"],
                          total_steps=4096)
    with pytest.raises(TrainingDiverged, match="loss/policy_loss, loss/value_loss"):
        run_training(config, run_dir=tmp_path / "run")
    assert not list((tmp_path / "run" / "checkpoints").glob("*.pt"))


def test_a_base_family_without_a_game_names_its_game_or_asks_for_one(tmp_path: Path) -> None:
    """Guards (review): `base: <family>` with no game trained CartPole-v1, the default game,
    under another family's settings (or failed on a setting CartPole cannot take)."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: boardgames\nppo:\n  gamma: 0.9\n")
    assert build_config(config_file=mine).game.name == "tictactoe"  # the family's only game
    mine.write_text("base: classic\n")
    assert build_config(config_file=mine).game.name == "CartPole-v1"  # the default is classic
    mine.write_text("base: mujoco\n")
    with pytest.raises(ConfigError, match=r"mine.yaml names base 'mujoco' but no game: add "
                                          r"--game or game.name \(mujoco's games: HalfCheetah"):
        build_config(config_file=mine)
    assert build_config("Hopper-v5", config_file=mine).game.name == "Hopper-v5"


def test_a_run_saved_with_the_game_defaults_unwritten_is_the_same_run(tmp_path: Path) -> None:
    """Guards (review): hyperparams/atari.yaml now writes Atari's preprocessing out, and the
    same command run again on a run made before (its config.yaml: `options: {}`) was refused
    as "other settings" naming every default; options are compared with defaults filled in."""
    from selfplay.run_dirs import config_differences, describe_differences

    new = build_config("atari/Pong")
    assert new.game.options["frame_skip"] == 4
    old = replace(new, game=replace(new.game, options={}))
    assert config_differences(old, new) == []
    other = replace(new, game=replace(new.game, options={**new.game.options, "frame_skip": 2}))
    assert config_differences(old, other) == ["game.options.frame_skip"]
    assert describe_differences(old, other, ["game.options.frame_skip"]) == (
        "game.options.frame_skip 4 -> 2")
