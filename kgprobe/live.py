"""The terminal view of a running probe, fed by engine events.

Three modes, chosen by :func:`choose_mode` unless forced:

``live``
    a rich panel redrawn in place: round, queries spent / budget with a bar,
    queries per second, elapsed time and ETA, the unbiased KG accuracy estimate with its
    interval, win / zero-sense / all-sense rates with
    a trend (change over the convergence window) and a sparkline, the convergence
    state, and the currently weakest predicates and subject entities. Laid out for 80
    columns; wider terminals put the two "weakest" tables side by side.
``plain``
    one line per round, for CI logs and pipes (no cursor movement, no colour), and a
    "still running" line at least every 10 s inside a long round.
``quiet``
    nothing while running; the command prints its final line.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections import deque
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kgprobe.engine import Converged, RoundFinished, RoundStarted, RoundSummary, RunFinished, RunStarted
from kgprobe.kg.graph import KnowledgeGraph

_SPARK = "▁▂▃▄▅▆▇█"
_METRICS = (("win rate", "win_rate"), ("zero-sense", "zero_sense_rate"), ("all-sense", "all_sense_rate"))


def choose_mode(quiet: bool = False, plain: bool = False, stream=None) -> str:
    """``quiet`` if asked, ``plain`` if asked or the output is not a terminal, else ``live``."""
    if quiet:
        return "quiet"
    stream = stream or sys.stderr
    if plain or not (hasattr(stream, "isatty") and stream.isatty()):
        return "plain"
    return "live"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def sparkline(values: list[float]) -> str:
    """Unicode block sparkline scaled to the values' own range."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return ""
    # At least a 10-point span, so that noise of a point or two does not fill the height.
    lo, hi = min(vals), max(vals)
    if hi - lo < 0.1:
        mid = (hi + lo) / 2
        lo, hi = mid - 0.05, mid + 0.05
    span = hi - lo
    return "".join(_SPARK[0 if span == 0 else min(7, int((v - lo) / span * 7.999))] for v in vals)


