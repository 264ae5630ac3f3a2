"""The round loop: determinism, one model call per round, log-before-update, budget, replay."""

from __future__ import annotations

import numpy as np
import pytest

import kgprobe
from kgprobe.engine import EngineConfig, RoundFinished, RunFinished, round_rng
from kgprobe.errors import InputError

#: Fast settings: a real ZP-LKE rendering with few examples and options.
FAST_PROBE = {"num_examples": 5, "num_distractors": 4}


def make_run(kg, model, store=None, **kw):
    settings = dict(method="zp-lke", batch_size=16, budget=96, seed=5, probe_options=FAST_PROBE, lazy=True,
                    store=store)
    settings.update(kw)
    return kgprobe.probe(kg, model, **settings)


def final_state(run):
    state = run.pkg.state_dict()
    return {k: np.asarray(v).copy() for k, v in state.items()}


def assert_same_run(a, b):
    sa, sb = final_state(a), final_state(b)
    assert sa.keys() == sb.keys()
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), k
    ha, hb = a.history(), b.history()
    assert [h["metrics"] for h in ha] == [h["metrics"] for h in hb]
    assert [h["queries_spent"] for h in ha] == [h["queries_spent"] for h in hb]
    pa, pb = a.store.probes(), b.store.probes()
    assert [(p.round, p.edge, p.design, p.correct, p.question, p.answer) for p in pa] == \
        [(p.round, p.edge, p.design, p.correct, p.question, p.answer) for p in pb]


def test_round_rng_is_a_function_of_seed_round_and_path():
    a = round_rng(7, 3, 1, 0).random(4)
    assert np.array_equal(a, round_rng(7, 3, 1, 0).random(4))
    assert not np.array_equal(a, round_rng(7, 4, 1, 0).random(4))
    assert not np.array_equal(a, round_rng(7, 3, 1, 1).random(4))
    assert not np.array_equal(a, round_rng(8, 3, 1, 0).random(4))


def test_same_seed_same_run_other_seed_other_run(countries, sim_model):
    a = make_run(countries, sim_model).finish()
    b = make_run(countries, sim_model).finish()
    assert_same_run(a, b)
    c = make_run(countries, sim_model, seed=6).finish()
    assert [p.edge for p in c.store.probes()] != [p.edge for p in a.store.probes()]


def test_budget_is_spent_exactly_with_a_short_last_round(countries, sim_model):
    # 100 queries, 32 per round, 1 query per ZP-LKE task: rounds of 32, 32, 32 and 4.
    run = make_run(countries, sim_model, batch_size=32, budget=100, convergence=False).finish()
    h = run.history()
    assert [x["queries"] for x in h] == [32, 32, 32, 4]
    assert h[-1]["queries_spent"] == 100 and run.stop_reason == "budget"
    assert run.metrics.probed_edges == len({p.edge for p in run.store.probes()})


def test_max_rounds_and_no_budget(countries, sim_model):
    run = make_run(countries, sim_model, budget=None, max_rounds=3, convergence=False).finish()
    assert run.rounds_played == 3 and run.stop_reason == "max-rounds" and run.queries_spent == 48


def test_one_score_call_per_round_and_responses_logged_before_update(countries, sim_model, monkeypatch):
    calls = []
    orig_score = type(sim_model).score

    def score(self, requests):
        calls.append(len(requests))
        return orig_score(self, requests)

    monkeypatch.setattr(type(sim_model), "score", score)
    run = make_run(countries, sim_model, budget=48, convergence=False)
    engine = run.engine
    seen = []
    orig_update = engine.pkg.update

    def update(edges, correct, margins=None):
        # At update time this round's responses must already be in the store.
        seen.append(run.store.logged_responses(engine.round + 1, "score") is not None)
        return orig_update(edges, correct, margins)

    engine.pkg.update = update
    run.finish()
    # 3 rounds of 16 ZP-LKE tasks with 5 options each: one call of 80 requests per round.
    assert calls == [80, 80, 80]
    assert seen == [True, True, True]
    assert run.store.num_logged_requests() == 240


