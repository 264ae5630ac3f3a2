"""Defect 2 (silent wrong numbers) and the run-file guarantees: every trusted record is
checksummed, a damaged file is refused with exit 2 naming the damage, an old file
without checksums is still read, and damage confined to the last round is repaired by
resume (which then equals an unbroken run)."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

import kgprobe
from kgprobe.cli import main
from kgprobe.errors import DamagedFileError
from kgprobe.store import RunStore


def report_json(path, capsys) -> tuple[int, dict | None, str]:
    rc = main(["report", str(path), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err


def test_a_flipped_metric_digit_is_refused_not_reported(finished_run, capsys):
    rc, reference, _ = report_json(finished_run, capsys)
    assert rc == 0
    conn = sqlite3.connect(finished_run)
    (metrics,) = conn.execute("SELECT metrics FROM rounds WHERE round = 4").fetchone()
    value = json.loads(metrics)["win_rate"]
    digits = json.dumps(value)
    changed = metrics.replace(f'"win_rate":{digits}', f'"win_rate":{digits[:2]}9{digits[3:]}', 1)
    assert changed != metrics
    conn.execute("UPDATE rounds SET metrics = ? WHERE round = 4", (changed,))
    conn.commit()
    conn.close()
    rc, data, err = report_json(finished_run, capsys)
    assert rc == 2 and data is None
    assert "is damaged: round 4 (its row or its probes) does not match its checksum" in err
    assert "Traceback" not in err
    assert main(["verify", str(finished_run)]) == 2
    out = capsys.readouterr().out
    assert "DAMAGED (1 problem)" in out and "only the last round is affected" in out


def test_random_byte_flips_give_exit_2_or_identical_numbers(finished_run, tmp_path, capsys):
    rc, reference, _ = report_json(finished_run, capsys)
    raw = finished_run.read_bytes()
    rng = random.Random(15)
    outcomes = []
    for i in range(12):
        damaged = bytearray(raw)
        pos = rng.randrange(100, len(damaged))
        damaged[pos] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip{i}.kgrun"
        path.write_bytes(bytes(damaged))
        rc, data, err = report_json(path, capsys)
        assert "Traceback" not in err
        if rc == 0:
            strip = lambda d: {k: v for k, v in d.items() if k not in ("run",)}  # noqa: E731
            assert strip(data) == strip(reference), f"byte {pos}: exit 0 with different numbers"
        else:
            assert rc == 2 and "kgprobe: error:" in err, (pos, rc, err)
        outcomes.append(rc)
    assert 2 in outcomes  # the flips did reach records


def test_truncated_and_zeroed_files_are_clear_errors(finished_run, tmp_path, capsys):
    raw = finished_run.read_bytes()
    for cut in (0, 100, 4096, len(raw) // 2, len(raw) - 1):
        path = tmp_path / f"cut{cut}.kgrun"
        path.write_bytes(raw[:cut])
        rc, _, err = report_json(path, capsys)
        assert rc == 2 and "kgprobe: error:" in err and "Traceback" not in err, (cut, err)


def test_a_damaged_kg_blob_is_named(finished_run):
    conn = sqlite3.connect(finished_run)
    (blob,) = conn.execute("SELECT data FROM kg").fetchone()
    blob = bytearray(blob)
    blob[len(blob) // 2] ^= 0xFF
    conn.execute("UPDATE kg SET data = ?", (bytes(blob),))
    conn.commit()
    conn.close()
    with pytest.raises(DamagedFileError) as info:
        RunStore.open(finished_run)
    assert "the KG does not match its checksum" in str(info.value)
    assert "the KG cannot be decoded (error)" in info.value.problems


def test_checksums_cover_columns_added_later(finished_run):
    """Later formats add fields: a column added to probes is covered without extra work."""
    conn = sqlite3.connect(finished_run)
    conn.execute("ALTER TABLE probes ADD COLUMN prediction REAL")
    conn.commit()
    conn.close()
    # The new (NULL) column changes every probe row's digest: the file must say so ...
    with RunStore.open(finished_run, verify=False) as store:
        assert {p.round for p in store.verify().problems} == {1, 2, 3, 4}
    # ... while a file written with the column from the start verifies clean.
    with RunStore.open(finished_run, writable=True) as store:
        for r in range(1, 5):
            prev = store._check(f"round:{r - 1}") or ""
            with store._transaction():
                store._put_check(f"round:{r}", store._round_digest(r, prev))
                store._put_check("head", f"{r}:{store._check(f'round:{r}')}")
        assert store.verify().ok
        with store._transaction():
            store._conn.execute("UPDATE probes SET prediction = 0.5 WHERE round = 2 AND pos = 3")
        assert [str(p) for p in store.verify().problems] == ["round 2 (its row or its probes) does not match its checksum"]


def test_old_files_without_checksums_are_read_and_said_so(finished_run, capsys):
    rc, reference, _ = report_json(finished_run, capsys)
    conn = sqlite3.connect(finished_run)
    conn.execute("DROP TABLE checks")
    conn.execute("DELETE FROM meta WHERE key = 'integrity'")
    conn.commit()
    conn.close()
    rc, data, _ = report_json(finished_run, capsys)
    assert rc == 0 and data["history"] == reference["history"]
    assert main(["verify", str(finished_run)]) == 0
    assert "no checksums: written by an older kgprobe" in capsys.readouterr().out


def test_damage_in_the_last_round_is_dropped_by_resume(tmp_path, countries, sim_model, finished_run):
    reference = RunStore.open(finished_run)
    ref_probes = [(p.round, p.pos, p.edge, p.correct, p.answer) for p in reference.probes()]
    ref_history = [(h["round"], h["metrics"]) for h in reference.history()]
    reference.close()
    conn = sqlite3.connect(finished_run)
    conn.execute("UPDATE probes SET answer = 'tampered' WHERE round = 4 AND pos = 0")
    conn.commit()
    conn.close()
    with pytest.warns(RuntimeWarning, match="dropped round 4, which was damaged"):
        run = kgprobe.resume(finished_run, sim_model)
    probes = [(p.round, p.pos, p.edge, p.correct, p.answer) for p in run.store.probes()]
    history = [(h["round"], h["metrics"]) for h in run.history()]
    run.close()
    assert probes == ref_probes and history == ref_history
    with RunStore.open(finished_run) as store:
        assert store.verify().ok


def test_damage_before_the_last_round_is_refused_by_resume(finished_run, sim_model):
    conn = sqlite3.connect(finished_run)
    conn.execute("UPDATE probes SET correct = 1 - correct WHERE round = 2 AND pos = 0")
    conn.commit()
    conn.close()
    with pytest.raises(DamagedFileError, match="round 2 .* does not match its checksum"):
        kgprobe.resume(finished_run, sim_model)
