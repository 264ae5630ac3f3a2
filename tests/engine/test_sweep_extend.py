"""Growing a recorded sweep: the stratified extension sample and the merged sweep file."""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.sweep import Sweep, extension_edges, merge_sweeps


def small_kg():
    # predicate P1: edges 0-5, P2: edges 6-8, P3: edge 9
    ents = [Entity(f"Q{i}", f"E{i}") for i in range(20)]
    triples = [Triple(f"Q{i}", "P1", f"Q{i + 10}") for i in range(6)]
    triples += [Triple(f"Q{i}", "P2", f"Q{i + 4}") for i in range(6, 9)]
    triples += [Triple("Q9", "P3", "Q19")]
    return KnowledgeGraph(ents, [Predicate(p, p) for p in ("P1", "P2", "P3")], triples, name="toy")


def per_predicate(kg, edges):
    return np.bincount(kg.predicate_of[np.asarray(edges)], minlength=3).tolist()


def test_extension_tops_up_each_predicate_to_its_quota():
    kg = small_kg()
    base = np.array([0, 1, 2, 6])  # 3 of P1, 1 of P2
    # n = 6 of sizes (6, 3, 1): quotas 3.6, 1.8, 0.6 -> floors 3, 1, 0 -> at least one each
    # -> 3, 1, 1 -> the largest remainder (P2, .8) gets the sixth -> 3, 2, 1; base has 3, 1, 0
    new = extension_edges(kg, np.arange(10), 6, seed=0, base=base)
    assert per_predicate(kg, new) == [0, 1, 1]
    assert 9 in new and set(new.tolist()) - {9} <= {7, 8}
    assert np.intersect1d(new, base).size == 0
    assert extension_edges(kg, np.arange(10), 6, seed=0, base=base).tolist() == new.tolist()


def test_extension_takes_back_where_the_base_is_over_its_quota():
    kg = small_kg()
    base = np.arange(5)  # 5 of P1
    # n = 7: quotas 4.2, 2.1, 0.7 -> 4, 2, 1; base 5, 0, 0 -> wants 0, 2, 1 = 3 > the 2 to add;
    # P3 would drop to none, so P2 (the next most above quota among those keeping one) gives
    new = extension_edges(kg, np.arange(10), 7, seed=0, base=base)
    assert per_predicate(kg, new) == [0, 1, 1]
    # n = 9: quotas 5.4, 2.7, 0.9 -> 5, 2, 1 -> the ninth to P2 (.7; P3 is full) -> 5, 3, 1
    new = extension_edges(kg, np.arange(10), 9, seed=1, base=np.array([0]))
    assert per_predicate(kg, np.union1d(new, [0])) == [5, 3, 1]


def test_extension_keeps_a_base_edge_outside_the_population_and_checks_n():
    kg = small_kg()
    new = extension_edges(kg, np.arange(1, 10), 3, seed=0, base=np.array([0]))  # edge 0 no longer active
    assert new.size == 2 and 0 not in new
    with pytest.raises(InputError, match="above the 4 edges of the sweep being extended"):
        extension_edges(kg, np.arange(10), 4, seed=0, base=np.array([0, 1, 2, 6]))
    with pytest.raises(InputError, match="at most the 10 edges available"):
        extension_edges(kg, np.arange(10), 11, seed=0, base=np.array([0]))


def sweep(edges, correct, passes, *, gold=None, model="m@1", **kw):
    e = np.asarray(edges)
    fields = dict(kg="toy", kg_hash="h", method="zp-lke", probe_options={"num_examples": 2}, model=model,
                  passes=passes, seed=0, edges=e, correct=np.asarray(correct, dtype=bool).reshape(e.size, passes),
                  gold_logprob=gold, best_wrong_logprob=None if gold is None else np.zeros((e.size, passes)),
                  made_by="kgprobe sweep ...", keys=np.array([[f"Q{j}", "P1", f"Q{j + 10}"] for j in e]))
    fields.update(kw)
    return Sweep(**fields)


