"""The committed sweeps of user-built KGs replay against their own KG files."""

import warnings
from collections import Counter
from pathlib import Path

import kgprobe
from kgprobe.kg.formats import load_kg
from kgprobe.sweep import load_sweep, packaged_sweeps

BUILT = Path(kgprobe.__file__).parent / "sweeps" / "built"


def _edges(sweep, kg):
    """The sweep's edges in ``kg``; a content-hash mismatch (a warning) fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return sweep.edges_in(kg)


def _built(kg_file: str, sweep_file: str):
    """A built KG, its default model's sweep, the sweep's edges and their edges per predicate."""
    kg = load_kg(BUILT / kg_file)
    sweep = load_sweep(BUILT / sweep_file)
    edges = _edges(sweep, kg)
    return kg, sweep, edges, Counter(kg.triple(int(j)).predicate for j in edges)


def test_built_sweep_matches_its_kg_exactly():
    _, sweep, edges, per_predicate = _built("geo-skew.jsonl.gz", "geo-skew-default.npz")
    assert (len(edges), sweep.passes) == (311, 4)
    assert int(sweep.correct.sum()) == 920  # 920 of 311 x 4 = 1244 answers right
    assert per_predicate.most_common(3) == [("P17", 232), ("P47", 46), ("P37", 7)]
    assert sorted(per_predicate.values())[:6] == [3, 3, 3, 3, 3, 5]


def test_second_built_sweep_matches_its_kg_exactly():
    kg, sweep, edges, per_predicate = _built("geo-four.jsonl.gz", "geo-four-default.npz")
    assert (len(edges), sweep.passes) == (487, 6)
    assert int(sweep.correct.sum()) == 1878  # of 487 x 6 = 2922 answers
    assert per_predicate.most_common(3) == [("P17", 365), ("P47", 52), ("P37", 18)]
    assert sorted(per_predicate.values())[:3] == [4, 5, 6]
    # Gemma-3-270m's answers on the same KG and edges.
    gemma = load_sweep(BUILT / "geo-four-gemma3-270m.npz")
    assert sorted(_edges(gemma, kg).tolist()) == sorted(edges.tolist())
    assert (gemma.passes, int(gemma.correct.sum())) == (4, 1529)  # of 487 x 4 = 1948 answers
    qwen = load_sweep(BUILT / "geo-four-qwen2.5-coder-0.5b-instruct.npz")
    assert sorted(_edges(qwen, kg).tolist()) == sorted(edges.tolist())
    assert (qwen.passes, int(qwen.correct.sum())) == (4, 619)  # of 1948


def test_third_built_sweep_matches_its_kg_exactly():
    kg, sweep, edges, per_predicate = _built("geo-six.jsonl.gz", "geo-six-default.npz")
    assert (len(edges), sweep.passes) == (1140, 5)
    assert int(sweep.correct.sum()) == 3524  # of 1140 x 5 = 5700 answers
    assert per_predicate.most_common(3) == [("P17", 960), ("P47", 91), ("P37", 23)]
    assert sorted(per_predicate.values())[:4] == [1, 7, 7, 7]
    # Gemma-3-270m's answers on the same KG and edges.
    gemma = load_sweep(BUILT / "geo-six-gemma3-270m.npz")
    assert sorted(_edges(gemma, kg).tolist()) == sorted(edges.tolist())
    assert (gemma.passes, int(gemma.correct.sum())) == (3, 2716)  # of 1140 x 3 = 3420 answers


def test_fourth_built_sweep_matches_its_kg_exactly():
    kg, sweep, edges, per_predicate = _built("geo-five.jsonl.gz", "geo-five-default.npz")
    assert (len(edges), sweep.passes) == (723, 6)
    assert int(sweep.correct.sum()) == 2543  # of 723 x 6 = 4338 answers
    assert per_predicate.most_common(3) == [("P17", 551), ("P47", 76), ("P37", 30)]
    assert sorted(per_predicate.values())[:4] == [5, 5, 5, 6]
    # Recorded with the run's current probe options: balanced ZP-LKE examples.
    assert sweep.probe_options["examples"] == "balanced"
    # Gemma-3-270m's answers on the same KG and edges.
    gemma = load_sweep(BUILT / "geo-five-gemma3-270m.npz")
    assert sorted(_edges(gemma, kg).tolist()) == sorted(edges.tolist())
    assert (gemma.passes, int(gemma.correct.sum())) == (3, 1460)  # of 723 x 3 = 2169 answers


def test_built_sweep_is_not_pooled_with_the_embedded_kgs_sweeps():
    built = {p.stem for p in BUILT.glob("*.npz")}
    assert built == {"geo-skew-default", "geo-four-default", "geo-four-gemma3-270m",
                     "geo-four-qwen2.5-coder-0.5b-instruct", "geo-six-default", "geo-six-gemma3-270m",
                     "geo-five-default", "geo-five-gemma3-270m"}
    assert not built & set(packaged_sweeps())
