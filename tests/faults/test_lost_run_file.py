"""Defect 5: a run whose file is deleted or replaced stops with a clear error."""

from __future__ import annotations

import os

import pytest

import kgprobe
from kgprobe.errors import StoreError

from .conftest import SETTINGS


@pytest.mark.parametrize("action", ["delete", "replace"])
def test_a_run_whose_file_disappears_stops_with_an_error(tmp_path, countries, sim_model, action):
    path = tmp_path / "gone.kgrun"
    run = kgprobe.probe(countries, sim_model, store=path, lazy=True, **SETTINGS)
    rounds = run.rounds()
    next(rounds)
    if action == "delete":
        os.unlink(path)
    else:
        os.rename(path, tmp_path / "elsewhere.kgrun")
        path.write_bytes(b"")
    with pytest.raises(StoreError, match="was deleted or replaced while the run was writing it") as info:
        next(rounds)
    assert info.value.exit_code == 5
    run.close()


def test_play_checks_the_file_before_printing_its_path(tmp_path, countries, sim_model, capsys):
    from kgprobe.commands.run import play

    path = tmp_path / "gone.kgrun"
    run = kgprobe.probe(countries, sim_model, store=path, lazy=True, **SETTINGS)
    os.unlink(path)
    with pytest.raises(StoreError):
        play(run, {"quiet": True, "report": False})
    assert "run: " not in capsys.readouterr().out
