"""The run store: KG and state round trips, response log, versions, locks."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from kgprobe.errors import InputError, StoreError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult
from kgprobe.store import run_file as store_mod
from kgprobe.store import (
    FORMAT_VERSION,
    ProbeRecord,
    RoundRecord,
    RunStore,
    apply_delta,
    state_delta,
    kg_fingerprint,
    kg_from_dict,
    kg_to_dict,
    requests_sha,
)


def tiny_kg() -> KnowledgeGraph:
    ents = [
        Entity("Q142", "France", ("French Republic",), "country in Europe", group="country"),
        Entity("Q90", "Paris", (), group="city"),
        Entity("Q183", "Germany", ("Deutschland", "FRG"), group="country"),
        Entity("Q64", "Berlin", group="city"),
        Entity("lit:+33", "+33", is_literal=True, group="literal"),
    ]
    preds = [Predicate("P36", "capital", ("seat",)), Predicate("P474", "country calling code")]
    triples = [
        Triple("Q142", "P36", "Q90"),
        Triple("Q183", "P36", "Q64"),
        Triple("Q142", "P474", "lit:+33", active=False),
    ]
    return KnowledgeGraph(ents, preds, triples, candidates={"P36": ["Q90", "Q64"]}, name="tiny",
                          metadata={"source": "hand-built"})


def test_kg_round_trip_keeps_everything():
    kg = tiny_kg()
    back = kg_from_dict(kg_to_dict(kg))
    assert back.name == "tiny" and back.metadata == {"source": "hand-built"}
    assert back.triples() == kg.triples()
    assert back.entities == kg.entities  # labels, aliases, descriptions, literal flags, groups
    assert back.predicates == kg.predicates
    assert back.candidate_objects("P36") == ("Q90", "Q64")
    assert back.active.tolist() == [True, True, False]
    assert kg_fingerprint(back) == kg_fingerprint(kg)


def test_fingerprint_changes_with_edge_order():
    kg = tiny_kg()
    swapped = KnowledgeGraph(kg.entities.values(), kg.predicates.values(), [kg.triple(1), kg.triple(0), kg.triple(2)],
                             candidates={"P36": ["Q90", "Q64"]}, name="tiny", metadata={"source": "hand-built"})
    assert kg_fingerprint(swapped) != kg_fingerprint(kg)


def test_state_delta_stores_only_changed_entries():
    prev = {"alpha": np.array([1.0, 1.0, 1.0, 1.0]), "n": np.array([0, 0, 0], dtype=np.int32),
            "w": np.asarray(1.0)}
    cur = {"alpha": np.array([1.0, 2.0, 1.0, 3.5]), "n": np.array([0, 0, 1], dtype=np.int32),
           "w": np.asarray(1.0)}
    delta = state_delta(prev, cur)
    # alpha changed at 1 and 3, n at 2; the 0-d "w" did not change and is left out.
    assert delta["idx:alpha"].tolist() == [1, 3] and delta["val:alpha"].tolist() == [2.0, 3.5]
    assert delta["idx:n"].tolist() == [2] and delta["val:n"].tolist() == [1]
    assert not any(k.endswith(":w") for k in delta)
    applied = apply_delta(prev, delta)
    for k in cur:
        assert np.array_equal(applied[k], cur[k]) and applied[k].dtype == cur[k].dtype
    assert prev["alpha"].tolist() == [1.0, 1.0, 1.0, 1.0]  # the base is not modified


def test_state_delta_needs_full_snapshot_when_keys_change():
    assert state_delta({"a": np.zeros(2)}, {"b": np.zeros(2)}) is None


def _record(r: int, alpha: np.ndarray, spent: int) -> RoundRecord:
    return RoundRecord(
        round=r, queries=2, queries_spent=spent, num_requests=4, replayed=False, started=0.0, elapsed=0.5,
        metrics={"win_rate": 0.5, "zero_sense_rate": 0.5, "all_sense_rate": 0.5, "probed_edges": 2},
        converged=False, pkg_state={"alpha": alpha.copy(), "k": np.asarray(r)}, sampler_state={"cursor": r},
        convergence_state={"history": [[0.5, 0.5, 0.5]]},
        probes=[ProbeRecord(r, 0, 0, True, r % 2 == 0, f"q{r}", f"a{r}", {"rank": r}),
                ProbeRecord(r, 1, 1, False, False, "q", "a", {})],
    )


def test_every_rounds_pkg_state_rebuilds_across_keyframes(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "KEYFRAME_EVERY", 3)
    s = RunStore.create(tmp_path / "r.kgrun", config={"x": 1}, kg=tiny_kg(), model_identity="m")
    assert s.sampler_state() is None  # no round yet
    states = []
    alpha = np.ones(5)
    for r in range(1, 8):
        alpha[r % 5] += r  # rounds 1, 4, 7 are keyframes (r % 3 == 1), the rest deltas
        states.append(alpha.copy())
        s.commit_round(_record(r, alpha, 2 * r))
    kinds = [k for (k,) in s._conn.execute("SELECT state_kind FROM rounds ORDER BY round")]
    assert kinds == ["full", "delta", "delta", "full", "delta", "delta", "full"]
    s.close()
    ro = RunStore.open(tmp_path / "r.kgrun")
    for r in range(1, 8):
        st = ro.pkg_state(r)
        assert st["alpha"].tolist() == states[r - 1].tolist() and int(st["k"]) == r
    cp = ro.checkpoint()
    assert cp.round == 7 and cp.queries_spent == 14 and cp.sampler_state == {"cursor": 7}
    assert ro.sampler_state() == {"cursor": 7}  # the same, without decoding the PKG state
    assert [h["queries_spent"] for h in ro.history()] == [2, 4, 6, 8, 10, 12, 14]
    probes = ro.probes(edge=0)
    assert [(p.round, p.correct, p.question, p.detail) for p in probes[:2]] == [
        (1, False, "q1", {"rank": 1}), (2, True, "q2", {"rank": 2})]
    arr = ro.probe_arrays()
    assert arr["design"].sum() == 7 and arr["correct"].sum() == 3  # rounds 2, 4, 6
    ro.close()


def test_responses_round_trip_exactly(tmp_path):
    s = RunStore.create(tmp_path / "r.kgrun", config={}, kg=tiny_kg(), model_identity="m")
    reqs = [ScoreRequest("France ", "Paris", edge=0), ScoreRequest("France ", "Berlin", edge=0)]
    # Values whose shortest repr has 17 significant digits: JSON must keep every bit.
    res = [ScoreResult((-0.1234567890123456789, -2.220446049250313e-16), True), ScoreResult((-7.5,), False)]
    s.log_responses(3, "score", reqs, res)
    gens = [GenerateRequest("Q: capital of France?\nA:", max_tokens=5, stop=("\n",), edge=0)]
    s.log_responses(3, "generate", gens, ["Paris"])
    sha, back = s.logged_responses(3, "score")
    assert sha == requests_sha(reqs) and back == res
    assert s.logged_responses(3, "generate")[1] == ["Paris"]
    assert s.logged_responses(4, "score") is None
    # Order and content matter for the replay check; the edge does too (the simulated model uses it).
    assert requests_sha(list(reversed(reqs))) != sha
    assert requests_sha([ScoreRequest("France ", "Paris", edge=1), reqs[1]]) != sha
    s.close()


def test_request_text_is_the_canonical_json_so_older_run_files_still_replay():
    import hashlib
    import json

    from kgprobe.store import request_to_json, requests_json

    long_context = "Österreich\tWien\n" * 4 + 'Quote "this" \\ and \u00e9\t'
    reqs = [ScoreRequest(long_context, " Paris", edge=3), ScoreRequest(long_context, "Bern", edge=4),
            GenerateRequest("Q: capital?\nA:", max_tokens=5, stop=("\n", "."), edge=0)]
    # What kgprobe wrote before the text was assembled field by field: json.dumps of the
    # field dict with sorted keys and no spaces; the hash is over those lines.
    canonical = [json.dumps(request_to_json(r), sort_keys=True, separators=(",", ":")) for r in reqs]
    assert requests_json(reqs) == canonical
    assert requests_sha(reqs) == hashlib.sha256("".join(t + "\n" for t in canonical).encode()).hexdigest()


def test_a_round_transaction_inside_another_is_refused_and_leaves_none_open(tmp_path):
    s = RunStore.create(tmp_path / "r.kgrun", config={}, kg=tiny_kg(), model_identity="m")
    with s.round_transaction():
        with pytest.raises(StoreError, match="cannot be nested"):
            with s.round_transaction():
                pass
        s.log_responses(1, "score", [ScoreRequest("France ", "Paris", edge=0)], [ScoreResult((-0.5,), True)])
    assert not s._conn.in_transaction
    assert s.logged_responses(1, "score")[1] == [ScoreResult((-0.5,), True)]
    s.close()


def test_newer_format_version_is_refused(tmp_path):
    path = tmp_path / "r.kgrun"
    RunStore.create(path, config={}, kg=tiny_kg(), model_identity="m").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(FORMAT_VERSION + 1),))
    with pytest.raises(InputError, match=f"format version {FORMAT_VERSION + 1}.*Upgrade kgprobe"):
        RunStore.open(path)


def test_not_a_run_file(tmp_path):
    junk = tmp_path / "junk.kgrun"
    junk.write_text("subject\tpredicate\tobject\n")
    with pytest.raises(InputError, match="not a kgprobe run file"):
        RunStore.open(junk)
    with pytest.raises(InputError, match="does not exist"):
        RunStore.open(tmp_path / "missing.kgrun")


def test_a_run_being_written_cannot_be_opened_for_writing_twice(tmp_path):
    path = tmp_path / "r.kgrun"
    writer = RunStore.create(path, config={}, kg=tiny_kg(), model_identity="m")
    with pytest.raises(StoreError, match="in use by another kgprobe process"):
        RunStore.open(path, writable=True)
    RunStore.open(path).close()  # readers are fine (WAL)
    writer.close()
    RunStore.open(path, writable=True).close()  # the lock goes with the writer


def test_existing_file_is_not_overwritten(tmp_path):
    path = tmp_path / "r.kgrun"
    RunStore.create(path, config={}, kg=tiny_kg(), model_identity="m").close()
    with pytest.raises(StoreError, match="already exists"):
        RunStore.create(path, config={}, kg=tiny_kg(), model_identity="m")