class LiveView:
    """An engine listener that draws progress. Use as a context manager around the run."""

    def __init__(self, kg: KnowledgeGraph, *, mode: str = "live", console: Console | None = None,
                 window: int = 5, tolerance: float = 0.01, spark_length: int = 24,
                 label: str | None = None, estimate_fn=None, heartbeat: float = 10.0):
        self.kg = kg
        #: The model's display label (the run's ``model_name``), shown instead of its identity.
        self.label = label
        #: Called after every round for the unbiased KG accuracy estimate (``Run.accuracy_estimate``).
        self.estimate_fn = estimate_fn
        self.estimate = None
        #: Plain mode prints a line at least this often (seconds) while a round runs.
        self.heartbeat = heartbeat
        self._last_line_at = time.perf_counter()
        self._stop_heartbeat = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self.mode = mode
        self.console = console or Console(stderr=True, highlight=False)
        self.window, self.tolerance = window, tolerance
        self.history: deque[RoundSummary] = deque(maxlen=max(spark_length, window + 1))
        self.started: RunStarted | None = None
        self.t_start = time.perf_counter()
        self.current_round: int | None = None
        self.round_started_at: float | None = None
        self.finished: RunFinished | None = None
        self.converged_at: int | None = None
        self.queries_this_process = 0
        self.seconds_this_process = 0.0
        self._live: Live | None = None
        self._baselines: dict | None = None

    # -- context --------------------------------------------------------------------------
    def __enter__(self):
        if self.mode == "live":
            self._live = Live(console=self.console, get_renderable=self.render, refresh_per_second=2,
                              transient=False, redirect_stdout=True, redirect_stderr=True)
            self._live.__enter__()
        elif self.mode == "plain" and self.heartbeat and self.heartbeat > 0:
            self._heartbeat_thread = threading.Thread(target=self._beat, name="kgprobe-heartbeat", daemon=True)
            self._heartbeat_thread.start()
        return self

    def _beat(self) -> None:
        """Plain mode: a line at least every ``heartbeat`` seconds while a round runs."""
        while not self._stop_heartbeat.wait(min(1.0, self.heartbeat)):
            if self.current_round is None or self.round_started_at is None:
                continue
            if time.perf_counter() - self._last_line_at >= self.heartbeat:
                self._line(self.running_line())

    def running_line(self) -> str:
        """What plain mode prints while a round is still running."""
        st, s = self.started, self.last
        spent = s.queries_spent if s else (st.queries_spent if st else 0)
        budget = st.config.budget if st else None
        return (f"round {self.current_round} running {fmt_duration(time.perf_counter() - self.round_started_at)} | "
                f"queries {spent}{f'/{budget}' if budget else ''} done before this round")

    def __exit__(self, *exc):
        self._stop_heartbeat.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(timeout=2)
            self._heartbeat_thread = None
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(*exc)
            self._live = None

    # -- events ---------------------------------------------------------------------------
    def __call__(self, event) -> None:
        if isinstance(event, RunStarted):
            self.started = event
            self.window = event.config.convergence_window
            self.tolerance = event.config.convergence_tolerance
            self.t_start = time.perf_counter()
            if self.mode == "plain":
                what = "resuming" if event.resumed else "probing"
                self._line(
                    f"kgprobe: {what} {self.label or event.model} on {event.kg_name} ({event.num_active} active edges), "
                    f"method {event.config.method}, sampler {event.config.sampler}, batch {event.config.batch_size}, "
                    f"budget {event.config.budget or '-'} queries, seed {event.config.seed}"
                    + (f", from round {event.start_round}" if event.resumed else "")
                )
        elif isinstance(event, RoundStarted):
            self.current_round = event.round
            self.round_started_at = time.perf_counter()
        elif isinstance(event, RoundFinished):
            s = event.summary
            self.history.append(s)
            self.current_round = None
            self.queries_this_process += s.queries
            self.seconds_this_process += s.elapsed
            if self.estimate_fn is not None:
                try:
                    est = self.estimate_fn()
                    self.estimate = est if getattr(est, "n", 0) else None
                except Exception:  # the view never stops a run
                    self.estimate = None
            if self.mode == "plain":
                self._line(self.plain_line(s))
        elif isinstance(event, Converged):
            self.converged_at = event.round
        elif isinstance(event, RunFinished):
            self.finished = event
            if self.mode == "plain":
                self._line(f"kgprobe: stopped after round {event.rounds} ({event.reason}), "
                           f"{event.queries_spent} queries spent")
        if self._live is not None:
            self._live.refresh()

    def _line(self, text: str) -> None:
        self._last_line_at = time.perf_counter()
        self.console.print(text, soft_wrap=True, markup=False, highlight=False)

    def estimate_text(self) -> str:
        """The unbiased KG accuracy estimate, e.g. ``61.0% [48.1%, 72.5%] (n=41)``."""
        e = self.estimate
        if e is None:
            return "n/a (no design probes yet)"
        return f"{e.estimate:.1%} [{e.low:.1%}, {e.high:.1%}] (n={e.n})"

    # -- derived numbers --------------------------------------------------------------
    @property
    def last(self) -> RoundSummary | None:
        return self.history[-1] if self.history else None

    def queries_per_second(self) -> float:
        recent = list(self.history)[-3:]
        secs = sum(s.elapsed for s in recent)
        return sum(s.queries for s in recent) / secs if secs > 0 else float("nan")

    def responses_per_second(self) -> float:
        recent = list(self.history)[-3:]
        secs = sum(s.elapsed for s in recent)
        return sum(s.num_requests for s in recent) / secs if secs > 0 else float("nan")

    def eta(self) -> float | None:
        s = self.last
        if s is None or self.finished is not None:
            return None if s is None else 0.0
        remaining = []
        if s.budget is not None:
            qps = self.queries_per_second()
            if qps > 0:
                remaining.append((s.budget - s.queries_spent) / qps)
        if s.max_rounds is not None:
            recent = list(self.history)[-3:]
            per_round = sum(x.elapsed for x in recent) / len(recent)
            remaining.append((s.max_rounds - s.round) * per_round)
        return min(remaining) if remaining else None

    def trend(self, key: str) -> float | None:
        """Change of a metric over the convergence window (or as many rounds as seen)."""
        hist = list(self.history)
        if len(hist) < 2:
            return None
        back = hist[-1 - min(self.window, len(hist) - 1)]
        return getattr(hist[-1].metrics, key) - getattr(back.metrics, key)

    def convergence_text(self) -> str:
        s = self.last
        if s is None:
            return "waiting for the first round"
        if s.converged:
            return f"converged (every rate within {self.tolerance:g} over {self.window} rounds)"
        spread = self.window_spread()
        if spread is None:
            return f"not yet ({len(self.history)}/{self.window + 1} rounds seen)"
        return f"not yet: rates moved {spread:.3f} over {self.window} rounds (needs <= {self.tolerance:g})"

    def window_spread(self) -> float | None:
        """Largest max − min of a rate over the last window + 1 rounds (the monitor's test)."""
        hist = list(self.history)[-(self.window + 1):]
        if len(hist) <= self.window:
            return None
        return max(
            max(getattr(h.metrics, k) for h in hist) - min(getattr(h.metrics, k) for h in hist) for _, k in _METRICS
        )

    def weakest_predicates(self, k: int = 5, min_edges: int = 3) -> list[tuple[str, Any]]:
        """Lowest accuracy first, as in the report (:func:`kgprobe.ranking.weakest_first`)."""
        from kgprobe.ranking import weakest_first

        s = self.last
        if s is None:
            return []
        # A predicate whose every probed edge is won is not weak, however it ranks.
        items = [(self._predicate_label(pid), m) for pid, m in s.by_predicate.items()
                 if m.probed_edges >= min_edges and m.win_rate < 1.0]
        return weakest_first(items)[:k]

    def weakest_entities(self) -> list[tuple[str, Any]]:
        """The engine's weakest subjects, without those that were never wrong (0 % zero-sense)."""
        return [(eid, m) for eid, m in (self.last.weakest_entities if self.last else []) if m.zero_sense_rate > 0]

    def baselines(self) -> dict:
        """The run's no-knowledge baselines (:mod:`kgprobe.baselines`), computed once: ``{}``
        before the run starts or when its probe cannot be built."""
        if self._baselines is None and self.started is not None:
            import warnings

            from kgprobe.baselines import baselines
            from kgprobe.errors import InputError

            cfg = self.started.config
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._baselines = baselines(self.kg, cfg.method, cfg.probe_options, seed=cfg.seed)
            except InputError:
                self._baselines = {}
        return self._baselines or {}

    def baseline_of(self, label: str | None = None) -> float | None:
        """The highest no-knowledge baseline of the predicate labelled ``label`` (None: the KG's)."""
        found = self.baselines()
        rows = {r.get("label"): r for r in (found.get("by_predicate") or {}).values()}
        row = found.get("kg") if label is None else rows.get(label)
        values = [row.get(k) for k in ("chance", "majority", "null") if row.get(k) is not None] if row else []
        return max(values) if values else None

    def _predicate_label(self, pid: str) -> str:
        p = self.kg.predicates.get(pid)
        return p.label if p else pid

    def _entity_label(self, eid: str) -> str:
        e = self.kg.entities.get(eid)
        return e.label if e else eid

    # -- plain ------------------------------------------------------------------------
    def plain_line(self, s: RoundSummary) -> str:
        rounds = f"{s.round}/{s.max_rounds}" if s.max_rounds else str(s.round)
        budget = f"/{s.budget}" if s.budget else ""
        m = s.metrics
        conv = "converged" if s.converged else "converging"
        replay = " (replayed from store)" if s.replayed else ""
        qps = s.queries / s.elapsed if s.elapsed > 0 else float("nan")
        return (
            f"round {rounds} | queries {s.queries_spent}{budget} | {qps:.1f} queries/s | "
            f"KG accuracy {self.estimate_text()} | "
            f"win {m.win_rate:.1%} zero-sense {m.zero_sense_rate:.1%} all-sense {m.all_sense_rate:.1%} "
            f"({m.probed_edges} edges) | {conv} | ETA {fmt_duration(self.eta())}{replay}"
        )

    @staticmethod
    def estimates_line(s: RoundSummary | None, limit: int = 3) -> str:
        """KG accuracy (and the ``limit`` lowest predicates) with 95 % intervals, one line."""
        from kgprobe.estimators import compact_line

        if s is None or not getattr(s, "estimates", None):
            return "KG accuracy: n/a"
        return compact_line(s.estimates, limit=limit)

    # -- rich -------------------------------------------------------------------------
    def render(self):
        width = self.console.width
        st = self.started
        head = Text()
        if st is not None:
            rest = (f" · {st.kg_name} ({st.num_active:,} edges) · {st.config.method} · "
                    f"{st.config.sampler} · batch {st.config.batch_size} · seed {st.config.seed}")
            model = self.label or st.model
            if len(model) + len(rest) > width - 4:
                # The weights hash after "@" identifies the model in run files and reports;
                # on a narrow terminal the header keeps the name on one line instead.
                model = model.split("@")[0]
            head.append(model + rest)
        status = self._status_line()
        progress = self._progress()
        metrics = self._metrics_table()
        weak = self._weak_tables(width)
        body = Group(head, progress, status, metrics, self._metrics_note(), weak)
        title = f"finished ({self.finished.reason})" if self.finished else "probing"
        return Panel(body, title=f"[bold]kgprobe: {title}[/]", title_align="left", border_style="blue", padding=(0, 1))

    def _progress(self):
        s = self.last
        st = self.started
        budget = st.config.budget if st else None
        spent = s.queries_spent if s else (st.queries_spent if st else 0)
        limit = st.config.max_rounds if st else None
        rnd = s.round if s else 0
        grid = Table.grid(padding=(0, 1), expand=True)
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1)
        grid.add_column(no_wrap=True, justify="right")
        if budget:
            bar = ProgressBar(total=budget, completed=spent)
            right = f"{spent:,}/{budget:,} queries"
        elif limit:
            bar = ProgressBar(total=limit, completed=rnd)
            right = f"{spent:,} queries"
        else:
            bar = ProgressBar(total=None)
            right = f"{spent:,} queries"
        rounds_txt = f"round {rnd}" + (f"/{limit}" if limit else "")
        grid.add_row(rounds_txt, bar, right)
        return grid

    def _status_line(self) -> Text:
        t = Text()
        if self.current_round is not None and self.round_started_at is not None:
            t.append(f"round {self.current_round} running "
                     f"{fmt_duration(time.perf_counter() - self.round_started_at)}", style="yellow")
            t.append(" · ")
        qps = self.queries_per_second()
        t.append(f"{qps:,.1f} queries/s" if math.isfinite(qps) else "-- queries/s")
        t.append(f" · elapsed {fmt_duration(time.perf_counter() - self.t_start)}")
        t.append(f" · ETA {fmt_duration(self.eta())}")
        if self.finished:
            t.append(f" · stopped: {self.finished.reason}", style="bold")
        t.append("\n")
        t.append("KG accuracy (unbiased, 95% CI): ", style="bold")
        t.append(self.estimate_text())
        t.append("\n")
        conv = self.convergence_text()
        t.append("convergence: ", style="bold")
        t.append(conv, style="green" if conv.startswith("converged") else "")
        return t

    def _metrics_table(self) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
        table.add_column("metric", no_wrap=True)
        table.add_column("now", justify="right", no_wrap=True)
        table.add_column("trend", justify="right", no_wrap=True)
        table.add_column("history", no_wrap=True, overflow="crop")
        s = self.last
        for label, key in _METRICS:
            if s is None:
                table.add_row(label, "--", "", "")
                continue
            value = getattr(s.metrics, key)
            d = self.trend(key)
            if d is None:
                trend = Text("")
            else:
                arrow = "▲" if d > 0.0005 else "▼" if d < -0.0005 else "="
                trend = Text(f"{arrow} {d * 100:+.1f} pt")
            spark = sparkline([getattr(x.metrics, key) for x in self.history])
            table.add_row(label, f"{value:.1%}", trend, spark)
        return table

    def _metrics_note(self) -> Text:
        """What the rates are over and the estimates line, at the panel's full width (a table
        caption would be wrapped to the narrow metrics table)."""
        s = self.last
        if s is None:
            return Text("")
        base = self.baseline_of()
        base_text = "" if base is None else f" · KG no-knowledge baseline {base:.1%}"
        return Text(f"rates over {s.metrics.probed_edges:,} probed edges{base_text}\n"
                    f"{self.estimates_line(s)} (95% CI; * model-based)")

    def _weak_tables(self, width: int):
        # Side by side at any width: stacked tables would not fit a 24-line terminal.
        # Panel border and padding take 4 columns, the gap between the tables 2; each table
        # spends 19 on its number columns and their padding.
        name_width = max(10, min(40, (width - 4 - 2) // 2 - 19))
        preds = Table(title="weakest predicates", title_justify="left", box=None, padding=(0, 1), pad_edge=False)
        preds.add_column("predicate", overflow="ellipsis", no_wrap=True, max_width=name_width)
        # "win (base)": the win rate and, in brackets, the predicate's highest no-knowledge baseline.
        preds.add_column("win (base)", justify="right", no_wrap=True, min_width=10)
        preds.add_column("edges", justify="right", no_wrap=True, min_width=5)
        for label, m in self.weakest_predicates():
            base = self.baseline_of(label)
            preds.add_row(label, f"{m.win_rate:.0%}" + ("" if base is None else f" ({base:.0%})"),
                          str(m.probed_edges))
        weak_entities = self.weakest_entities()
        if weak_entities:
            ents = Table(title="weakest entities", title_justify="left", box=None, padding=(0, 1), pad_edge=False)
            ents.add_column("entity", overflow="ellipsis", no_wrap=True, max_width=name_width)
            ents.add_column("zero-sense", justify="right", no_wrap=True)
            ents.add_column("edges", justify="right", no_wrap=True, min_width=5)
            for eid, m in weak_entities:
                ents.add_row(self._entity_label(eid), f"{m.zero_sense_rate:.0%}", str(m.probed_edges))
        else:
            # An empty table would show only its title and header. "None yet": no subject has an
            # edge answered wrong every time.
            ents = Text("weakest entities: none yet", no_wrap=True)
        grid = Table.grid(padding=(0, 2))
        grid.add_column()
        grid.add_column()
        grid.add_row(preds, ents)
        return grid


class NotebookProgress:
    """A progress bar for Jupyter (``tqdm.auto``): queries spent of the budget, KG estimate."""

    def __init__(self, estimate_fn=None, file=None):
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self.bar = None
        self.estimate_fn = estimate_fn
        self.file = file

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()

    def __call__(self, event) -> None:
        if isinstance(event, RunStarted):
            self.bar = self._tqdm(total=event.config.budget, initial=event.queries_spent, unit="query",
                                  desc=f"kgprobe {event.config.method} on {event.kg_name}", file=self.file)
        elif isinstance(event, RoundFinished) and self.bar is not None:
            s = event.summary
            self.bar.update(s.queries)
            post = {"round": s.round, "win": f"{s.metrics.win_rate:.1%}"}
            if self.estimate_fn is not None:
                est = self.estimate_fn()
                if getattr(est, "n", 0):
                    post["KG acc"] = f"{est.estimate:.1%} [{est.low:.1%}, {est.high:.1%}]"
            self.bar.set_postfix(post)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where a rich live panel would not redraw in place)."""
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


@contextlib.contextmanager
def progress_view(run, *, quiet: bool = False, plain: bool = False):
    """The listener that shows a run's progress where it runs: a rich panel in a terminal,
    a tqdm bar in Jupyter, plain lines otherwise (logs, pipes, CI); a no-op when quiet."""
    if not quiet and not plain and in_notebook():
        try:
            view = NotebookProgress(run.accuracy_estimate)
        except ImportError:
            view = None
        if view is not None:
            with view:
                yield view
            return
    view = LiveView(run.kg, mode=choose_mode(quiet=quiet, plain=plain), label=run.model_name,
                    estimate_fn=run.accuracy_estimate)
    with view:
        yield view
