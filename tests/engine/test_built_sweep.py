"""The committed sweeps of user-built KGs replay against their own KG files."""

import warnings
from collections import Counter
from pathlib import Path

import kgprobe
from kgprobe.kg.formats import load_kg
from kgprobe.sweep import load_sweep, packaged_sweeps

BUILT = Path(kgprobe.__file__).parent / "sweeps" / "built"


def test_built_sweep_matches_its_kg_exactly():
    kg = load_kg(BUILT / "geo-skew.jsonl.gz")
    sweep = load_sweep(BUILT / "geo-skew-default.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a content-hash mismatch would warn
        edges = sweep.edges_in(kg)
    assert (len(edges), sweep.passes) == (311, 4)
    assert int(sweep.correct.sum()) == 920  # 920 of 311 x 4 = 1244 answers right
    per_predicate = Counter(kg.triple(int(j)).predicate for j in edges)
    assert per_predicate.most_common(3) == [("P17", 232), ("P47", 46), ("P37", 7)]
    assert sorted(per_predicate.values())[:6] == [3, 3, 3, 3, 3, 5]


def test_second_built_sweep_matches_its_kg_exactly():
    kg = load_kg(BUILT / "geo-four.jsonl.gz")
    sweep = load_sweep(BUILT / "geo-four-default.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        edges = sweep.edges_in(kg)
    assert (len(edges), sweep.passes) == (487, 6)
    assert int(sweep.correct.sum()) == 1878  # of 487 x 6 = 2922 answers
    per_predicate = Counter(kg.triple(int(j)).predicate for j in edges)
    assert per_predicate.most_common(3) == [("P17", 365), ("P47", 52), ("P37", 18)]
    assert sorted(per_predicate.values())[:3] == [4, 5, 6]
    # Gemma-3-270m's answers on the same KG and edges.
    gemma = load_sweep(BUILT / "geo-four-gemma3-270m.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(gemma.edges_in(kg).tolist()) == sorted(edges.tolist())
    assert (gemma.passes, int(gemma.correct.sum())) == (4, 1529)  # of 487 x 4 = 1948 answers
    qwen = load_sweep(BUILT / "geo-four-qwen2.5-coder-0.5b-instruct.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(qwen.edges_in(kg).tolist()) == sorted(edges.tolist())
    assert (qwen.passes, int(qwen.correct.sum())) == (4, 619)  # of 1948


def test_third_built_sweep_matches_its_kg_exactly():
    kg = load_kg(BUILT / "geo-six.jsonl.gz")
    sweep = load_sweep(BUILT / "geo-six-default.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        edges = sweep.edges_in(kg)
    assert (len(edges), sweep.passes) == (1140, 5)
    assert int(sweep.correct.sum()) == 3524  # of 1140 x 5 = 5700 answers
    per_predicate = Counter(kg.triple(int(j)).predicate for j in edges)
    assert per_predicate.most_common(3) == [("P17", 960), ("P47", 91), ("P37", 23)]
    assert sorted(per_predicate.values())[:4] == [1, 7, 7, 7]


def test_built_sweep_is_not_pooled_with_the_embedded_kgs_sweeps():
    built = {p.stem for p in BUILT.glob("*.npz")}
    assert built == {"geo-skew-default", "geo-four-default", "geo-four-gemma3-270m",
                     "geo-four-qwen2.5-coder-0.5b-instruct", "geo-six-default"}
    assert not built & set(packaged_sweeps())
