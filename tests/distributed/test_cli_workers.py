"""``kgprobe run`` with and without Ray: no Ray unless asked; a lost cluster is exit 4 and resumable."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)


def _env(**extra) -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0", **extra)


def test_a_run_without_workers_never_imports_ray(tmp_path):
    code = (
        "import sys\n"
        "from kgprobe.cli import main\n"
        f"code = main(['run', '--model', 'tiny-random', '--budget', '8', '--batch-size', '4', '--quiet', "
        f"'--no-report', '--out', {str(tmp_path)!r}])\n"
        "import kgprobe\n"
        "run = kgprobe.probe(model='tiny-random', budget=4, batch_size=4, store=None, progress=False)\n"
        "print('exit', code, 'queries', run.queries_spent, 'ray imported', 'ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "exit 0 queries 4 ray imported False"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head(tmp_path):
    """`ray start --head` on 127.0.0.1 (2 CPUs, token authentication as Ray's default), in its own
    process group; yields (address, stop) and stops the whole group at the end."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed")
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    env = _env(RAY_AUTH_MODE="token", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    log = open(tmp_path / "head.log", "w")
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                             f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                             "--disable-usage-stats"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)

    def stop():
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait(timeout=60)

    try:
        deadline = time.time() + 120
        while "Ray runtime started" not in (tmp_path / "head.log").read_text():
            assert head.poll() is None and time.time() < deadline, (tmp_path / "head.log").read_text()[-2000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", stop
    finally:
        stop()
        log.close()


@pytest.mark.slow
def test_a_lost_cluster_ends_the_run_with_exit_4_and_it_resumes(ray_head, tmp_path):
    from kgprobe.errors import DamagedFileError, InputError
    from kgprobe.store import RunStore

    address, stop_head = ray_head
    out = tmp_path / "runs"
    env = _env(RAY_AUTH_MODE="token")
    started = time.perf_counter()
    # Output to a file, not a pipe: Ray logs a line a second while the head is gone, which
    # would fill an unread pipe and block the run.
    log_path = tmp_path / "run.log"
    with open(log_path, "w") as log:
        run = subprocess.Popen([sys.executable, "-m", "kgprobe.cli", "run", "--model", "tiny-random",
                                "--ray-address", address, "--workers", "2", "--budget", "4000", "--batch-size", "8",
                                "--no-convergence-stop", "--quiet", "--no-report", "--out", str(out)],
                               stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        committed = 0
        deadline = time.time() + 300
        while time.time() < deadline and run.poll() is None and committed < 2:
            files = list(out.glob("*.kgrun"))
            if files:
                try:
                    with RunStore.open(files[0]) as ro:
                        committed = ro.last_round()
                except (InputError, DamagedFileError):  # opened while the run is still writing its setup
                    pass
            time.sleep(0.2)
        assert committed >= 2, log_path.read_text()[-3000:]
        stop_head()  # the whole cluster goes away: head, its raylet and both workers
        lost = time.perf_counter()
        run.wait(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    err = log_path.read_text()
    print(f"exit {run.returncode} {time.perf_counter() - lost:.1f} s after the cluster went away "
          f"({time.perf_counter() - started:.1f} s in all)")
    assert run.returncode == 4, err[-3000:]
    assert f"the Ray cluster at {address} went away during the round" in err
    (path,) = out.glob("*.kgrun")
    with RunStore.open(path) as ro:
        last = ro.last_round()
        assert ro.status == "stopped" and last >= 2
    # Resumed here: the run's 2 workers on a private local instance, two more rounds.
    resumed = subprocess.run([sys.executable, "-m", "kgprobe.cli", "resume", str(path), "--max-rounds",
                              str(last + 2), "--quiet", "--no-report"], capture_output=True, text=True, env=_env(),
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with RunStore.open(path) as ro:
        assert ro.status == "finished" and ro.last_round() == last + 2
        assert ro.meta("workers") == "2"
        assert sorted({p.round for p in ro.probes()}) == list(range(1, last + 3))
        assert len(ro.probes()) == 8 * (last + 2)


def test_bad_worker_settings_are_clear_errors(tmp_path):
    port = _free_port()  # nothing listens there
    cases = [(["--workers", "0"], 2, "setting 'workers' must be an integer >= 1, not 0"),
             (["--ray-address", f"127.0.0.1:{port}"], 4,
              f"cannot reach the Ray cluster at 127.0.0.1:{port}: nothing answers there")]
    for flags, code, message in cases:
        done = subprocess.run([sys.executable, "-m", "kgprobe.cli", "run", "--model", "tiny-random", "--out",
                               str(tmp_path), *flags], capture_output=True, text=True, env=_env(), timeout=120)
        assert done.returncode == code and message in done.stderr, done.stderr[-2000:]
    assert not list(tmp_path.glob("*.kgrun"))  # refused before a run file exists
