"""``kgprobe bench faults``: fault and bad-input cases against the real command line.

Every case runs ``python -m kgprobe.cli ...`` in a child process (the real CLI, its exit
codes and messages), against misbehaving loopback servers
(:mod:`kgprobe.bench.fault_servers`), damaged run/WAL/cache files, kill -9, a full disk
and hostile inputs. The model is the deterministic fake OpenAI-compatible server, so a
resumed run can be compared number for number with an unbroken reference run made in
the same bench.

A case *fails* when the CLI crashed (a traceback, exit 1), hung past its limit, or used
more than ``--max-rss-mb`` of memory. ``silent_wrong`` counts damaged inputs that gave
exit 0 with numbers different from the reference; ``lost_probes`` counts probes that
were committed before a kill and are missing or different after the resume;
``identical_resumes`` counts kill -9 cases whose resumed run equals the reference.

The JSON last line: ``cases``, ``failed``, ``silent_wrong``, ``lost_probes``,
``identical_resumes``, ``kill_cases``, ``seconds``, and the names of failed cases.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kgprobe.bench.fault_servers import openai_server, sparql_server

#: Settings of every probe run in the bench: small, so a case takes seconds.
RUN_ARGS = ["--budget", "40", "--batch-size", "8", "--probe-option", "num_examples=3",
            "--probe-option", "num_distractors=3", "--no-convergence-stop", "--seed", "7",
            "--model-option", "label=\"fake\"", "--model-option", "backoff=0.05",
            "--model-option", "max_retries=3", "--model-option", "timeout=5"]
ROUNDS = 5
#: Keys of report JSON that legitimately differ between equal runs (timing, paths).
#: Report fields that differ between a case and the reference run by design: timings, paths,
#: the protocol's date, and the model spec (each case talks to its own fault route of the
#: fake server, e.g. ``…/slow40/v1`` instead of ``…/ok/v1``; the answers are the same).
VOLATILE = {"elapsed", "replayed", "run", "created", "started", "path", "model_seconds", "seconds", "status",
            "responses_per_second", "kgprobe_version", "date", "spec"}


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    rss_mb: float
    timed_out: bool

    @property
    def crashed(self) -> bool:
        return self.timed_out or self.rc == 1 or "Traceback (most recent call last)" in self.stderr or self.rc < 0


@dataclass
class Outcome:
    name: str
    ok: bool
    failed: bool = False
    silent_wrong: bool = False
    lost_probes: int = 0
    identical: bool | None = None
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Bench:
    """Shared state of one bench run: a scratch directory, the servers, the reference."""

    root: Path
    max_rss_mb: float = 3000.0
    seed: int = 2026
    sparql: object = None
    model: object = None
    reference: Path | None = None
    reference_report: dict | None = None
    log: list[str] = field(default_factory=list)

    # -- running the CLI ---------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 180, env: dict | None = None, fsize: int | None = None,
            cwd: Path | None = None) -> Result:
        full_env = dict(os.environ, OMP_NUM_THREADS="1", KGPROBE_CACHE_DIR=str(self.root / "cache"))
        full_env.update(env or {})

        def limits():
            if fsize is not None:  # a disk that is full after ``fsize`` bytes per file
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kgprobe.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd or self.root,
                                preexec_fn=limits)
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
        rss = _child_rss_mb()
        return Result(proc.returncode, out, err, time.perf_counter() - t0, rss, timed_out)

    def model_spec(self, mode: str) -> str:
        return f"openai:m@{self.model.url(mode, '/v1')}"

    def run(self, out: Path, mode: str = "ok", *extra: str, **kw) -> Result:
        return self.cli("run", "--model", self.model_spec(mode), *RUN_ARGS, "--out", str(out), "--no-report",
                        "--quiet", *extra, **kw)

    def report(self, path: Path) -> tuple[Result, dict | None]:
        res = self.cli("report", str(path), "--json")
        try:
            data = json.loads(res.stdout) if res.rc == 0 else None
        except ValueError:
            data = None
        return res, data

    # -- comparing ---------------------------------------------------------------------
    def same_as_reference(self, data: dict | None) -> bool:
        return data is not None and _strip(data) == _strip(self.reference_report)


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _child_rss_mb() -> float:
    # ru_maxrss of the largest child so far (KiB on Linux): a case that grows past the
    # limit shows up here even if it is killed.
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _run_file(directory: Path) -> Path | None:
    files = sorted(directory.glob("*.kgrun")) if directory.is_dir() else []
    return files[0] if files else None


def _committed_probes(path: Path) -> list[tuple]:
    """(round, pos, edge, correct, answer) of every committed probe, read without trusting."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT round, pos, edge, correct, answer FROM probes ORDER BY round, pos").fetchall()
        conn.close()
        return rows
    except sqlite3.Error:
        return []


