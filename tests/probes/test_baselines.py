"""No-knowledge baselines and the balanced ZP-LKE rendering, with values worked out by hand."""

from __future__ import annotations

import collections
import hashlib
import json
import warnings

import numpy as np
import pytest

from kgprobe.baselines import baselines, context_majority, dominated
from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.probes import make_probe


@pytest.fixture(scope="module")
def countries():
    from kgprobe.api import resolve_kg

    return resolve_kg("countries")


def skewed_kg() -> KnowledgeGraph:
    """Five cities in "country": four in X, one in Y (edges 0-3 -> X, edge 4 -> Y)."""
    ents = [Entity(f"Q{i}", name, group="city") for i, name in enumerate(["Aa", "Bb", "Cc", "Dd", "Ee"], start=1)]
    ents += [Entity("Q10", "Xland", group="country"), Entity("Q11", "Yland", group="country")]
    triples = [Triple(f"Q{i}", "P17", "Q10") for i in range(1, 5)] + [Triple("Q5", "P17", "Q11")]
    return KnowledgeGraph(ents, [Predicate("P17", "country")], triples, name="skewed")


def objects_of(kg, edges):
    return [kg.entity_id(int(kg.objects[j])) for j in edges]


def test_majority_rate_by_hand_paper_rendering():
    kg = skewed_kg()
    probe = make_probe("zp-lke", num_examples=4, num_distractors=1, examples="paper")
    # Edge 0 (Aa -> Xland): the examples are the other 4 facts, X three times and Y once; the
    # options are {Xland, Yland}; the majority rule picks Xland: right.
    examples, _names, ids, gold = probe.rendering(kg, 0, np.random.default_rng(0))
    assert sorted(objects_of(kg, examples)) == ["Q10", "Q10", "Q10", "Q11"] and ids[gold] == "Q10"
    assert context_majority(probe, kg, 0, np.random.default_rng(0)) == 1.0
    # Edge 4 (Ee -> Yland): the examples are X four times, Y never: the rule picks Xland: wrong.
    assert context_majority(probe, kg, 4, np.random.default_rng(0)) == 0.0
    # Per predicate: 4 of 5 edges right = 0.8 (each edge rendered ceil(RENDERINGS / 5) times); chance 1/2.
    found = baselines(kg, "zp-lke", {"num_examples": 4, "num_distractors": 1, "examples": "paper"})
    row = found["by_predicate"]["P17"]
    assert (row["chance"], row["majority"], row["null"]) == (0.5, pytest.approx(0.8), None)
    assert (row["top_object"], row["top_object_share"], row["active_edges"]) == ("Xland", 0.8, 5)
    assert found["kg"] == {"chance": 0.5, "majority": pytest.approx(0.8), "null": None}
    assert found["by_group"]["city"] == {"chance": 0.5, "majority": pytest.approx(0.8)}
    # 80 % of the edges have one object, with 5 edges: named in a warning.
    [warning] = dominated(found["by_predicate"])
    assert warning == ("predicate 'country': 80% of its edges have the object 'Xland'; a model that only "
                       "learned to answer it would score about 80% (the protocol's baselines: chance 50.0%, "
                       "context majority 80.0%; `kgprobe report RUN --null-model` measures a no-knowledge model)")


def test_majority_rate_by_hand_balanced_rendering():
    kg = skewed_kg()
    probe = make_probe("zp-lke", num_examples=4, num_distractors=1, examples="balanced")
    # Edge 0: Xland has 3 usable facts, Yland 1: each option shown min(4 // 2, 1) = 1 time and
    # no fact has an object outside the options: 2 examples, a tie, the rule is right half the time.
    examples, _names, ids, gold = probe.rendering(kg, 0, np.random.default_rng(0))
    assert sorted(objects_of(kg, examples)) == ["Q10", "Q11"]
    assert context_majority(probe, kg, 0, np.random.default_rng(0)) == 0.5
    # Edge 4: Yland has no other fact, so no option is shown (0 examples): a tie again.
    examples, *_ = probe.rendering(kg, 4, np.random.default_rng(0))
    assert examples == []
    assert context_majority(probe, kg, 4, np.random.default_rng(0)) == 0.5
    row = baselines(kg, "zp-lke", {"num_examples": 4, "num_distractors": 1, "examples": "balanced"})["by_predicate"]["P17"]
    assert (row["chance"], row["majority"]) == (0.5, 0.5)