def test_events_and_early_stop_then_resume_equals_unbroken(tmp_path, countries, sim_model):
    unbroken = make_run(countries, sim_model, store=tmp_path / "a.kgrun").finish()
    events = []
    run = make_run(countries, sim_model, store=tmp_path / "b.kgrun", listeners=[events.append])
    for summary in run.rounds():
        if summary.round == 2:
            break
    assert run.status == "stopped" and run.rounds_played == 2
    kinds = [type(e).__name__ for e in events]
    assert kinds[:5] == ["RunStarted", "RoundStarted", "RoundFinished", "RoundStarted", "RoundFinished"]
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "stopped"
    run.close()
    resumed = kgprobe.resume(tmp_path / "b.kgrun", sim_model)
    assert resumed.is_finished and resumed.stop_reason == unbroken.stop_reason
    assert_same_run(unbroken, resumed)


def test_a_round_answered_but_not_committed_is_replayed(tmp_path, countries, sim_model, monkeypatch):
    unbroken = make_run(countries, sim_model, store=tmp_path / "a.kgrun").finish()
    run = make_run(countries, sim_model, store=tmp_path / "b.kgrun")
    engine = run.engine
    orig_update = engine.pkg.update

    def crash_in_round_3(edges, correct, margins=None):
        if engine.round + 1 == 3:
            raise RuntimeError("simulated crash between logging and update")
        return orig_update(edges, correct, margins)

    engine.pkg.update = crash_in_round_3
    with pytest.raises(RuntimeError):
        run.finish()
    assert run.rounds_played == 2 and run.store.logged_responses(3, "score") is not None
    run.close()

    asked = []
    orig_score = type(sim_model).score
    monkeypatch.setattr(type(sim_model), "score", lambda self, reqs: asked.append(len(reqs)) or orig_score(self, reqs))
    resumed = kgprobe.resume(tmp_path / "b.kgrun", sim_model)
    h = resumed.history()
    assert h[2]["replayed"] is True and not any(x["replayed"] for x in h[:2] + h[3:])
    # Round 3 came from the store: the model was asked only for rounds 4..6.
    assert len(asked) == len(h) - 3
    assert_same_run(unbroken, resumed)


def test_keyboard_interrupt_leaves_a_resumable_run(tmp_path, countries, sim_model):
    unbroken = make_run(countries, sim_model, store=tmp_path / "a.kgrun").finish()

    def ctrl_c(event):
        if isinstance(event, RoundFinished) and event.summary.round == 4:
            raise KeyboardInterrupt

    run = make_run(countries, sim_model, store=tmp_path / "b.kgrun", listeners=[ctrl_c])
    with pytest.raises(KeyboardInterrupt):
        run.finish()
    assert run.status == "interrupted" and run.rounds_played == 4
    run.close()
    assert_same_run(unbroken, kgprobe.resume(tmp_path / "b.kgrun", sim_model))


def test_resume_refuses_another_model(tmp_path, countries, theta, sim_model):
    from kgprobe.simulation.model import SimulatedModel

    make_run(countries, sim_model, store=tmp_path / "a.kgrun", max_rounds=1).finish().close()
    with pytest.raises(InputError, match="was made with model"):
        kgprobe.resume(tmp_path / "a.kgrun", SimulatedModel(countries, theta, seed=12))


def test_resume_can_extend_a_finished_run(tmp_path, countries, sim_model):
    # Under the uniform design nothing a round draws depends on the budget, so the
    # extended run is the run started with the larger budget.
    run = make_run(countries, sim_model, store=tmp_path / "a.kgrun", budget=32, convergence=False,
                   design="uniform").finish()
    assert run.queries_spent == 32
    run.close()
    longer = kgprobe.resume(tmp_path / "a.kgrun", sim_model, budget=64)
    assert longer.queries_spent == 64 and longer.rounds_played == 4
    straight = make_run(countries, sim_model, budget=64, convergence=False, design="uniform").finish()
    assert_same_run(straight, longer)


