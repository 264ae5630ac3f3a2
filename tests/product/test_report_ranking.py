"""Reports that do not mislead: identical series drawn once with the reason, one ranking,
one definition of "most probed", a help text without noise."""

from __future__ import annotations

from kgprobe.ranking import most_probed, weakest_first
from kgprobe.report import captions, series_groups


def _hist(*rows):
    return [{"metrics": {"win_rate": w, "zero_sense_rate": z, "all_sense_rate": a}} for w, z, a in rows]


def test_identical_series_are_grouped_with_the_reason():
    # One probe per edge: win = all-sense at every round.
    h = _hist((0.5, 0.5, 0.5), (0.4, 0.6, 0.4))
    groups = series_groups(h)
    assert [g[0] for g in groups] == [["win_rate", "all_sense_rate"], ["zero_sense_rate"]]
    assert "win rate and all-sense rate coincide" in groups[0][1] and groups[1][1] == ""
    assert "Drawn as one line: win rate and all-sense rate coincide" in captions({"history": h})["convergence"]
    # Once one edge has mixed answers the lines separate and nothing is collapsed.
    h2 = _hist((0.5, 0.5, 0.5), (0.5, 0.3, 0.4))
    assert [g[0] for g in series_groups(h2)] == [["win_rate"], ["zero_sense_rate"], ["all_sense_rate"]]
    assert "Drawn as one line" not in captions({"history": h2})["convergence"]


def test_weakest_first_ranks_by_estimate_then_evidence_then_name():
    items = {
        "b": {"win_rate": 0.0, "probed_edges": 4},
        "a": {"win_rate": 0.0, "probed_edges": 4},
        "c": {"win_rate": 0.0, "probed_edges": 9},
        "d": {"win_rate": 0.5, "probed_edges": 1},
        # An estimate with an interval, when the metrics carry one, wins over the win rate.
        "e": {"win_rate": 0.9, "estimate": {"estimate": 0.1, "low": 0.0, "high": 0.4}, "probed_edges": 3},
    }
    assert [k for k, _ in weakest_first(items.items())] == ["c", "a", "b", "e", "d"]


def test_most_probed_breaks_ties_by_label():
    counts = {"Q1": 3, "Q2": 5, "Q3": 3, "Q4": 3}
    labels = {"Q1": "Chad", "Q2": "Peru", "Q3": "Benin", "Q4": "Angola"}
    assert most_probed(counts, labels, 3) == ["Q2", "Q4", "Q3"]


def test_help_has_no_none_defaults_or_double_backticks():
    from kgprobe.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        text = p.format_help()
        assert "(default: None)" not in text and "``" not in text, name
    build_help = sub.choices["build"].format_help()
    assert "--seed-entities" in build_help and "--seeds" not in build_help  # the old name is a hidden alias
    assert "(default: 2)" in build_help  # real defaults are still shown
