"""The command line on bad input: clear messages and the exit codes `kgprobe --help` documents."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys


from kgprobe.store import FORMAT_VERSION, RunStore


def kgprobe(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "kgprobe.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_help_documents_exit_codes():
    out = kgprobe("--help").stdout
    for line in ("2  invalid input", "4  a model backend failed", "5  the run store cannot be read or written",
                 "130 interrupted"):
        assert line in out


def test_unknown_method(tmp_path):
    p = kgprobe("run", "--method", "telepathy", "--out", str(tmp_path))
    assert p.returncode == 2
    assert "unknown probe method 'telepathy'; choose one of: zp-lke" in p.stderr
    assert "Traceback" not in p.stderr and list(tmp_path.iterdir()) == []


def test_out_naming_a_run_file_is_refused_before_anything_is_created(tmp_path):
    p = kgprobe("run", "--budget", "64", "--out", str(tmp_path / "gemma.kgrun"))
    assert p.returncode == 2
    assert (f"--out {tmp_path / 'gemma.kgrun'} names a run file, but --out is the directory the run file is "
            f"written to (its name is chosen for you); use --out {tmp_path}") in p.stderr
    assert "Traceback" not in p.stderr and list(tmp_path.iterdir()) == []


def test_budget_below_one_batch(tmp_path):
    p = kgprobe("run", "--budget", "10", "--out", str(tmp_path))
    assert p.returncode == 2
    assert "budget 10 is below one batch (32 edges" in p.stderr


def test_unknown_model_name(tmp_path):
    p = kgprobe("run", "--model", "gpt-17", "--budget", "64", "--out", str(tmp_path))
    assert p.returncode == 4
    assert "unknown model 'gpt-17'" in p.stderr and "default" in p.stderr


def test_kg_file_that_is_not_a_kg(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("my shopping list\neggs\n")
    p = kgprobe("run", "--kg", str(bad), "--out", str(tmp_path))
    assert p.returncode == 2
    assert f"malformed KG file {bad}" in p.stderr


def test_unknown_kg_name(tmp_path):
    p = kgprobe("run", "--kg", "atlantis", "--out", str(tmp_path))
    assert p.returncode == 2 and "neither an existing file nor an embedded KG" in p.stderr


def test_run_file_from_a_newer_version(tmp_path):
    from kgprobe.sources.embedded import load_embedded_kg

    path = tmp_path / "future.kgrun"
    RunStore.create(path, config={}, kg=load_embedded_kg("countries"), model_identity="m").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    for cmd in ("resume", "report"):
        p = kgprobe(cmd, str(path))
        assert p.returncode == 2, cmd
        assert "format version 99" in p.stderr and f"reads up to version {FORMAT_VERSION}" in p.stderr


def test_missing_and_garbage_run_files(tmp_path):
    p = kgprobe("report", str(tmp_path / "nope.kgrun"))
    assert p.returncode == 2 and "no run file" in p.stderr
    junk = tmp_path / "junk.kgrun"
    junk.write_bytes(b"\x00" * 100)
    p = kgprobe("resume", str(junk))
    assert p.returncode == 2 and "not a kgprobe run file" in p.stderr


def test_read_only_output_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    # root ignores permission bits; the immutable attribute stops root too.
    as_root = os.geteuid() == 0
    if as_root:
        subprocess.run(["chattr", "+i", str(ro)], check=True)
    else:
        ro.chmod(0o555)
    try:
        p = kgprobe("run", "--budget", "64", "--out", str(ro))
        assert p.returncode == 5, p.stderr
        assert f"the output directory {ro} is not writable; choose another --out" in p.stderr
        p = kgprobe("run", "--budget", "64", "--out", str(ro / "runs"))
        assert p.returncode == 5, p.stderr
        assert f"cannot create the output directory {ro / 'runs'}" in p.stderr
    finally:
        if as_root:
            subprocess.run(["chattr", "-i", str(ro)], check=True)
        else:
            ro.chmod(0o755)


def test_config_file_is_read_and_command_line_wins(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('method = "telepathy"\nbudget = 128\n')
    p = kgprobe("run", "--config", str(cfg), "--out", str(tmp_path))
    assert p.returncode == 2 and "unknown probe method 'telepathy'" in p.stderr
    p = kgprobe("run", "--config", str(cfg), "--method", "zp-lke", "--batch-size", "200", "--out", str(tmp_path))
    # The command line's method and batch size win; the file's budget (128) stays.
    assert p.returncode == 2 and "budget 128 is below one batch (200 edges" in p.stderr
    cfg.write_text('metod = "hard"\n')
    p = kgprobe("run", "--config", str(cfg))
    assert p.returncode == 2 and "unknown setting(s) metod" in p.stderr
    cfg.write_text('method = "hard\n')
    p = kgprobe("run", "--config", str(cfg))
    assert p.returncode == 2 and "is not valid TOML" in p.stderr