def test_resume_extends_an_adaptive_run_keeping_its_rounds(tmp_path, countries, sim_model):
    # The default design paces its stratum minimums by the budget (and at 32 queries caps
    # them at 2.62 draws, against 4 at 64), so an extension draws other floor edges than a
    # run started with 64 (docs/design.md): it keeps the two rounds played and adds two,
    # every new design probe with its inclusion probability.
    run = make_run(countries, sim_model, store=tmp_path / "b.kgrun", budget=32, convergence=False).finish()
    first = {k: np.asarray(v).copy() for k, v in run.store.probe_arrays().items()}
    run.close()
    longer = kgprobe.resume(tmp_path / "b.kgrun", sim_model, budget=64)
    assert longer.queries_spent == 64 and longer.rounds_played == 4
    probes = longer.store.probe_arrays()
    kept = probes["round"] <= 2
    for key in ("edge", "round", "part", "inclusion", "correct"):
        assert np.array_equal(probes[key][kept], first[key], equal_nan=key == "inclusion")
    new = probes["round"] > 2
    assert int(new.sum()) == 32 and (probes["part"][new] > 0).all()
    assert ((probes["inclusion"][new] > 0) & (probes["inclusion"][new] <= 1)).all()
    longer.close()


def test_a_lean_target_run_resumes_with_the_rounds_it_played(tmp_path, countries, sim_model):
    # The lean target's control reads what the rounds played cost (their share of the
    # interval's variance); a resume rebuilds it from the run file, so a run stopped after
    # two rounds and resumed draws as the unbroken one, round for round.
    kw = dict(budget=96, convergence=False, lean_target=0.09)
    unbroken = make_run(countries, sim_model, store=tmp_path / "a.kgrun", **kw).finish()
    run = make_run(countries, sim_model, store=tmp_path / "b.kgrun", **kw)
    for summary in run.rounds():
        if summary.round == 2:
            break
    run.close()
    resumed = kgprobe.resume(tmp_path / "b.kgrun", sim_model)
    assert_same_run(unbroken, resumed)
    plan, again = unbroken.engine.design_plan, resumed.engine.design_plan
    assert plan.played == again.played and plan.played[2] == 96
    assert again.hunt_shares == plan.hunt_shares[2:]
    # ±9 points leaves room in some rounds and not in others: the control is at work.
    assert plan.hunt_shares == [0.0, 0.625, 0.875, 0.0, 0.0, 0.0]
    # What the control counted is the interval's own variance: Σ m_t·s²_t = M²·se².
    estimate = unbroken.estimates()["kg"]
    assert plan.played[0] == pytest.approx(96**2 * estimate["se"] ** 2, rel=1e-9)
    assert unbroken.config.lean_control == "realized"


def test_a_lean_target_run_file_from_before_the_control_resumes_with_its_rule(tmp_path, countries, sim_model):
    # A run file written before the control has no lean_control in its settings: its lean
    # projected every round from the predictions alone, and a resume keeps that rule.
    import json

    from kgprobe.store import RunStore

    run = make_run(countries, sim_model, store=tmp_path / "r.kgrun", budget=32, convergence=False,
                   lean_target=0.1).finish()
    assert run.engine.design_plan.played[2] == 32
    run.close()
    store = RunStore.open(tmp_path / "r.kgrun", writable=True)
    recorded = json.loads(store.meta("config"))
    assert recorded.pop("lean_control") == "realized"
    store.set_meta("config", json.dumps(recorded))
    store.close()
    resumed = kgprobe.resume(tmp_path / "r.kgrun", sim_model, budget=64)
    plan = resumed.engine.design_plan
    assert resumed.config.lean_control == "projected" and plan.lean_control == "projected"
    assert plan.played[2] == 64 and plan._spent_so_far() == (0.0, 0.0, 1.0)
    resumed.close()


