"""The live view's pieces on hand-made numbers, and its layout at 80 and 200 columns."""

from __future__ import annotations

import io
import re

import numpy as np
from rich.console import Console

from kgprobe.engine import EngineConfig, RoundFinished, RoundSummary, RunFinished, RunStarted
from kgprobe.live import LiveView, choose_mode, fmt_duration, sparkline
from kgprobe.metrics import KnowledgeMetrics


def test_sparkline_and_durations():
    assert sparkline([0.0, 0.5, 1.0]) == "▁▄█"
    # Spans under 10 points are widened to 10 points around their middle: 0.50 and 0.51
    # sit at 0.45 and 0.55 of the block scale -> blocks 3 and 4.
    assert sparkline([0.50, 0.51]) == "▄▅"
    assert sparkline([float("nan")]) == ""
    assert fmt_duration(65) == "1:05" and fmt_duration(3725) == "1:02:05" and fmt_duration(None) == "--:--"


def test_choose_mode():
    assert choose_mode(quiet=True) == "quiet"
    assert choose_mode(stream=io.StringIO()) == "plain"  # not a terminal
    assert choose_mode(plain=True) == "plain"


def summary(r, win, zero, allsense, spent, elapsed=2.0):
    return RoundSummary(
        round=r, edges=np.arange(4), correct=np.ones(4, bool), design=np.zeros(4, bool), queries=32,
        queries_spent=spent, budget=256, max_rounds=None, num_requests=640, elapsed=elapsed, model_seconds=1.5,
        replayed=False, metrics=KnowledgeMetrics(win, zero, allsense, 30 * r),
        by_predicate={"P36": KnowledgeMetrics(0.4, 0.6, 0.4, 10), "P47": KnowledgeMetrics(0.7, 0.25, 0.7, 12),
                      "P30": KnowledgeMetrics(0.0, 1.0, 0.0, 2), "P474": KnowledgeMetrics(0.1, 0.9, 0.1, 9)},
        by_group={}, weakest_entities=[("Q142", KnowledgeMetrics(0.0, 1.0, 0.0, 3)),
                                       ("Q974", KnowledgeMetrics(0.5, 0.5, 0.5, 4))], converged=False,
    )


def feed(view: LiveView, kg, model: str = "smollm2"):
    cfg = EngineConfig(sampler="thompson", batch_size=32, budget=256, convergence_window=2)
    view(RunStarted(cfg, "countries", kg.num_active, model, 1, 0, False))
    for r, (w, z, a) in enumerate([(0.50, 0.40, 0.45), (0.52, 0.38, 0.47), (0.55, 0.35, 0.50)], start=1):
        view(RoundFinished(summary(r, w, z, a, 32 * r)))


def test_plain_lines(countries):
    out = io.StringIO()
    view = LiveView(countries, mode="plain", console=Console(file=out, width=200))
    feed(view, countries)
    view(RunFinished("budget", 3, 96))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("kgprobe: probing smollm2 on countries (3210 active edges), method zp-lke")
    # 3 rounds x 32 queries in 3 x 2 s -> 16 queries/s; 160 queries left -> ETA 10 s.
    # Rates count queries, like the progress (not the 640 scoring requests of a round).
    assert lines[3] == ("round 3 | queries 96/256 | 16.0 queries/s | KG accuracy n/a (no design probes yet) | "
                        "win 55.0% zero-sense 35.0% all-sense 50.0% (90 edges) | converging | ETA 0:10")
    assert lines[-1] == "kgprobe: stopped after round 3 (budget), 96 queries spent"


def test_panel_fits_80_and_200_columns(countries):
    for width in (80, 200):
        console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
        view = LiveView(countries, mode="live", console=console)
        feed(view, countries)
        console.print(view.render())
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        lines = text.splitlines()
        header = "smollm2 · countries (3,210 edges) · zp-lke · thompson · batch 32 · seed 0"
        assert lines[1].strip("│ ") == header
        # Trend over the 2-round window: win 0.50 -> 0.55 is +5.0 points.
        assert "55.0%  ▲ +5.0 pt" in text
        assert "96/256 queries" in text and "ETA 0:10" in text
        # Weakest predicates by win rate with >= 3 probed edges: calling code (10%), capital (40%),
        # shares border with (70%).
        assert text.index("country calling") < text.index("capital") < text.index("shares border with")
        assert "continent" not in text  # only 2 probed edges
        assert "France" in text and "100%" in text
        # Every column keeps its header and numbers (rich shrinks the last column first).
        # Win rate with the predicate's highest no-knowledge baseline in brackets: the
        # class defaults (100 options, paper examples) on these predicates give 1 %.
        assert re.search(r"capital\s+40% \(1%\)\s+10\s", text) and re.search(r"France\s+100%\s+3\s", text)
        assert re.search(r"country calling[^│%]*?\s+10% \(1%\)\s+9\s", text)
        assert re.search(r"Democratic Rep[^│%]*?\s+50%\s+4\s", text)
        assert re.search(r"win \(base\)\s+edges\s+entity\s+zero-sense\s+edges", text)
        assert "16.0 queries/s" in text


