"""Zero-prompt many-shot latent knowledge estimation (ZP-LKE), METHODS §3.

For a test fact (x, r, y) the model sees ``x1\ty1\nx2\ty2\n…\nxn\tyn\nx\t`` — n other
facts of the same predicate, one per line, subject and object joined by a tab, and no
relation words — and is scored on what follows.

* Multiple choice (``ZeroPromptProbe``): the gold object and up to k distractors from
  C − T (other objects of the predicate that are not true objects of (x, r)); each
  option is scored by the sum of its tokens' log-probabilities after the context; the
  prediction is the argmax and a tie for the maximum is wrong. All options of a fact
  share one context string, so a shared-prefix backend runs it once.
* Generation (``ZeroPromptGenerationProbe``): greedy ``max_tokens`` tokens after the
  context, cut at the pair separator (the model's answer for x is what comes before it
  starts the next pair), correct when a gold object or alias occurs (normalized).

Decisions where the paper leaves a choice:

* Each probe of an edge draws fresh examples and distractors from the ``rng`` it is
  given (DESIGN: repeated probes must measure something).
* Which facts serve as examples (option ``examples``). ``"paper"``: drawn uniformly
  from the predicate's other facts, as in the paper; their objects then follow the
  predicate's object frequencies, so on a skewed predicate (one country the object of
  44 % of "country" facts) the context itself points at the likely answer and a model
  with no knowledge of the facts scores far above chance. ``"balanced"`` (the
  project's default for new runs): the options are drawn first and every option
  appears equally often among the examples' objects — ``m`` times each, where ``m`` is
  ``num_examples // options`` capped by the rarest option's usable facts (so 0 when an
  option has none; then no option appears at all). When every option has a fact to
  spare, the examples left over go one each to options drawn uniformly at random
  (every option then has the same expected count, and the counts differ by at most
  one); the remaining examples are facts whose objects are not options. The generation probe has no options; there
  ``"balanced"`` means every example has a different object. A probe class built
  without the option renders as the paper does, which is how runs and sweeps recorded
  before the option existed were rendered. ``fixed_examples=True``
  gives the paper's protocol instead: one draw per predicate from ``example_seed``,
  shared by every fact of the predicate, so the prefix is shared across facts too.
* Examples never include the probed fact, nor any other fact with the same subject and
  predicate (they would show a true object of (x, r), which is excluded from the
  options, and leak the answer's form), nor facts whose ends have no usable name.
* With fewer than n usable facts the context has fewer examples (a ``ProbeWarning``
  once per predicate; ``detail["num_examples"]`` records it); with fewer than k
  distractors there are fewer options (warning; ``chance_level`` is 1 / options).
* Separators (project decision): facts are joined by a newline and subject and object
  by a tab, so the context is ``"x1\ty1\n…\nx\t"`` and each option is scored right
  after the tab. Labels never contain either character (``Entity`` collapses runs of
  whitespace in labels and aliases), so no label can fake a fact boundary, and labels
  with commas, colons or quotes ("Washington, D.C.") stay unambiguous — which the
  paper's ", "-joined text is not. Tokenizers split before a tab, so the option's
  tokens are the same as in running text.
* With a space-like subject/object separator (e.g. " : "), the trailing spaces go into
  the continuation (context "… :", continuation " Paris"), which is how such text
  tokenizes naturally; the backend tokenizes context + continuation together.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult
from kgprobe.probes.base import Probe, ProbeTask, Verdict
from kgprobe.probes.common import (
    WarnOnce,
    display_name,
    gold_names,
    multiple_choice_chance,
    multiple_choice_options,
    name_of,
    verify_multiple_choice,
)
from kgprobe.probes.verify import first_segment, match_answer


#: Values of the ``examples`` option: how the in-context examples are chosen.
EXAMPLE_MODES = ("balanced", "paper")


def _split_separator(sep: str) -> tuple[str, str]:
    """("…" kept at the end of the context, spaces that start the continuation).

    Only trailing spaces move to the continuation; a tab stays in the context.
    """
    stripped = sep.rstrip(" ")
    return stripped, sep[len(stripped) :]


class _ZeroPromptContext:
    """Builds the many-shot context; shared by the multiple-choice and generation probes."""

    def __init__(
        self,
        num_examples: int = 50,
        subject_object_sep: str = "\t",
        pair_sep: str = "\n",
        fixed_examples: bool = False,
        example_seed: int = 0,
        examples: str = "paper",
    ):
        if examples not in EXAMPLE_MODES:
            raise InputError(f"examples={examples!r}: choose one of {', '.join(EXAMPLE_MODES)}")
        if examples == "balanced" and fixed_examples:
            raise InputError("fixed_examples=true shares one draw of examples across a predicate's facts, which "
                             "cannot balance each fact's options; add --probe-option examples=paper")
        if num_examples < 0:
            raise InputError(f"num_examples must be >= 0, got {num_examples}")
        if not pair_sep:
            raise InputError("pair_sep must not be empty: the examples would run together")
        self.num_examples = num_examples
        self.subject_object_sep = subject_object_sep
        self.pair_sep = pair_sep
        self.fixed_examples = fixed_examples
        self.example_seed = example_seed
        self.mode = examples
        self.warn = WarnOnce()
        self._fixed_orders: dict[str, np.ndarray] = {}
        self._named_edges: dict[tuple[int, str], tuple[KnowledgeGraph, np.ndarray]] = {}

    def _pool(self, kg: KnowledgeGraph, edge: int) -> np.ndarray:
        """Edges of the same predicate usable as examples for ``edge``."""
        t = kg.triple(edge)
        key = (id(kg), t.predicate)
        named = self._named_edges.get(key)
        if named is None or named[0] is not kg:
            edges = kg.edges_of_predicate(t.predicate)
            usable = [
                int(j) for j in edges
                if display_name(kg.entity(kg.triple(int(j)).subject)) and display_name(kg.entity(kg.triple(int(j)).object))
            ]
            # Once per predicate: every probed edge of the predicate filters this array.
            named = self._named_edges[key] = (kg, np.asarray(usable, dtype=np.int64))
        edges = named[1]
        keep = kg.subjects[edges] != kg.subjects[edge]  # excludes the probed fact and its (s, p) siblings
        return edges[keep]

    def _warn_short(self, predicate: str, available: int, n: int) -> None:
        if n < self.num_examples:
            self.warn(
                "examples",
                predicate,
                f"predicate {predicate}: only {available} other facts can serve as examples, "
                f"so zero-prompt contexts have {n} examples instead of {self.num_examples}",
            )

    def balanced_examples(self, kg: KnowledgeGraph, edge: int, option_ids: Sequence[str] | None,
                          rng: np.random.Generator) -> list[int]:
        """Examples in which every option's object occurs equally often (see the module doc).

        ``option_ids``: the entity ids of the options (gold included); None for the
        generation probe, whose examples then all have different objects.
        """
        pool = self._pool(kg, edge)
        predicate = kg.triple(edge).predicate
        if pool.size == 0 or self.num_examples == 0:
            self._warn_short(predicate, int(pool.size), 0)
            return []
        objects = kg.objects[pool]
        order = rng.permutation(pool.size)
        if option_ids is None:
            _, first = np.unique(objects[order], return_index=True)
            picked = order[np.sort(first)][: self.num_examples]
            self._warn_short(predicate, int(first.size), int(picked.size))
            return [int(pool[i]) for i in picked]
        option_index = np.asarray([kg.entity_index(o) for o in option_ids], dtype=objects.dtype)
        shuffled_objects = objects[order]
        per_option = [order[shuffled_objects == o] for o in option_index]
        k = len(option_index)
        rarest = min(len(p) for p in per_option)
        m = min(self.num_examples // k, rarest)
        counts = np.full(k, m)
        if m < rarest:
            # The examples left over after m per option go to options drawn uniformly, one
            # each, so every option has the same expected count (and a count-based guess
            # is right 1 / options of the time); only when every option has one more fact.
            extra = min(self.num_examples - m * k, k)
            counts[rng.choice(k, size=extra, replace=False)] += 1
        chosen = [p[:c] for p, c in zip(per_option, counts)]
        rest = order[~np.isin(shuffled_objects, option_index)][: self.num_examples - int(counts.sum())]
        picked = np.concatenate(chosen + [rest])
        picked = picked[rng.permutation(picked.size)]
        if picked.size < self.num_examples:
            self.warn(
                "examples",
                predicate,
                f"predicate {predicate}: balanced contexts have {picked.size} examples instead of "
                f"{self.num_examples} for some facts (each of the {k} options shown {m} or {m + 1} times, plus "
                "the facts whose objects are not options)",
            )
        return [int(pool[i]) for i in picked]

    def examples(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> list[int]:
        pool = self._pool(kg, edge)
        predicate = kg.triple(edge).predicate
        n = min(self.num_examples, len(pool))
        self._warn_short(predicate, len(pool), n)
        if self.fixed_examples:
            order = self._fixed_orders.get(predicate)
            if order is None:
                all_edges = kg.edges_of_predicate(predicate)
                order = all_edges[np.random.default_rng(self.example_seed).permutation(len(all_edges))]
                self._fixed_orders[predicate] = order
            allowed = set(pool.tolist())
            return [int(j) for j in order if int(j) in allowed][:n]
        if n == 0:
            return []
        return [int(j) for j in rng.choice(pool, size=n, replace=False)]

    def context(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator,
                chosen: list[int] | None = None) -> tuple[str, str, int]:
        """(context, continuation prefix, number of examples) for ``edge``; ``chosen``: the
        example edges when already drawn, else drawn here (the paper's way)."""
        t = kg.triple(edge)
        subject = name_of(kg, t.subject, edge=edge, role="subject")
        head, tail = _split_separator(self.subject_object_sep)
        pairs = []
        if chosen is None:
            chosen = self.examples(kg, edge, rng)
        for j in chosen:
            tj = kg.triple(j)
            pairs.append(
                f"{display_name(kg.entity(tj.subject))}{self.subject_object_sep}{display_name(kg.entity(tj.object))}"
            )
        pairs.append(subject + head)
        return self.pair_sep.join(pairs), tail, len(chosen)


class ZeroPromptProbe(Probe):
    """ZP-LKE multiple choice: gold + up to ``num_distractors`` options, argmax of log-probs."""

    name: ClassVar[str] = "zp-lke"
    needs_scoring: ClassVar[bool] = True

    def __init__(
        self,
        num_examples: int = 50,
        num_distractors: int = 99,
        *,
        subject_object_sep: str = "\t",
        pair_sep: str = "\n",
        fixed_examples: bool = False,
        example_seed: int = 0,
        examples: str = "paper",
    ):
        if num_distractors < 0:
            raise InputError(f"num_distractors must be >= 0, got {num_distractors}")
        self.num_distractors = num_distractors
        self.builder = _ZeroPromptContext(num_examples, subject_object_sep, pair_sep, fixed_examples, example_seed,
                                          examples)

    def options(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> tuple[list[str], int]:
        """Shuffled option names and the gold option's index."""
        names, ids, gold_index = multiple_choice_options(kg, edge, self.num_distractors, rng, self.builder.warn,
                                                         with_ids=True)
        return names, gold_index

    def rendering(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> tuple[list[int], list[str], list[str], int]:
        """(example edges, option names, option entity ids, gold index) of one probe of ``edge``.

        The paper's rendering draws the examples first, then the options; the balanced one
        draws the options first, since they decide which examples it may use.
        """
        warn = self.builder.warn
        if self.builder.mode == "balanced":
            names, ids, gold_index = multiple_choice_options(kg, edge, self.num_distractors, rng, warn, with_ids=True)
            chosen = self.builder.balanced_examples(kg, edge, ids, rng)
        else:
            chosen = self.builder.examples(kg, edge, rng)
            names, ids, gold_index = multiple_choice_options(kg, edge, self.num_distractors, rng, warn, with_ids=True)
        return chosen, names, ids, gold_index

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        chosen, options, _ids, gold_index = self.rendering(kg, edge, rng)
        context, tail, n = self.builder.context(kg, edge, rng, chosen)
        requests = [ScoreRequest(context, tail + option, edge=edge) for option in options]
        return ProbeTask(
            edge=edge,
            score_requests=requests,
            question=f"{context}{tail}[{len(options)} options]",
            payload={"options": options, "gold_index": gold_index, "num_examples": n},
        )

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        verdict = verify_multiple_choice(task.payload["options"], task.payload["gold_index"], scores)
        verdict.detail["num_examples"] = task.payload["num_examples"]
        return verdict

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        return multiple_choice_chance(kg, edge, self.num_distractors)


class ZeroPromptGenerationProbe(Probe):
    """ZP-LKE generation: greedy tokens after the many-shot context, gold or alias must occur."""

    name: ClassVar[str] = "zp-lke-gen"
    needs_scoring: ClassVar[bool] = False

    def __init__(
        self,
        num_examples: int = 50,
        *,
        max_tokens: int = 10,
        subject_object_sep: str = "\t",
        pair_sep: str = "\n",
        fixed_examples: bool = False,
        example_seed: int = 0,
        examples: str = "paper",
    ):
        if max_tokens < 1:
            raise InputError(f"max_tokens must be >= 1, got {max_tokens}")
        self.max_tokens = max_tokens
        self.builder = _ZeroPromptContext(num_examples, subject_object_sep, pair_sep, fixed_examples, example_seed,
                                          examples)

    def example_edges(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> list[int]:
        """The example facts of one probe of ``edge``."""
        if self.builder.mode == "balanced":
            return self.builder.balanced_examples(kg, edge, None, rng)
        return self.builder.examples(kg, edge, rng)

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        context, _tail, n = self.builder.context(kg, edge, rng, self.example_edges(kg, edge, rng))
        t = kg.triple(edge)
        request = GenerateRequest(
            prompt=context, max_tokens=self.max_tokens, stop=tuple(dict.fromkeys((self.builder.pair_sep, "\n"))), edge=edge
        )
        return ProbeTask(
            edge=edge,
            generate_requests=[request],
            question=context,
            payload={"gold": gold_names(kg, t.subject, t.predicate), "num_examples": n},
        )

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        answer = first_segment(generations[0], self.builder.pair_sep).strip()
        result = match_answer(answer, task.payload["gold"])
        return Verdict(
            result.correct,
            answer,
            {"reason": result.reason, "matched": result.matched, "num_examples": task.payload["num_examples"]},
        )

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        return 0.0
