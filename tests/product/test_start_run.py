"""Starting and resuming runs: the API records the device like the CLI, a run whose model
fails before answering leaves no run file, and resuming a finished run says so."""

from __future__ import annotations

import socket

import pytest

import kgprobe
from kgprobe.cli import main
from kgprobe.errors import InputError, ModelError
from kgprobe.store import RunStore

TINY = dict(model="tiny-random", method="hard", batch_size=8, budget=16, seed=3, progress=False, report=False)


def test_the_api_records_the_device_so_resume_places_the_model_alike(tmp_path, capsys):
    run = kgprobe.probe(store=tmp_path / "a.kgrun", model_options={"device": "cpu"}, max_rounds=1, **TINY)
    path = run.path
    run.close()
    with RunStore.open(path) as store:
        assert store.meta("device") == "cpu"
        # The device is its own record, not a model option that a resume's --device would fight.
        assert store.meta("model_options") == ""
        assert store.last_round() == 1
    # The CLI resume places the model on the recorded device and plays on.
    assert main(["resume", path, "--max-rounds", "2", "--quiet", "--no-report"]) == 0
    with RunStore.open(path) as store:
        assert store.last_round() == 2
    # The keyword records it too; the two spellings must agree.
    run = kgprobe.probe(store=tmp_path / "b.kgrun", device="cpu", lazy=True, **TINY)
    assert run.store.meta("device") == "cpu"
    run.close()
    with pytest.raises(InputError, match=r"device='cpu' and model_options\['device'\]='cuda' disagree"):
        kgprobe.probe(store=tmp_path / "c.kgrun", device="cpu", model_options={"device": "cuda"}, lazy=True, **TINY)
    assert not (tmp_path / "c.kgrun").exists()


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connecting is refused


def test_a_model_that_fails_before_answering_leaves_no_run_file(tmp_path, capsys):
    out = tmp_path / "runs"
    spec = f"openai:nothing@http://127.0.0.1:{_refused_port()}/v1"
    code = main(["run", "--model", spec, "--model-option", "max_retries=0", "--method", "hard", "--budget", "16",
                 "--batch-size", "8", "--out", str(out), "--quiet", "--no-report"])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "cannot connect" in err
    assert list(out.iterdir()) == []  # no 0-round run file posing as a run
    # The API alike.
    with pytest.raises(ModelError, match="cannot connect"):
        kgprobe.probe(store=out, **{**TINY, "model": spec}, model_options={"max_retries": 0})
    assert list(out.iterdir()) == []


def test_resuming_a_finished_run_says_it_is_finished(tmp_path, capsys):
    run = kgprobe.probe(store=tmp_path / "done.kgrun", **TINY)
    assert run.is_finished and run.rounds_played == 2 and run.stop_reason == "budget"
    path = run.path
    run.close()
    capsys.readouterr()
    assert main(["resume", path, "--plain"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (f"kgprobe: {path} is finished (2 rounds, 16 queries, stopped by budget); nothing to "
                            f"resume. Raise --budget or --max-rounds to extend it; `kgprobe report {path}` shows "
                            "its results\n")
    assert "resuming" not in captured.err
    with RunStore.open(path) as store:
        assert store.last_round() == 2