def test_estimates_line_and_empty_entity_list_at_80_columns(countries):
    from kgprobe.metrics import KnowledgeMetrics as KM

    console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    view = LiveView(countries, mode="live", console=console)
    feed(view, countries)
    s = summary(4, 0.55, 0.35, 0.5, 128)
    view(RoundFinished(RoundSummary(**{**s.__dict__, "weakest_entities": [("Q142", KM(1.0, 0.0, 1.0, 3))]})))
    console.print(view.render())
    lines = [line.strip("│ ") for line in console.export_text().splitlines()]
    # The note under the metrics spans the panel, not the metrics table's 36 columns.
    assert any(re.fullmatch(r"rates over 120 probed edges · KG no-knowledge baseline \d+\.\d%", line)
               for line in lines)
    assert "KG accuracy: n/a (95% CI; * model-based)" in lines
    # No subject with an edge always answered wrong: one line instead of an empty table,
    # and the predicates beside it keep every column.
    assert any(re.fullmatch(r"weakest predicates\s+weakest entities: none yet", line) for line in lines)
    assert not any("zero-sense" in line and "entity" in line for line in lines)
    assert any(re.fullmatch(r"capital\s+40% \(1%\)\s+10", line) for line in lines)


def test_header_drops_the_weights_hash_only_when_narrow(countries):
    name = "smollm2-135m-instruct@b179c9523d0e6a0f"
    rest = " · countries (3,210 edges) · zp-lke · thompson · batch 32 · seed 0"
    for width, shown in ((120, name), (100, "smollm2-135m-instruct")):
        console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
        view = LiveView(countries, mode="live", console=console)
        feed(view, countries, model=name)
        console.print(view.render())
        assert console.export_text().splitlines()[1].strip("│ ") == shown + rest


def test_weakest_lists_leave_out_what_is_not_weak(countries):
    from kgprobe.metrics import KnowledgeMetrics as KM

    view = LiveView(countries, mode="plain", console=Console(file=io.StringIO()))
    s = summary(1, 0.5, 0.4, 0.5, 32)
    s = RoundSummary(**{**s.__dict__,
                        "by_predicate": {"P36": KM(1.0, 0.0, 1.0, 4), "P47": KM(0.75, 0.25, 0.75, 4)},
                        "weakest_entities": [("Q142", KM(0.5, 0.5, 0.5, 2)), ("Q974", KM(1.0, 0.0, 1.0, 4))]})
    view(RoundFinished(s))
    assert [label for label, _ in view.weakest_predicates()] == ["shares border with"]  # capital: 4 of 4 won
    assert [eid for eid, _ in view.weakest_entities()] == ["Q142"]  # Q974 was never wrong


def test_convergence_text_uses_the_monitors_spread(countries):
    view = LiveView(countries, mode="plain", console=Console(file=io.StringIO()))
    feed(view, countries)  # window 2; win 0.50, 0.52, 0.55 -> spread 0.05 (zero-sense 0.05, all-sense 0.05)
    assert view.convergence_text() == "not yet: rates moved 0.050 over 2 rounds (needs <= 0.01)"


class _Estimate:
    def __init__(self, estimate, low, high, n):
        self.estimate, self.low, self.high, self.n = estimate, low, high, n


def test_kg_estimate_and_label_shown(countries):
    out = io.StringIO()
    calls = []

    def estimate():
        calls.append(1)
        return _Estimate(0.61, 0.481, 0.725, 41)

    view = LiveView(countries, mode="plain", console=Console(file=out, width=300),
                    label="SmolLM2-135M-Instruct (GGUF Q4_1, dequantized)", estimate_fn=estimate)
    feed(view, countries)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("kgprobe: probing SmolLM2-135M-Instruct (GGUF Q4_1, dequantized) on countries")
    assert "| KG accuracy 61.0% [48.1%, 72.5%] (n=41) |" in lines[3]
    assert len(calls) == 3  # once per round
    console = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    live = LiveView(countries, mode="live", console=console, estimate_fn=estimate)
    feed(live, countries)
    console.print(live.render())
    assert "KG accuracy (unbiased, 95% CI): 61.0% [48.1%, 72.5%] (n=41)" in console.export_text()


def test_plain_mode_prints_while_a_round_runs(countries):
    import time

    from kgprobe.engine import RoundStarted

    out = io.StringIO()
    view = LiveView(countries, mode="plain", console=Console(file=out, width=200), heartbeat=0.05)
    with view:
        feed(view, countries)
        view(RoundStarted(4, 96, 256))
        deadline = time.monotonic() + 10
        while "round 4 running" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "round 4 running 0:00 | queries 96/256 done before this round" in out.getvalue()


def test_notebook_progress_bar_counts_queries_and_shows_the_estimate(countries):
    from kgprobe.live import NotebookProgress

    out = io.StringIO()
    bar = NotebookProgress(lambda: _Estimate(0.5, 0.3, 0.7, 12), file=out)
    with bar:
        feed(bar, countries)  # 3 rounds of 32 queries, budget 256
        assert (bar.bar.n, bar.bar.total) == (96, 256)
        assert bar.bar.postfix == "round=3, win=55.0%, KG acc=50.0% [30.0%, 70.0%]"
    assert "96/256" in out.getvalue()
