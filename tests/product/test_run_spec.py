"""The run-settings table (kgprobe.run_spec) is the one source of the flags, the TOML check,
the defaults, the API keywords and the engine's configuration: each derived place agrees
with it, and a bad value is refused with the same message wherever it comes from."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

import kgprobe
from kgprobe import run_spec
from kgprobe.api import probe_settings
from kgprobe.cli import build_parser, main
from kgprobe.commands.run import load_config_file, settings_from_args
from kgprobe.engine import EngineConfig
from kgprobe.errors import InputError
from kgprobe.metrics import ConvergenceMonitor
from kgprobe.settings import RUN_DEFAULTS, resolve_run_settings


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _flags(command: str) -> dict[str, argparse.Action]:
    return {opt: a for a in _subparser(command)._actions for opt in a.option_strings}


@pytest.mark.parametrize("command", [run_spec.RUN, run_spec.SWEEP, run_spec.RESUME])
def test_every_setting_has_its_flag_in_the_commands_that_offer_it(command):
    flags = _flags(command)
    for s in run_spec.SETTINGS:
        if command in s.commands:
            assert s.flag_name in flags, (command, s.name)
            action = flags[s.flag_name]
            assert action.dest == s.name
            for alias in s.aliases:
                assert flags[alias].dest == s.name
        else:
            assert s.flag_name not in flags, (command, s.name)


def test_run_flags_are_exactly_the_table_plus_config_and_output():
    # --lang is a shortcut for --probe-option lang=CODE, not a setting of its own.
    own = {"-h", "--help", "--config", "--output", "--lang"}
    table = {s.flag_name for s in run_spec.SETTINGS} | {a for s in run_spec.SETTINGS for a in s.aliases}
    assert set(_flags("run")) == table | own


def test_sweep_offers_no_endpoint_settings():
    # A sweep probes a KG given by --kg; the endpoint's seed entities are not its options.
    flags = _flags("sweep")
    assert not {"--endpoint", "--seed-entities", "--seeds", "--hops", "--prior", "--design-tilt"} & set(flags)
    assert "for --endpoint" not in _subparser("sweep").format_help()


def test_defaults_schema_api_and_engine_come_from_the_table():
    assert RUN_DEFAULTS == {s.name: s.default for s in run_spec.SETTINGS}
    # Every default passes its own check.
    for s in run_spec.SETTINGS:
        assert run_spec.problem(s.name, s.default) is None, s.name
    params = inspect.signature(kgprobe.probe).parameters
    for s in run_spec.SETTINGS:
        assert (s.name in params) == s.api, s.name
        if s.api:
            assert f"\n    {s.name}:\n" in kgprobe.probe.__doc__, s.name
    # The API-only keywords are documented too.
    for name in ("convergence", "store", "progress", "lazy", "listeners"):
        assert f"\n    {name}:\n" in kgprobe.probe.__doc__
    fields = {f.name: f for f in dataclasses.fields(EngineConfig)}
    # Three fields are recorded but not settings: the PKG's Beta prior, the design's pacing
    # and the lean target's control.
    assert set(run_spec.ENGINE_SETTINGS) == set(fields) - {"prior", "design_pacing", "lean_control"}
    config = EngineConfig()
    for name in run_spec.ENGINE_SETTINGS:
        assert getattr(config, name) == run_spec.default(name), name
    # The CLI with no options and the API with no arguments resolve to the table's defaults.
    cli = settings_from_args(build_parser().parse_args(["run"]))
    api = probe_settings()
    for name in ("kg", "model", "method", "sampler", "budget", "batch_size", "seed", "design_fraction",
                 "design_tilt", "prior_design", "convergence_window", "out", "device"):
        assert cli[name] == api[name] == RUN_DEFAULTS[name], name


WINDOW_ONE = "setting 'convergence_window' must be an integer >= 2, not 1"
TILT = "setting 'design_tilt' must be a number >= 0 and <= 1, not 1.5"


@pytest.mark.parametrize("key, value, message", [("convergence_window", 1, WINDOW_ONE),
                                                 ("design_tilt", 1.5, TILT)])
def test_an_out_of_range_value_gives_one_message_from_cli_toml_api_and_engine(tmp_path, capsys, key, value,
                                                                              message):
    flag = "--" + key.replace("_", "-")
    # The command line (before any KG is built or model loaded): exit 2 with the message.
    assert main(["run", flag, str(value), "--out", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.strip() == f"kgprobe: error: the command line: {message}"
    # A TOML config file.
    cfg = tmp_path / "run.toml"
    cfg.write_text(f"{key} = {value}\n")
    with pytest.raises(InputError) as toml_err:
        load_config_file(str(cfg))
    assert str(toml_err.value) == f"config file {cfg}: {message}"
    # The API.
    with pytest.raises(InputError) as api_err:
        probe_settings(**({"convergence": (value, 0.01)} if key == "convergence_window" else {key: value}))
    assert str(api_err.value) == f"kgprobe.probe(): {message}"
    # The engine's configuration (a config made in code) and the convergence monitor.
    from kgprobe.sources.embedded import load_embedded_kg

    with pytest.raises(InputError) as engine_err:
        EngineConfig(**{key: value}).validate(load_embedded_kg("countries"))
    assert str(engine_err.value) == message
    if key == "convergence_window":
        with pytest.raises(InputError) as monitor_err:
            ConvergenceMonitor(window=1)
        assert str(monitor_err.value) == message
        ConvergenceMonitor(window=2)  # the smallest window the table allows works everywhere


def test_a_flag_value_of_the_wrong_type_is_a_short_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["run", "--budget", "ten"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("kgprobe run: error: argument --budget: expected an integer, not 'ten'\n"
                   "  (`kgprobe run --help` lists the options)\n")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--design-tilt", "half"])
    assert "argument --design-tilt: expected a number, not 'half'" in capsys.readouterr().err


def test_old_names_still_work_with_a_warning(tmp_path, capsys):
    args = build_parser().parse_args(["run", "--seeds", "Q1", "Q2"])
    assert args.seed_entities == ["Q1", "Q2"]
    assert "--seeds is now --seed-entities" in capsys.readouterr().err
    cfg = tmp_path / "old.toml"
    cfg.write_text('seeds = ["Q1"]\n')
    assert load_config_file(str(cfg))["seed_entities"] == ["Q1"]
    assert "'seeds' is now 'seed_entities'" in capsys.readouterr().err
    # The design fraction's older name, as a top-level key and as a sampler option.
    cfg.write_text('audit_fraction = 0.5\n[sampler_options]\naudit_fraction = 0.25\n')
    loaded = load_config_file(str(cfg))
    assert loaded["design_fraction"] == 0.5 and loaded["sampler_options"] == {"audit_fraction": 0.25}
    assert "'audit_fraction' is now 'design_fraction'" in capsys.readouterr().err
    with pytest.warns(FutureWarning, match="sampler option 'audit_fraction' is now 'design_fraction'"):
        settings = resolve_run_settings(("config file old.toml", {**loaded, "sampler": "focus"}))
    assert settings["design_fraction"] == 0.5 and settings["sampler_options"]["design_fraction"] == 0.25