def clean_error(res: Result, codes=(2, 3, 4, 5)) -> bool:
    """A clear error: an expected non-zero exit code and a ``kgprobe: error:`` message."""
    return res.rc in codes and "kgprobe: error:" in res.stderr and not res.crashed


# == the cases ===========================================================================
CaseFn = Callable[[Bench], Outcome]


def sparql_case(mode: str, *extra: str, expect=(2, 3)) -> tuple[str, CaseFn]:
    def case(b: Bench) -> Outcome:
        out = b.root / f"kg-{mode}.jsonl"
        res = b.cli("build", "--source", b.sparql.url(mode), "--seeds", "Q142", "--hops", "1", "--timeout", "2",
                    "--retries", "1", "--no-cache", "-o", str(out), *extra, timeout=120)
        big = res.rss_mb > b.max_rss_mb
        if 0 in expect:  # a server that ignores LIMIT may still give a (bounded) KG or a clear error
            ok = (res.rc == 0 or clean_error(res, expect)) and not res.crashed and not big
        else:
            ok = clean_error(res, expect) and not out.exists() and not big
        return Outcome(f"sparql:{mode}", ok, failed=res.crashed or big,
                       detail=f"rc={res.rc} {res.stderr.strip()[-160:]}", seconds=res.seconds)
    return f"sparql:{mode}", case


def injection_case(name: str, *args: str) -> tuple[str, CaseFn]:
    """A hostile value that would change a query: refused (exit 2) before any request."""
    def case(b: Bench) -> Outcome:
        before = b.sparql.count
        res = b.cli("build", "--source", b.sparql.url("rows"), "--no-cache", "-o", str(b.root / "inj.jsonl"),
                    *args, timeout=60)
        sent = b.sparql.count - before
        ok = clean_error(res, (2,)) and sent == 0
        return Outcome(f"inject:{name}", ok, failed=res.crashed, detail=f"rc={res.rc} requests={sent} "
                       f"{res.stderr.strip()[-160:]}", seconds=res.seconds)
    return f"inject:{name}", case


def model_fault_case(mode: str, *, recovers: bool, extra: tuple[str, ...] = ()) -> tuple[str, CaseFn]:
    """A misbehaving model server: retried to the reference result, or a clear error and a
    run that resumes (against a healthy server) to the reference result."""
    def case(b: Bench) -> Outcome:
        out = b.root / f"model-{mode}"
        res = b.run(out, mode, *extra, timeout=240)
        path = _run_file(out)
        if recovers and res.rc == 0:  # retried through the faults (a clear error + resume is fine too)
            _, data = b.report(path) if path else (None, None)
            same = b.same_as_reference(data)
            return Outcome(f"model:{mode}", res.rc == 0 and same, failed=res.crashed,
                           silent_wrong=res.rc == 0 and not same, detail=f"rc={res.rc}", seconds=res.seconds)
        if not clean_error(res, (4,)):
            return Outcome(f"model:{mode}", False, failed=res.crashed, detail=f"rc={res.rc} {res.stderr[-200:]}",
                           seconds=res.seconds)
        before = _committed_probes(path) if path else []
        resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        _, data = b.report(path)
        after = set(_committed_probes(path))
        lost = sum(1 for p in before if p not in after)
        same = b.same_as_reference(data)
        return Outcome(f"model:{mode}", resumed.rc == 0 and same and not lost, failed=resumed.crashed,
                       silent_wrong=resumed.rc == 0 and not same, lost_probes=lost,
                       detail=f"rc={res.rc} then {resumed.rc}", seconds=res.seconds + resumed.seconds)
    return f"model:{mode}", case


