"""--device auto|cpu|cuda[:N]: one option for run and resume, checked values, recorded in
the run so resume places the model alike. CUDA parts skip on a machine without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kgprobe.errors import InputError
from kgprobe.models.devices import check_device_spec
from kgprobe.store import RunStore


def kgprobe(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "kgprobe.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.parametrize("value,expected", [("auto", "auto"), ("CPU", "cpu"), (" cuda ", "cuda"),
                                            ("cuda:1", "cuda:1")])
def test_known_devices(value, expected):
    assert check_device_spec(value) == expected


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:-1", "cuda:x", "mps", "", 0])
def test_unknown_devices_are_refused_with_the_choices(value):
    with pytest.raises(InputError, match=r"unknown device .*use auto, cpu, cuda or cuda:N"):
        check_device_spec(value)


def test_bad_device_on_the_command_line_is_exit_2(tmp_path):
    for command in (("run", "--out", str(tmp_path)), ("resume", "nothing.kgrun")):
        p = kgprobe(*command, "--device", "gpu")
        assert p.returncode == 2
        assert "argument --device: unknown device 'gpu'" in p.stderr and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_device_in_a_config_file_is_exit_2(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('device = "tpu"\n')
    p = kgprobe("run", "--config", str(config), "--out", str(tmp_path / "runs"))
    assert p.returncode == 2 and "unknown device 'tpu'" in p.stderr


def test_auto_is_the_cpu_without_a_gpu():
    from kgprobe.models.devices import resolve_device

    if not _no_cuda():
        pytest.skip("a CUDA GPU is present: auto picks it (checked by test_auto_picks_cuda)")
    assert str(resolve_device("auto")) == "cpu"


def test_auto_picks_cuda():
    from kgprobe.models.devices import resolve_device

    if _no_cuda():
        pytest.skip("no CUDA GPU on this machine: auto can only pick the CPU here")
    assert resolve_device("auto").type == "cuda"


@pytest.mark.slow
def test_the_device_is_recorded_and_resume_uses_it(tmp_path):
    p = kgprobe("run", "--model", "tiny-random", "--device", "cpu", "--budget", "16", "--batch-size", "8",
                "--max-rounds", "1", "--out", str(tmp_path), "--quiet", "--no-report")
    assert p.returncode == 0, p.stderr
    (run,) = tmp_path.glob("*.kgrun")
    with RunStore.open(str(run)) as store:
        assert store.meta("device") == "cpu"
        assert store.last_round() == 1
    # No --device: the recorded one (cpu) is used, and the run continues.
    p = kgprobe("resume", str(run), "--max-rounds", "2", "--quiet", "--no-report")
    assert p.returncode == 0, p.stderr
    with RunStore.open(str(run)) as store:
        assert store.last_round() == 2
    if _no_cuda():
        # An explicit --device wins over the recorded one; without a GPU that is a model error.
        p = kgprobe("resume", str(run), "--max-rounds", "3", "--device", "cuda", "--quiet", "--no-report")
        assert p.returncode == 4 and "no CUDA GPU is available" in p.stderr