def test_balanced_examples_show_every_option_equally_often(countries):
    probe = make_probe("zp-lke", num_examples=20, num_distractors=19, examples="balanced")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spreads = collections.Counter()
        for pid in countries.predicate_ids:
            for e in countries.edges_of_predicate(pid)[:15].tolist():
                examples, _names, ids, gold = probe.rendering(countries, e, np.random.default_rng(e))
                counts = collections.Counter(objects_of(countries, examples))
                shown = [counts[o] for o in ids]
                assert max(shown) - min(shown) <= 1  # equal, or one more for options drawn at random
                assert len(examples) <= 20 and len(set(examples)) == len(examples)
                assert countries.subjects[e] not in countries.subjects[examples]  # never the probed subject
                spreads[max(shown) - min(shown)] += 1
        # "continent": 7 options x 2 = 14, the 6 left over go to 6 of the 7 options -> 2 or 3 each.
        pid = next(p for p in countries.predicate_ids if countries.predicate_label(p) == "continent")
        e = int(countries.edges_of_predicate(pid)[0])
        examples, _names, ids, _gold = probe.rendering(countries, e, np.random.default_rng(1))
        counts = collections.Counter(objects_of(countries, examples))
        assert len(ids) == 7 and sorted(counts[o] for o in ids) == [2, 3, 3, 3, 3, 3, 3] and len(examples) == 20
    assert spreads[0] > 0 and spreads[1] > 0


def test_balanced_generation_examples_have_distinct_objects(countries):
    probe = make_probe("zp-lke-gen", num_examples=20, examples="balanced")
    pid = next(p for p in countries.predicate_ids if countries.predicate_label(p) == "official language")
    for e in countries.edges_of_predicate(pid)[:10].tolist():
        examples = probe.example_edges(countries, e, np.random.default_rng(e))
        objects = objects_of(countries, examples)
        assert len(objects) == 20 and len(set(objects)) == 20


def _rendering_digest(kg, **options) -> str:
    h = hashlib.sha256()
    for method, opts in (("zp-lke", {"num_examples": 20, "num_distractors": 19}), ("zp-lke-gen", {"num_examples": 20})):
        probe = make_probe(method, **opts, **options)
        for e in kg.active_edges()[::97][:33].tolist():
            t = probe.render(kg, int(e), np.random.default_rng([7, int(e)]))
            h.update(json.dumps([t.question, [r.continuation for r in t.score_requests],
                                 [r.prompt for r in t.generate_requests], t.payload], default=str).encode())
    return h.hexdigest()


#: The digest of 66 renderings by the ZP-LKE probes before the ``examples`` option existed
#: (computed with that code): records made then must render the same way today.
PAPER_DIGEST = "6d6ad10490cacb799baf4b30f16c43d9e11ff8359da661c42bb5ac93cd05a147"


def test_paper_rendering_is_unchanged_and_is_what_a_record_without_the_option_gets(countries):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _rendering_digest(countries) == PAPER_DIGEST  # probe built without the option (resume)
        assert _rendering_digest(countries, examples="paper") == PAPER_DIGEST
        assert _rendering_digest(countries, examples="balanced") != PAPER_DIGEST


def test_examples_option_is_checked():
    with pytest.raises(InputError, match="examples='leaky': choose one of balanced, paper"):
        make_probe("zp-lke", examples="leaky")
    with pytest.raises(InputError, match="add --probe-option examples=paper"):
        make_probe("zp-lke", examples="balanced", fixed_examples=True)
    make_probe("zp-lke", examples="paper", fixed_examples=True)