def kept_answers_case() -> tuple[str, CaseFn]:
    """A round whose batch fails part-way keeps its answers: the resume does not pay twice."""
    def case(b: Bench) -> Outcome:
        out = b.root / "kept"
        res = b.run(out, "failfrom20", timeout=240)
        path = _run_file(out)
        before = b.model.counts.get("ok", 0)
        resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        asked = b.model.counts.get("ok", 0) - before
        _, data = b.report(path)
        same = b.same_as_reference(data)
        # The reference asked ROUNDS * 8 probes * 4 options; 20 were answered before the failure.
        expected = ROUNDS * 8 * 4 - 20
        ok = clean_error(res, (4,)) and resumed.rc == 0 and same and asked == expected
        return Outcome("model:kept-answers", ok, failed=res.crashed or resumed.crashed,
                       silent_wrong=resumed.rc == 0 and not same,
                       detail=f"rc={res.rc} then {resumed.rc}; resume asked {asked}, expected {expected}",
                       seconds=res.seconds + resumed.seconds)
    return "model:kept-answers", case


def round_deadline_case() -> tuple[str, CaseFn]:
    """A server that leaves every second request unanswered: the round deadline ends it."""
    def case(b: Bench) -> Outcome:
        out = b.root / "deadline"
        res = b.run(out, "hangevery2", "--round-timeout", "3", "--model-option", "timeout=30", timeout=120)
        path = _run_file(out)
        resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        _, data = b.report(path)
        same = b.same_as_reference(data)
        ok = clean_error(res, (4,)) and "deadline" in res.stderr and res.seconds < 60 and same
        return Outcome("model:round-deadline", ok, failed=res.crashed or resumed.crashed,
                       silent_wrong=resumed.rc == 0 and not same,
                       detail=f"rc={res.rc} in {res.seconds:.0f} s then {resumed.rc}", seconds=res.seconds)
    return "model:round-deadline", case