def test_merge_takes_the_first_passes_of_the_base_and_sorts_by_edge():
    base = sweep([1, 4], [[1, 0, 1], [0, 0, 1]], 3, gold=np.array([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]]),
                 kg_hash="old")
    new = sweep([2, 7], [[1, 1], [0, 1]], 2, gold=np.array([[-7.0, -8.0], [-9.0, -10.0]]), seed=5)
    merged = merge_sweeps(base, new, made_by="kgprobe sweep --extend base")
    assert merged.edges.tolist() == [1, 2, 4, 7] and merged.passes == 2
    assert merged.correct.tolist() == [[True, False], [True, True], [False, False], [False, True]]
    assert merged.gold_logprob.tolist() == [[-1.0, -2.0], [-7.0, -8.0], [-4.0, -5.0], [-9.0, -10.0]]
    assert merged.keys[:, 0].tolist() == ["Q1", "Q2", "Q4", "Q7"]
    assert merged.kg_hash == "h" and merged.seed == 5 and merged.accuracy() == 0.5
    assert merged.info["extends"]["edges"] == 2 and merged.info["extends"]["kg_hash"] == "old"


@pytest.mark.parametrize("change, message", [
    (dict(model="other@2"), "its model is 'm@1'"),
    (dict(method="hgp"), "its method is 'zp-lke'"),
    (dict(probe_options={"num_examples": 5}), "its probe_options"),
])
def test_merge_refuses_answers_of_another_model_or_protocol(change, message):
    base = sweep([1], [[1, 1]], 2)
    with pytest.raises(InputError, match=message):
        merge_sweeps(base, sweep([2], [[1, 0]], 2, **change), made_by="x")


def test_merge_refuses_fewer_base_passes_or_shared_edges():
    with pytest.raises(InputError, match="it has only 1"):
        merge_sweeps(sweep([1], [[1]], 1), sweep([2], [[1, 0]], 2), made_by="x")
    with pytest.raises(InputError, match="repeat some of its edges"):
        merge_sweeps(sweep([1], [[1, 0]], 2), sweep([1, 2], [[1, 0], [0, 0]], 2), made_by="x")


def test_a_sweep_names_its_model_by_name_and_weights_hash():
    from kgprobe.sweep import model_label

    assert model_label("transformers:smollm2-135m-instruct@b179c9523d0e6a0f|dtype=float32|bos=0") == \
        "smollm2-135m-instruct@b179c9523d0e6a0f"
    assert model_label("vllm:gemma3-270m@a5fd3b62230aa5ec") == "gemma3-270m@a5fd3b62230aa5ec"
    assert model_label("plain-name") == "plain-name"


def test_merge_counts_options_an_older_file_lacks_at_their_defaults():
    from kgprobe.settings import probe_option_defaults

    # the first default-model recording stored only these two; today's run resolves them all.
    # An option added since (the examples' rendering) counts at the value such a recording
    # was made with (the paper's), not at today's default (balanced).
    base = sweep([1], [[1, 1]], 2, probe_options={"num_examples": 20, "num_distractors": 19})
    today = {**probe_option_defaults("zp-lke"), "num_examples": 20, "num_distractors": 19, "examples": "paper"}
    merged = merge_sweeps(base, sweep([2], [[1, 0]], 2, probe_options=today), made_by="x")
    assert merged.probe_options == today and merged.edges.tolist() == [1, 2]
    with pytest.raises(InputError, match="its probe_options"):
        merge_sweeps(base, sweep([2], [[1, 0]], 2, probe_options={**today, "pair_sep": " | "}), made_by="x")
    with pytest.raises(InputError, match="its probe_options"):
        merge_sweeps(base, sweep([2], [[1, 0]], 2, probe_options={**today, "examples": "balanced"}), made_by="x")
