"""Presets, flags and their validation."""

from __future__ import annotations

import math
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlscale import presets
from rlscale.config import build_config, dumps_toml, load_saved, toml_value
from rlscale.errors import UserError


def test_precedence_defaults_agent_env_flags():
    cfg = build_config("cartpole", None, {"lr": 1e-3})
    assert cfg.env.env_id == "CartPole-v1"
    assert cfg.agent.ent_coef == 0.0  # envs/cartpole.toml [agent.a2c] overrides agents/a2c.toml (0.01)
    assert cfg.agent.rms_alpha == 0.99  # from agents/a2c.toml
    assert cfg.agent.lr == 1e-3  # the flag wins
    pong = build_config("pong", None, {})
    assert pong.is_atari and pong.frames_per_step == 4
    assert pong.agent.algo == "ppo" and pong.total_agent_steps == 10_000_000  # Baselines'/CleanRL's 40M frames
    assert pong.env.goals == [10.0, 15.0, 18.0] and pong.run.stop_return == 18.0  # the run ends with a player
    a2c = build_config("pong", "a2c", {})
    assert a2c.agent.algo == "a2c" and a2c.agent.n_steps == 5  # --agent picks the other algorithm's preset


def test_an_env_presets_table_for_one_algorithm_applies_to_that_algorithm_alone(tmp_path):
    preset = tmp_path / "mygame.toml"
    preset.write_text('[env]\nenv_id = "CartPole-v1"\n[control]\nmax_envs = 32\n'
                      '[control.a2c]\nbatch = "auto"\n[agent.ppo]\nlr = 1e-3\n')
    a2c, ppo = build_config(str(preset), "a2c", {}), build_config(str(preset), "ppo", {})
    assert a2c.control.batch == "auto" and ppo.control.batch == "fixed"
    assert a2c.control.max_envs == ppo.control.max_envs == 32  # the section's own keys: every algorithm
    assert ppo.agent.lr == 1e-3 and a2c.agent.lr != 1e-3
    assert build_config(str(preset), "a2c", {"batch": "fixed"}).control.batch == "fixed"  # a flag still wins


def test_any_registered_id_works_without_preset():
    cfg = build_config("Acrobot-v1", None, {})
    assert cfg.env.env_id == "Acrobot-v1" and not cfg.is_atari and cfg.frames_per_step == 1
    assert build_config("ALE/Breakout-v5", None, {}).is_atari


def test_saved_config_round_trips(tmp_path):
    cfg = build_config("pong", None, {"n_envs": 32, "batch": "sqrt", "r": 5000.0})
    path = tmp_path / "config.toml"
    path.write_text(dumps_toml(cfg))
    assert load_saved(path) == cfg


@pytest.mark.parametrize("section, field, ran_with", [("control", "probe_cooldown", True),
                                                      ("control", "min_gain", 0.0),
                                                      ("control", "max_shrink_factor", 2.0),
                                                      ("control", "cost_outlier_factor", math.inf),
                                                      ("pool", "actor_precision", "fp32"),
                                                      ("noise", "noise_settle", 0),
                                                      ("noise", "measure_curvature", False),
                                                      ("control", "cluster_one_node_first", False)])
def test_a_config_saved_before_a_field_existed_loads_with_the_behaviour_it_ran(tmp_path, section, field, ran_with):
    cfg = build_config("minatar-breakout", None, {"batch": "auto"})
    assert getattr(getattr(cfg, section), field) != ran_with  # today's default differs
    text = "\n".join(line for line in dumps_toml(cfg).splitlines() if not line.startswith(field))
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert getattr(getattr(load_saved(path), section), field) == ran_with


def test_an_unmeasured_signal_is_refused_for_a_new_run_but_a_saved_run_that_held_so_still_loads(tmp_path):
    cfg = build_config("minatar-breakout", None, {"batch": "auto", "measure_noise": False})  # validate passes
    with pytest.raises(UserError, match="--batch auto follows --signal total, which is not measured here"):
        cfg.check_signal_measured()
    path = tmp_path / "config.toml"
    path.write_text(dumps_toml(cfg))
    assert load_saved(path).noise.measure_noise is False  # a resume or a report reads it back
    fixed = build_config("minatar-breakout", None, {"batch": "fixed", "measure_noise": False})
    assert fixed.check_signal_measured() is fixed


def test_a_config_saved_with_the_pool_and_learner_under_run_loads_them_into_their_sections(tmp_path):
    """Configs saved before 2026-12-05 hold the pool's and the learner's settings in [run]."""
    cfg = build_config("pong", None, {"learner_threads": 1, "pool": "serial", "learner_precision": "fp32"})
    sections = cfg.to_dict()
    sections["run"].update({**sections.pop("pool"), **sections.pop("learner")})
    path = tmp_path / "config.toml"
    path.write_text("\n".join(f"[{name}]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in values.items())
                              for name, values in sections.items()))
    loaded = load_saved(path)
    assert loaded == cfg
    assert (loaded.learner.learner_threads, loaded.pool.pool, loaded.learner.learner_precision) == (1, "serial", "fp32")