def test_convergence_stops_the_run(countries, sim_model):
    # A huge tolerance converges as soon as the window is full: window 2 -> after round 3.
    run = make_run(countries, sim_model, budget=None, max_rounds=10, convergence=(2, 1.0)).finish()
    assert run.stop_reason == "converged" and run.rounds_played == 3
    assert [h["converged"] for h in run.history()] == [False, False, True]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(budget=10), "below one batch"),
        (dict(batch_size=0), "setting 'batch_size' must be an integer >= 1, not 0"),
        (dict(batch_size=100_000), "larger than the 3210 active edges"),
        (dict(method="telepathy"), "unknown probe method 'telepathy'"),
        (dict(sampler="oracle"), "unknown sampler 'oracle'"),
        (dict(convergence=(1, 0.01)), "setting 'convergence_window' must be an integer >= 2, not 1"),
    ],
)
def test_bad_settings_are_input_errors(countries, sim_model, kw, message):
    with pytest.raises(InputError, match=message):
        make_run(countries, sim_model, **kw)


def test_engine_config_round_trips_and_rejects_unknown_keys():
    cfg = EngineConfig(method="hard", budget=640, probe_options={"x": 1}, prior=(2.0, 1.0))
    assert EngineConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(InputError, match="unknown run setting"):
        EngineConfig.from_dict({"methd": "hard"})


def test_interrupted_in_the_middle_of_an_update_then_continued_in_process(countries, sim_model):
    unbroken = make_run(countries, sim_model).finish()
    run = make_run(countries, sim_model)
    engine = run.engine
    orig_update = engine.pkg.update
    state = {"raised": False}

    def half_update(edges, correct, margins=None):
        if engine.round + 1 == 3 and not state["raised"]:
            state["raised"] = True
            # Part of the round reaches the PKG, then Ctrl-C.
            orig_update(edges[:5], correct[:5], None if margins is None else margins[:5])
            raise KeyboardInterrupt
        return orig_update(edges, correct, margins)

    engine.pkg.update = half_update
    with pytest.raises(KeyboardInterrupt):
        run.finish()
    # Same object, same process: the half-applied round is discarded, not counted twice.
    run.finish()
    assert_same_run(unbroken, run)


def test_scoring_method_on_a_model_that_cannot_score(tmp_path, countries, theta):
    from kgprobe.errors import ModelError
    from kgprobe.simulation.model import SimulatedModel

    class ChatOnly(SimulatedModel):
        can_score = False

    model = ChatOnly(countries, theta)
    with pytest.raises(ModelError, match="cannot return log-probabilities"):
        make_run(countries, model, store=tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before a run file was created
    # Generation methods work on it.
    run = make_run(countries, model, method="yes-no", probe_options={}, budget=16).finish()
    assert run.queries_spent == 16


def test_an_unnamed_entity_is_refused_before_the_run_starts(tmp_path, countries, sim_model):
    from dataclasses import replace

    from kgprobe.kg.graph import KnowledgeGraph

    # Strip Norway of its name (label = its id, no alias), as a hand-made KG file might.
    norway = countries.entity("Q20")
    assert norway.label == "Norway"
    entities = [replace(e, label=e.id, aliases=()) if e.id == "Q20" else e for e in countries.entities.values()]
    kg = KnowledgeGraph(entities, list(countries.predicates.values()), countries.triples(), name="no-norway")
    touching = [j for j in kg.active_edges() if "Q20" in (kg.triple(j).subject, kg.triple(j).object)]
    first = kg.triple(int(min(touching)))
    store = tmp_path / "run.kgrun"
    with pytest.raises(InputError) as info:
        make_run(kg, sim_model, store=store)
    message = str(info.value)
    assert message.startswith(f"{len(touching)} active edge(s) of the KG 'no-norway' have an entity with no usable name")
    assert f"e.g. edge {min(touching)}: ({first.subject}, {first.predicate}, {first.object})" in message
    assert not store.exists()