def flip_case(i: int, target: str) -> tuple[str, CaseFn]:
    """Flip one byte of a finished run file (or truncate it): refused, or the same numbers."""
    def case(b: Bench) -> Outcome:
        path = b.root / f"flip-{target}-{i}.kgrun"
        shutil.copy(b.reference, path)
        raw = bytearray(path.read_bytes())
        rng = random.Random(b.seed * 1000 + i)
        if target == "truncate":
            cut = [0, 4096, len(raw) // 2, len(raw) - 1][i % 4]
            raw = raw[:cut]
            what = f"truncated to {cut} of {len(path.read_bytes())} bytes"
        else:
            pos = rng.randrange(100, len(raw))
            raw[pos] ^= 1 << rng.randrange(8)
            what = f"bit flipped at byte {pos}"
        path.write_bytes(bytes(raw))
        res, data = b.report(path)
        same = b.same_as_reference(data)
        silent = res.rc == 0 and not same
        ok = (res.rc == 0 and same) or clean_error(res, (2,))
        return Outcome(f"damage:{target}-{i}", ok and not silent, failed=res.crashed, silent_wrong=silent,
                       detail=f"{what}: rc={res.rc} {res.stderr.strip()[-120:]}", seconds=res.seconds)
    return f"damage:{target}-{i}", case


def metric_digit_case() -> tuple[str, CaseFn]:
    """The classic case: one digit of a stored metric changed (0 -> 9) in a finished run."""
    def case(b: Bench) -> Outcome:
        path = b.root / "digit.kgrun"
        shutil.copy(b.reference, path)
        conn = sqlite3.connect(path)
        (metrics,) = conn.execute("SELECT metrics FROM rounds WHERE round = ?", (ROUNDS,)).fetchone()
        k = metrics.index('"win_rate":') + len('"win_rate":')
        j = metrics.index(".", k) + 1
        changed = metrics[:j] + ("9" if metrics[j] != "9" else "1") + metrics[j + 1:]
        conn.execute("UPDATE rounds SET metrics = ? WHERE round = ?", (changed, ROUNDS))
        conn.commit()
        conn.close()
        res, data = b.report(path)
        silent = res.rc == 0 and not b.same_as_reference(data)
        verify = b.cli("verify", str(path))
        ok = clean_error(res, (2,)) and verify.rc == 2 and f"round {ROUNDS}" in verify.stdout
        return Outcome("damage:metric-digit", ok, failed=res.crashed, silent_wrong=silent,
                       detail=f"report rc={res.rc}, verify rc={verify.rc}", seconds=res.seconds)
    return "damage:metric-digit", case


def last_round_repair_case() -> tuple[str, CaseFn]:
    """Damage confined to the last round: resume drops it, says so, and plays it again."""
    def case(b: Bench) -> Outcome:
        path = b.root / "repair.kgrun"
        shutil.copy(b.reference, path)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE probes SET answer = answer || '!' WHERE round = ? AND pos = 0", (ROUNDS,))
        conn.commit()
        conn.close()
        res = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        _, data = b.report(path)
        same = b.same_as_reference(data)
        ok = res.rc == 0 and f"dropped round {ROUNDS}" in res.stderr and same
        return Outcome("damage:last-round-repair", ok, failed=res.crashed, silent_wrong=res.rc == 0 and not same,
                       detail=f"rc={res.rc} {res.stderr.strip()[-160:]}", seconds=res.seconds)
    return "damage:last-round-repair", case


def old_file_case() -> tuple[str, CaseFn]:
    """A run file written before checksums: still read, and verify says it has none."""
    def case(b: Bench) -> Outcome:
        path = b.root / "old.kgrun"
        shutil.copy(b.reference, path)
        conn = sqlite3.connect(path)
        conn.execute("DROP TABLE checks")
        conn.execute("DELETE FROM meta WHERE key = 'integrity'")
        conn.commit()
        conn.close()
        res, data = b.report(path)
        verify = b.cli("verify", str(path))
        ok = res.rc == 0 and b.same_as_reference(data) and verify.rc == 0 and "no checksums" in verify.stdout
        return Outcome("damage:old-file", ok, failed=res.crashed, detail=f"rc={res.rc} {verify.stdout.strip()}",
                       seconds=res.seconds)
    return "damage:old-file", case


def kill_case(i: int, window: bool) -> tuple[str, CaseFn]:
    """kill -9 at a random moment (or inside the replay window), then resume."""
    name = f"kill:{'replay-window' if window else 'random'}-{i}"

    def case(b: Bench) -> Outcome:
        out = b.root / f"kill-{i}-{int(window)}"
        rng = random.Random(b.seed + i + 100 * window)
        target = rng.randrange(1, ROUNDS + 1)
        # The hook announces every round ("0": no pause) or pauses in the target round's window.
        env = {"KGPROBE_TEST_PAUSE_BEFORE_COMMIT": f"30@{target}" if window else "0"}
        args = [sys.executable, "-m", "kgprobe.cli", "run", "--model", b.model_spec("slow40"), *RUN_ARGS,
                "--out", str(out), "--no-report", "--quiet"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=b.root,
                                env=dict(os.environ, OMP_NUM_THREADS="1", **env))
        t0 = time.perf_counter()
        if window:
            for line in proc.stderr:
                if f"round {target} answered" in line:
                    break
        else:
            # Startup (imports) takes most of a run: kill at a random moment of a random
            # round (after its responses arrived, up to about a round's length later).
            for line in proc.stderr:
                if f"round {target} answered" in line:
                    break
            time.sleep(rng.uniform(0, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        path = _run_file(out)
        if path is None:
            return Outcome(name, True, identical=True, detail="killed before the run file existed")
        before = _committed_probes(path)
        resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        _, data = b.report(path)
        after = set(_committed_probes(path))
        lost = sum(1 for p in before if p not in after)
        same = b.same_as_reference(data)
        rounds_before = len({p[0] for p in before})
        return Outcome(name, resumed.rc == 0 and same and not lost, failed=resumed.crashed,
                       silent_wrong=resumed.rc == 0 and not same, lost_probes=lost, identical=same,
                       detail=f"killed after {rounds_before} committed rounds; resume rc={resumed.rc}",
                       seconds=time.perf_counter() - t0)
    return name, case


def wal_flip_case(i: int) -> tuple[str, CaseFn]:
    """kill -9 leaves a WAL; a flipped byte in it: refused, or resumed to the same result."""
    def case(b: Bench) -> Outcome:
        out = b.root / f"wal-{i}"
        env = {"KGPROBE_TEST_PAUSE_BEFORE_COMMIT": f"30@{2 + i % 3}"}
        args = [sys.executable, "-m", "kgprobe.cli", "run", "--model", b.model_spec("ok"), *RUN_ARGS,
                "--out", str(out), "--no-report", "--quiet"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=b.root,
                                env=dict(os.environ, OMP_NUM_THREADS="1", **env))
        for line in proc.stderr:
            if "answered" in line:
                break
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        path = _run_file(out)
        wal = Path(str(path) + "-wal")
        if wal.exists() and wal.stat().st_size > 32:
            raw = bytearray(wal.read_bytes())
            pos = random.Random(b.seed + i).randrange(32, len(raw))
            raw[pos] ^= 0x10
            wal.write_bytes(bytes(raw))
        resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet", timeout=240)
        res, data = b.report(path)
        same = b.same_as_reference(data)
        ok = (resumed.rc == 0 and same) or clean_error(resumed, (2,))
        return Outcome(f"damage:wal-{i}", ok, failed=resumed.crashed, silent_wrong=res.rc == 0 and not same,
                       detail=f"resume rc={resumed.rc} {resumed.stderr.strip()[-200:]}", seconds=resumed.seconds)
    return f"damage:wal-{i}", case


def cache_flip_case(i: int) -> tuple[str, CaseFn]:
    """A damaged response cache: its bad entries are asked again, or a clear error."""
    def case(b: Bench) -> Outcome:
        cache = b.root / f"cache-{i}.sqlite"
        first = b.run(b.root / f"cache-run-{i}a", "ok", "--cache", str(cache), timeout=240)
        if first.rc != 0:
            return Outcome(f"damage:cache-{i}", False, failed=first.crashed, detail=f"first run rc={first.rc}")
        raw = bytearray(cache.read_bytes())
        rng = random.Random(b.seed * 7 + i)
        if i % 3 == 2:
            raw = raw[: len(raw) // 2]
        else:
            for _ in range(3):
                pos = rng.randrange(100, len(raw))
                raw[pos] ^= 1 << rng.randrange(8)
        cache.write_bytes(bytes(raw))
        second = b.run(b.root / f"cache-run-{i}b", "ok", "--cache", str(cache), timeout=240)
        path = _run_file(b.root / f"cache-run-{i}b")
        _, data = b.report(path) if (second.rc == 0 and path) else (None, None)
        same = b.same_as_reference(data)
        ok = (second.rc == 0 and same) or clean_error(second, (2, 5))
        return Outcome(f"damage:cache-{i}", ok, failed=second.crashed, silent_wrong=second.rc == 0 and not same,
                       detail=f"rc={second.rc} {second.stderr.strip()[-120:]}", seconds=second.seconds)
    return f"damage:cache-{i}", case


def disk_full_case(kind: str) -> tuple[str, CaseFn]:
    """The disk fills up mid-run: a clear error (exit 5), then the resume completes the run."""
    def case(b: Bench) -> Outcome:
        out = b.root / f"full-{kind}"
        out.mkdir(exist_ok=True)
        mounted = False
        if kind == "tmpfs":
            size = max(64, b.reference.stat().st_size * 85 // 100 // 1024)
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(out)],
                                     capture_output=True).returncode == 0
            if not mounted:
                return Outcome(f"disk-full:{kind}", True, detail="skipped: cannot mount a tmpfs here")
            res = b.run(out, "ok", timeout=240)
        else:
            share = 85 if kind == "rlimit" else 97
            res = b.run(out, "ok", fsize=b.reference.stat().st_size * share // 100, timeout=240)
        try:
            path = _run_file(out)
            ok = clean_error(res, (5,)) and "run: " not in res.stdout
            detail = f"rc={res.rc} {res.stderr.strip()[-160:]}"
            if ok and path is not None:
                moved = b.root / f"full-{kind}.kgrun"
                for suffix in ("", "-wal"):  # not -shm: an index of the old file's WAL, rebuilt on open
                    if Path(str(path) + suffix).exists():
                        shutil.copy(str(path) + suffix, str(moved) + suffix)
                resumed = b.cli("resume", str(moved), "--model", b.model_spec("ok"), "--no-report", "--quiet",
                                timeout=240)
                _, data = b.report(moved)
                ok = resumed.rc == 0 and b.same_as_reference(data)
                detail += f"; resumed elsewhere rc={resumed.rc} {resumed.stderr.strip()[-300:]}"
            return Outcome(f"disk-full:{kind}", ok, failed=res.crashed, detail=detail, seconds=res.seconds)
        finally:
            if mounted:
                subprocess.run(["umount", str(out)], capture_output=True)
    return f"disk-full:{kind}", case


def disk_full_mid_run_case(at_round: int) -> tuple[str, CaseFn]:
    """The disk fills up while round ``at_round`` commits (the store's fault-injecting write
    hook): exit 5 with no "run:" line, then the resume, with the disk freed, ends in the
    reference run's numbers without asking the model again for what it had answered."""
    def case(b: Bench) -> Outcome:
        from kgprobe.store import DISK_FULL_ENV

        name = f"disk-full:mid-run@{at_round}"
        out = b.root / f"full-mid-{at_round}"
        out.mkdir(exist_ok=True)
        res = b.run(out, "ok", env={DISK_FULL_ENV: str(at_round)}, timeout=240)
        path = _run_file(out)
        ok = clean_error(res, (5,)) and "run: " not in res.stdout and "disk is full" in res.stderr
        detail = f"rc={res.rc} {res.stderr.strip()[-160:]}"
        if ok and path is not None:
            resumed = b.cli("resume", str(path), "--model", b.model_spec("ok"), "--no-report", "--quiet",
                            timeout=240)
            _, data = b.report(path)
            ok = resumed.rc == 0 and b.same_as_reference(data)
            detail += f"; resumed rc={resumed.rc} {resumed.stderr.strip()[-200:]}"
        return Outcome(name, ok, failed=res.crashed, detail=detail, seconds=res.seconds)
    return f"disk-full:mid-run@{at_round}", case


def deleted_file_case(action: str) -> tuple[str, CaseFn]:
    """The run file disappears (or is replaced) during the run: an error, never "run: PATH"."""
    def case(b: Bench) -> Outcome:
        out = b.root / f"gone-{action}"
        args = [sys.executable, "-m", "kgprobe.cli", "run", "--model", b.model_spec("slow40"), *RUN_ARGS,
                "--out", str(out), "--no-report", "--quiet"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=b.root,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
        t0 = time.perf_counter()
        while _run_file(out) is None and proc.poll() is None and time.perf_counter() - t0 < 120:
            time.sleep(0.02)
        path = _run_file(out)
        if path is not None:
            if action == "delete":
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
            else:
                path.rename(path.with_suffix(".moved"))
                path.write_bytes(b"")
        try:
            out_text, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out_text, err = proc.communicate()
        res = Result(proc.returncode, out_text, err, time.perf_counter() - t0, 0, False)
        ok = clean_error(res, (5,)) and "run: " not in out_text
        return Outcome(f"lost-file:{action}", ok, failed=res.crashed, detail=f"rc={res.rc} {err.strip()[-160:]}",
                       seconds=res.seconds)
    return f"lost-file:{action}", case


def config_case(name: str, toml: str, needle: str) -> tuple[str, CaseFn]:
    """A wrong config value: exit 2 naming the key, before any run file exists."""
    def case(b: Bench) -> Outcome:
        cfg = b.root / f"cfg-{name}.toml"
        cfg.write_text(toml)
        out = b.root / f"cfg-out-{name}"
        res = b.cli("run", "--config", str(cfg), "--model", b.model_spec("ok"), "--out", str(out), "--quiet",
                    "--no-report", timeout=120)
        ok = clean_error(res, (2,)) and needle in res.stderr and _run_file(out) is None
        return Outcome(f"config:{name}", ok, failed=res.crashed, detail=f"rc={res.rc} {res.stderr.strip()[-160:]}",
                       seconds=res.seconds)
    return f"config:{name}", case


def markdown_case() -> tuple[str, CaseFn]:
    """Hostile KG labels reach the Markdown report as inert text, not HTML."""
    def case(b: Bench) -> Outcome:
        kg = b.root / "hostile.jsonl"
        _write_hostile_kg(kg)
        out = b.root / "hostile-run"
        res = b.cli("run", "--kg", str(kg), "--model", b.model_spec("ok"), "--out", str(out), "--quiet",
                    "--budget", "6", "--batch-size", "3", "--probe-option", "num_examples=2",
                    "--probe-option", "num_distractors=1", "--model-option", 'label="fake"', timeout=240)
        md = next(out.glob("*.md"), None)
        text = md.read_text() if md else ""
        ok = res.rc == 0 and md is not None and "<script" not in text and "&lt;script&gt;" in text
        return Outcome("input:markdown-labels", ok, failed=res.crashed, detail=f"rc={res.rc}", seconds=res.seconds)
    return "input:markdown-labels", case


def _write_hostile_kg(path: Path) -> None:
    from kgprobe.kg.formats import save_kg
    from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple

    names = ["<script>alert(1)</script>", "Bob | *bold* [x](javascript:alert(1))", "<img src=x onerror=alert(2)>",
             "Paris", "Lyon", "Nice"]
    entities = [Entity(f"Q{i + 1}", n) for i, n in enumerate(names)]
    predicates = [Predicate("P1", "<b>capital</b>")]
    triples = [Triple(f"Q{i + 1}", "P1", f"Q{(i + 1) % 6 + 1}") for i in range(6)]
    save_kg(KnowledgeGraph(entities, predicates, triples, name="hostile <kg>"), path)


def all_cases(kills: int = 10) -> list[tuple[str, CaseFn]]:
    cases = [sparql_case(m) for m in ("html", "malformed", "truncated", "wrongshape", "notjsonobject",
                                       "r429always", "s500", "hang", "reset")]
    cases += [sparql_case("r429"), sparql_case("s503once"), sparql_case("empty"), sparql_case("rows")]
    cases += [sparql_case("oversized", "--max-response-mb", "1"), sparql_case("ignorelimit", expect=(0, 2, 3))]
    cases += [injection_case("lang-filter", "--seeds", "Q142", "--lang", 'en") || true || ("'),
              injection_case("lang-values", "--seeds", "Q142", "--lang", "en } } SELECT"),
              injection_case("lang-newline", "--seeds", "Q142", "--lang", "en\n#"),
              injection_case("seed-iri", "--seeds", "<http://x> } ; DROP ALL ; <y>"),
              injection_case("dead-predicate", "--seeds", "Q142", "--dead", "<http://p> } }")]
    cases += [model_fault_case(m, recovers=True) for m in ("r429", "s503sometimes", "reset")]
    cases += [model_fault_case(m, recovers=False) for m in ("html", "malformed", "wrongshape", "s500")]
    cases += [kept_answers_case(), round_deadline_case()]
    cases += [metric_digit_case(), last_round_repair_case(), old_file_case()]
    cases += [flip_case(i, "flip") for i in range(16)] + [flip_case(i, "truncate") for i in range(4)]
    cases += [wal_flip_case(i) for i in range(3)] + [cache_flip_case(i) for i in range(3)]
    cases += [kill_case(i, window=False) for i in range(kills)] + [kill_case(i, window=True) for i in range(3)]
    cases += [disk_full_case("rlimit"), disk_full_case("rlimit-late"), disk_full_case("tmpfs"),
              disk_full_mid_run_case(2), disk_full_mid_run_case(4)]
    cases += [deleted_file_case("delete"), deleted_file_case("replace")]
    cases += [config_case("seed-string", 'seed = "x"\n', "'seed' must be an integer"),
              config_case("tolerance-string", 'convergence_tolerance = "a"\n', "'convergence_tolerance' must be a number"),
              config_case("seed-bool", "seed = true\n", "true/false is not a number"),
              config_case("batch-zero", "batch_size = 0\n", "'batch_size' must be an integer >= 1"),
              config_case("design-range", "design_fraction = 2.5\n", "'design_fraction' must be a number"),
              config_case("budget-float", "budget = 1.5\n", "'budget' must be an integer"),
              config_case("unknown-key", "metod = 'hgp'\n", "unknown setting(s) metod"),
              config_case("bad-toml", "seed = = 1\n", "is not valid TOML"),
              config_case("options-not-table", "probe_options = 3\n", "'probe_options' must be a table")]
    cases += [markdown_case()]
    return cases


def setup(b: Bench) -> None:
    """Servers and the reference run (an unbroken run with the bench's settings)."""
    b.sparql = sparql_server(max_requests=2000, lifetime=3600)
    b.model = openai_server(max_requests=200_000, lifetime=3600)
    ref = b.run(b.root / "reference", "ok", timeout=300)
    b.reference = _run_file(b.root / "reference")
    if ref.rc != 0 or b.reference is None:
        raise RuntimeError(f"the reference run failed: rc={ref.rc} {ref.stderr[-500:]}")
    res, b.reference_report = b.report(b.reference)
    if b.reference_report is None:
        raise RuntimeError(f"the reference report failed: {res.stderr[-500:]}")


def run_bench(kills: int = 6, only: str | None = None, root: Path | None = None, quiet: bool = False) -> dict:
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kgprobe-faults-", dir=root))
    b = Bench(tmp)
    try:
        setup(b)
        outcomes: list[Outcome] = []
        for name, fn in all_cases(kills):
            if only and only not in name:
                continue
            t = time.perf_counter()
            try:
                outcome = fn(b)
            except Exception as exc:  # the harness itself failed: count it as a failed case
                outcome = Outcome(name, False, failed=True, detail=f"harness: {type(exc).__name__}: {exc}")
            outcome.seconds = outcome.seconds or time.perf_counter() - t
            outcomes.append(outcome)
            if not quiet:
                flag = "ok  " if outcome.ok else "FAIL"
                print(f"{flag} {name:34s} {time.perf_counter() - t:6.1f} s  {outcome.detail}", flush=True)
    finally:
        for server in (b.sparql, b.model):
            if server is not None:
                server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    kill_outcomes = [o for o in outcomes if o.name.startswith("kill:")]
    return {
        "cases": len(outcomes),
        "passed": sum(o.ok for o in outcomes),
        "failed": sum(o.failed for o in outcomes),
        "silent_wrong": sum(o.silent_wrong for o in outcomes),
        "lost_probes": sum(o.lost_probes for o in outcomes),
        "identical_resumes": sum(bool(o.identical) for o in kill_outcomes),
        "kill_cases": len(kill_outcomes),
        "not_ok": [o.name for o in outcomes if not o.ok],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def register(subparsers) -> None:
    p = subparsers.add_parser("faults", help="fault-injection cases against the real CLI (JSON last line)",
                              description=__doc__)
    p.add_argument("--kills", type=int, default=6, help="kill -9 cases at random moments (default 6; 3 more in the "
                   "replay window)")
    p.add_argument("--only", help="run only the cases whose name contains this text")
    p.set_defaults(func=handle)


def handle(args) -> int:
    result = run_bench(kills=args.kills, only=args.only)
    print(json.dumps(result))
    return 0