@pytest.mark.parametrize("text, message", [
    ("[run]\nlearner_threads = 1\n[learner]\nlearner_threads = 2\n", "under both [run] and [learner]"),
    ("[env]\nlr = 0.1\n", "unknown key 'lr' in [env] (it belongs in [agent])"),
])
def test_a_saved_config_moves_only_the_old_run_keys(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_saved(path)
    assert message in str(err.value)


def test_a_setting_in_the_wrong_section_of_a_preset_names_its_section(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[run]\nlearner_threads = 1\n")
    with pytest.raises(UserError, match=r"belongs in \[learner\]"):
        build_config(str(path), None, {})


@pytest.mark.parametrize("overrides, message", [
    ({"n_envs": 0}, "--n-envs must be positive"),
    ({"lr": -1.0}, "--lr must be positive"),
    ({"n_envs": 18}, "multiple of vector_size"),
    ({"min_envs": 64, "max_envs": 8}, "larger than --max-envs"),
    ({"noise_groups": 32}, "noise_groups (32) exceeds"),
    ({"gamma": 1.5}, "--gamma must lie in [0, 1]"),
    ({"min_gain": -0.1}, "min_gain must be zero or positive"),
    ({"noise_settle": -5}, "noise_settle must be zero or positive"),
    ({"cluster_price": -0.1}, "cluster_price must be zero or positive"),
    ({"cluster_hysteresis": 0.5}, "cluster_hysteresis must be >= 1"),
    ({"noise_clip": 0.5}, "noise_clip must be 0 (off) or above 1"),
    ({"batch": "critical", "n_envs": 512}, "outside [--min-envs"),
])
def test_impossible_numbers(overrides, message):
    with pytest.raises(UserError, match=None) as err:
        build_config("pong", None, overrides)
    assert message in str(err.value)


def test_unknown_key_and_section_and_type(tmp_path):
    bad_key = tmp_path / "a.toml"
    bad_key.write_text('[env]\nenv_id = "CartPole-v1"\nn_env = 4\n')
    with pytest.raises(UserError, match="unknown key 'n_env' in \\[env\\]"):
        build_config(str(bad_key), None, {})
    wrong_section = tmp_path / "b.toml"
    wrong_section.write_text('[env]\nenv_id = "CartPole-v1"\nlr = 0.1\n')
    with pytest.raises(UserError, match="it belongs in \\[agent\\]"):
        build_config(str(wrong_section), None, {})
    bad_type = tmp_path / "c.toml"
    bad_type.write_text('[env]\nenv_id = "CartPole-v1"\nn_envs = "many"\n')
    with pytest.raises(UserError, match="n_envs must be int"):
        build_config(str(bad_type), None, {})
    bad_choice = tmp_path / "d.toml"
    bad_choice.write_text('[env]\nenv_id = "CartPole-v1"\n[control]\nbatch = "huge"\n')
    with pytest.raises(UserError, match="batch must be one of fixed, critical, sqrt"):
        build_config(str(bad_choice), None, {})


def test_env_preset_tables_per_algorithm():
    a2c, ppo = build_config("cartpole", "a2c", {}), build_config("cartpole", "ppo", {})
    assert a2c.agent.optimizer == "rmsprop" and a2c.agent.ent_coef == 0.0
    assert ppo.agent.optimizer == "adam" and ppo.agent.clip_coef == 0.2 and ppo.agent.ent_coef == 0.01


def test_the_built_wheel_ships_every_preset_and_every_package(tmp_path):
    """A non-editable install finds the presets of the top-level envs/ and agents/ (package data of
    rlscale.presets.envs and .agents) and every subpackage (pyproject.toml lists them by hand)."""
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(root), "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(tmp_path)], check=True, timeout=240, cwd=tmp_path)
    (wheel,) = tmp_path.glob("rlscale-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = [f"{kind}/{p.name}" for kind in ("envs", "agents") for p in (root / kind).glob("*.toml")]
    assert len(shipped) >= 7
    for preset in shipped:
        assert f"rlscale/presets/{preset}" in names, preset
    for init in (root / "rlscale").rglob("__init__.py"):
        assert init.relative_to(root).as_posix() in names, init


def test_a_preset_dropped_into_the_working_directorys_envs_is_found_by_name(tmp_path, monkeypatch):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "mygame.toml").write_text('[env]\nenv_id = "Acrobot-v1"\nn_envs = 12\n')
    monkeypatch.chdir(tmp_path)
    cfg = build_config("mygame", None, {})
    assert (cfg.env.env_id, cfg.env.n_envs) == ("Acrobot-v1", 12)
    assert "mygame" in presets.available("envs") and "pong" in presets.available("envs")
    # A name that is neither the user's nor shipped lists both kinds in its error.
    with pytest.raises(UserError, match="mygame.*pong|pong.*mygame"):
        build_config("nosuchgame", None, {})


def test_minatar_presets_resolve_to_the_settings_docs_results_chose():
    """The presets' values as docs/results.md chose them (80 at lr 1.12e-2, no crit ratio; the power lr rule; Breakout's
    A2C with auto since 2026-12-06, without the learning floor, docs/batch-control.md).

    A pin of the packaged data, not a measurement: it fails when a preset changes without its docs."""
    for game in ("minatar-spaceinvaders", "minatar-breakout"):
        cfg = build_config(game, None, {})
        assert cfg.control.batch == ("auto" if game == "minatar-breakout" else "fixed")
        assert not cfg.control.learning_floor  # it failed its rule on Breakout (2026-12-07)
        assert cfg.control.crit_ratio == 1.0 and cfg.agent.lr == 1.12e-2 and cfg.env.n_envs == 16
        auto = build_config(game, None, {"batch": "auto"}).control
        assert auto.scales_lr and (auto.lr_rule, auto.lr_alpha) == ("power", 0.5)
    assert build_config("minatar-breakout", "ppo", {}).agent.lr == build_config("pong", "ppo", {}).agent.lr
    assert build_config("minatar-breakout", "ppo", {}).control.batch == "fixed"  # PPO: not measured with auto
    assert build_config("cartpole", None, {}).control.crit_ratio == 1.0
