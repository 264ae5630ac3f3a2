"""KGLens questions (METHODS §2): yes/no and wh-questions, EASY and HARD modes.

* Yes/no: the question names the true object ("yes") or an object from C − T ("no"),
  alternating over the probes of an edge from a start fixed by the edge's triple (so
  half the edges start with each). Verified by the first word (:func:`parse_yes_no`:
  case, punctuation, "Yes," / "no." / "A: Yes", a reversal later in the answer makes
  it wrong). ``YesNoLogprobProbe`` instead compares the log-probabilities of " Yes" and
  " No" after the same prompt (a tie is wrong).
* Wh: asks for the object when out-degree(s, p) < 10 (otherwise the edge gets a yes/no
  question, as in KGLens); verified against the KG's true objects, candidates, names and
  demonyms in the run's language (``lang``; default the KG's)
  (:func:`kgprobe.probes.candidates.verify_wh`); an answer that repeats the few-shot
  demonstration is wrong; optionally an LLM judge when no name matches.
* EASY = yes/no only; HARD = wh or yes/no with probability ½ each.
* The subject's alias goes into the question: "X (also known as Y)".

No identical repeats: the ``attempt``-th probe of an edge (the engine passes how often
it was probed before) uses the ``attempt``-th phrasing — templates rotate fastest, then
the wrong object, then the subject's alias. When they are used up the question repeats
one and its verdict carries ``"repeated": true`` (the engine adds no evidence for it);
every verdict records its phrasing (template, source, subject form, object, attempt).

Templates are hand-written for the embedded KGs' predicates and built by
:mod:`kgprobe.probes.grammar` for any other; an LLM (``LLMQuestionGenerator``, the
few-shot prompts of KGLens appendix A.6) can add one template per predicate and kind,
cached in a JSON file keyed by backend identity and predicate. The answer prompts are
A.6's: an instruction and two demonstrations, sent as one user message (``chat=True``)
so chat-only backends can serve them.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult
from kgprobe.probes.base import Probe, ProbeTask, Verdict
from kgprobe.probes.common import all_names, gold_names, name_of, negative_pool, renderable
from kgprobe.probes.templates import fill, templates_for
from kgprobe.probes.verify import normalize, parse_yes_no
from kgprobe.probes.candidates import verify_wh, wh_detail

#: Wh-questions only for (s, p) with fewer true objects than this (KGLens §2.2).
WH_MAX_OUT_DEGREE = 10

YES_NO_INSTRUCTION = "You are a helpful assistant, please answer Yes or No to the user's questions."
YES_NO_DEMOS = (
    ("Is Belgium located in the continent of Europe?", "Yes."),
    ("Is Andrzej Duda the head of state of Belgium?", "No."),
)
WH_INSTRUCTION = (
    "You are a helpful assistant, please give short and accurate answers to the user's question. "
    "If there are multiple answers, please list as much as possible."
)
WH_DEMOS = (
    ("What is the birth place of Jorund?", "Gamla Uppsala."),
    ("Who is the father of Yellow Emperor?", "Shaodian."),
)
#: The subjects and answers of ``WH_DEMOS``: a wh-answer that names one of them (and the
#: question does not) repeats a demonstration, and is never counted as an answer.
WH_DEMO_NAMES = ("Jorund", "Gamla Uppsala", "Yellow Emperor", "Shaodian")


def answer_prompt(question: str, *, wh: bool) -> str:
    """The A.6 answer prompt as one text: instruction, two demonstrations, the question."""
    instruction, demos = (WH_INSTRUCTION, WH_DEMOS) if wh else (YES_NO_INSTRUCTION, YES_NO_DEMOS)
    lines = [instruction, ""]
    for q, a in demos:
        lines += [f"Question: {q}", f"Answer: {a}", ""]
    lines += [f"Question: {question}", "Answer:"]
    return "\n".join(lines)


def with_alias(subject: str, alias: str | None) -> str:
    return f"{subject} (also known as {alias})" if alias else subject


# -- LLM question generation ----------------------------------------------------------------

_YES_NO_QG = (
    "Given a semantic triple (SUBJECT, PREDICATE, OBJECT), generate a QUESTION that asks if the "
    "SUBJECT's PREDICATE is the OBJECT, or includes the OBJECT. The alias of the SUBJECT can be used "
    "in the question. Reply with the question only.\n\n"
    "SUBJECT is Jorund, PREDICATE is place of birth, OBJECT is Gamla Uppsala, SUBJECT_ALIAS is Jörundr\n"
    "QUESTION: Is Gamla Uppsala the birth place of Jorund (also known as Jörundr)?\n\n"
    "SUBJECT is Asia, PREDICATE is located in time zone, OBJECT is Nepal Standard Time, "
    "SUBJECT_ALIAS is Asian continent\n"
    "QUESTION: Is Nepal Standard Time included in the time zones of Asia (also known as the Asian continent)?\n\n"
)
_WH_QG = (
    "Given a semantic triple SUBJECT, PREDICATE, OBJECT, generate a QUESTION that can be answered by the "
    "OBJECT. The OBJECT must not occur in the question. Reply with the question only.\n\n"
    "SUBJECT is Jorund, PREDICATE is place of birth, OBJECT is Gamla Uppsala\n"
    "QUESTION: What is the birth place of the legendary Swedish king Jorund?\n\n"
    "SUBJECT is Yellow Emperor, PREDICATE is father, OBJECT is Shaodian\n"
    "QUESTION: Who is the father of Yellow Emperor?\n\n"
)


class LLMQuestionGenerator:
    """Question templates written by a language model from KGLens' few-shot prompts (A.6).

    The model is asked once per predicate and kind (yes/no, wh), about one example edge
    of that predicate; its question becomes a template by putting ``{subject}`` (and, for
    yes/no, ``{object}``) where the example's names stand. So a big model writes the
    templates once and every edge of the predicate reuses them. The cache is a JSON object
    ``{key: template}`` keyed by backend identity, kind, predicate id and label. A question
    that is unusable (empty, no question mark, the example's names not found in it, or —
    for wh — containing the object) is rejected: the cache records ``""`` and the grammar's
    templates are used instead.
    """

    def __init__(self, model: LanguageModel, cache_path: str | os.PathLike | None = None, *, chat: bool = True):
        self.model = model
        self.chat = chat
        self.cache_path = Path(cache_path) if cache_path else None
        self._cache: dict[str, str] = {}
        self.generated = 0
        self.rejected = 0
        if self.cache_path and self.cache_path.exists():
            try:
                self._cache = json.loads(self.cache_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(
                    f"question cache {self.cache_path} is not valid JSON ({exc}); delete it to regenerate"
                ) from None
            if not isinstance(self._cache, dict):
                raise InputError(f"question cache {self.cache_path} is not a JSON object; delete it to regenerate")

    @staticmethod
    def prompt(kind: str, subject: str, predicate: str, obj: str, alias: str | None) -> str:
        if kind == "yes_no":
            line = f"SUBJECT is {subject}, PREDICATE is {predicate}, OBJECT is {obj}"
            if alias:
                line += f", SUBJECT_ALIAS is {alias}"
            return _YES_NO_QG + line + "\nQUESTION:"
        return _WH_QG + f"SUBJECT is {subject}, PREDICATE is {predicate}, OBJECT is {obj}\nQUESTION:"

    @staticmethod
    def example_edge(kg: KnowledgeGraph, predicate: str) -> int | None:
        """The edge the model sees for a predicate: its first active edge with named ends."""
        for j in kg.edges_of_predicate(predicate, active_only=True):
            if renderable(kg, int(j)):
                return int(j)
        return None

    def template(self, kg: KnowledgeGraph, predicate: str, kind: str) -> str | None:
        """The model's template for (predicate, kind), or None when it wrote none usable."""
        key = json.dumps([self.model.identity, kind, predicate, kg.predicate_label(predicate)], ensure_ascii=False)
        if key not in self._cache:
            self._cache[key] = self._generate(kg, predicate, kind)
            self._save()
        return self._cache[key] or None

    def _generate(self, kg: KnowledgeGraph, predicate: str, kind: str) -> str:
        edge = self.example_edge(kg, predicate)
        if edge is None:
            return ""
        t = kg.triple(edge)
        subject = name_of(kg, t.subject, edge=edge, role="subject")
        obj = name_of(kg, t.object, edge=edge, role="object")
        plabel = kg.predicate_label(predicate)
        request = GenerateRequest(
            self.prompt(kind, subject, plabel, obj, None), max_tokens=48, stop=("\n",), chat=self.chat
        )
        text = self.model.generate([request])[0].strip()
        self.generated += 1
        template = question_template(text, subject, obj, kind)
        if template is None:
            self.rejected += 1
            return ""
        return template

    def _save(self) -> None:
        if not self.cache_path:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, prefix=".questions-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self._cache, f, ensure_ascii=False, indent=0)
        os.replace(tmp, self.cache_path)


def question_template(text: str, subject: str, obj: str, kind: str) -> str | None:
    """A generated question about (subject, obj) as a template, or None when unusable."""
    text = text.strip().removeprefix("QUESTION:").strip().strip('"').strip()
    if not text or "?" not in text:
        return None
    text = text[: text.index("?") + 1]
    if "{" in text or "}" in text:
        return None
    at = text.casefold().find(subject.casefold())
    if at < 0:
        return None
    template = text[:at] + "{subject}" + text[at + len(subject) :]
    if kind == "wh":
        if normalize(obj) and normalize(obj) in normalize(template.replace("{subject}", " ")):
            return None
        return template
    at = template.casefold().find(obj.casefold())
    if at < 0:
        return None
    return template[:at] + "{object}" + template[at + len(obj) :]


# -- LLM judge --------------------------------------------------------------------------------


class LLMJudge:
    """KGLens' answer verifier (appendix A.6): a model says whether a response is correct."""

    def __init__(self, model: LanguageModel, *, chat: bool = True):
        self.model = model
        self.chat = chat

    @staticmethod
    def prompt(question: str, answers: Sequence[str], response: str) -> str:
        return (
            "Given a question and its correct answers, please judge whether a response is correct or not, "
            "only reply with yes or no.\n\n"
            "QUESTION: What writing system does the Ixcatec language use?\n"
            "ANSWERS: latin script, latn, roman script\n"
            "RESPONSE: the ixcatec language uses the latin alphabet for writing.\n"
            "CORRECT: yes\n\n"
            "QUESTION: On which side does railway traffic run in the philippines?\n"
            "ANSWERS: left, left side, left-hand side\n"
            "RESPONSE: Railway traffic in the philippines runs on the right-hand side.\n"
            "CORRECT: no\n\n"
            f"QUESTION: {question}\nANSWERS: {', '.join(answers)}\nRESPONSE: {response.strip()}\nCORRECT:"
        )

    def judge(self, question: str, answers: Sequence[str], response: str) -> bool | None:
        """True / False, or None when the judge's reply is not a clear yes or no."""
        reply = self.model.generate(
            [GenerateRequest(self.prompt(question, answers, response), max_tokens=4, stop=("\n",), chat=self.chat)]
        )[0]
        return parse_yes_no(reply)


# -- the probes ---------------------------------------------------------------------------------


class KGLensProbe(Probe):
    """Yes/no and wh-questions, generated answers; ``mode`` is "yes-no", "wh", "easy" or "hard"."""

    name: ClassVar[str] = "kglens"
    needs_scoring: ClassVar[bool] = False
    MODES: ClassVar[tuple[str, ...]] = ("yes-no", "wh", "easy", "hard")

    def __init__(
        self,
        mode: str = "hard",
        *,
        questions: LLMQuestionGenerator | None = None,
        judge: LLMJudge | None = None,
        chat: bool = True,
        use_alias: bool = True,
        max_tokens_yes_no: int = 24,
        max_tokens_wh: int = 32,
        lang: str | None = None,
    ):
        if mode not in self.MODES:
            raise InputError(f"unknown KGLens mode {mode!r}; choose one of {', '.join(self.MODES)}")
        self.mode = mode
        self.name = mode
        self.questions = questions
        self.judge = judge
        self.chat = chat
        self.use_alias = use_alias
        self.max_tokens_yes_no = max_tokens_yes_no
        self.max_tokens_wh = max_tokens_wh
        # The language answers are read in; None: the KG's ``lang`` (see ``run_language``).
        self.lang = lang

    def _wh_allowed(self, kg: KnowledgeGraph, edge: int) -> bool:
        t = kg.triple(edge)
        return self.mode not in ("yes-no", "easy") and kg.out_degree(t.subject, t.predicate) < WH_MAX_OUT_DEGREE

    def _wants_wh(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> bool:
        if self.mode in ("yes-no", "easy"):
            return False
        wh_allowed = self._wh_allowed(kg, edge)
        if self.mode == "wh":
            return wh_allowed
        # HARD: draw the coin first so the stream does not depend on the out-degree.
        coin = rng.random() < 0.5
        return coin and wh_allowed

    # -- phrasings -------------------------------------------------------------------------

    def subject_forms(self, kg: KnowledgeGraph, edge: int) -> list[str]:
        """The subject as a question shows it: "X (also known as A)" for each alias A, or "X"."""
        t = kg.triple(edge)
        subject = name_of(kg, t.subject, edge=edge, role="subject")
        entity = kg.entity(t.subject)
        aliases = [a.strip() for a in entity.aliases if a.strip() and a.strip() != subject] if self.use_alias else []
        return [with_alias(subject, a) for a in dict.fromkeys(aliases)] or [subject]

    def templates(self, kg: KnowledgeGraph, predicate: str, kind: str) -> list[tuple[str, str]]:
        """(template, source) of a predicate, most natural first: the LLM's, then the table's or grammar's."""
        tpl = templates_for(kg, predicate)
        source = "hand-written" if tpl.hand_written else "grammar"
        out = [(x, source) for x in (tpl.wh if kind == "wh" else tpl.yes_no)]
        if self.questions is not None:
            generated = self.questions.template(kg, predicate, kind)
            if generated and generated not in {x for x, _ in out}:
                out.insert(0, (generated, "llm"))
        return out

    def phrasing_count(self, kg: KnowledgeGraph, edge: int, kind: str) -> int:
        """How many distinct questions of this kind the edge can be asked."""
        t = kg.triple(edge)
        n = len(self.templates(kg, t.predicate, kind)) * len(self.subject_forms(kg, edge))
        if kind == "wh":
            return n
        return n * (1 + len(_negatives(kg, edge)))

    def question(
        self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator, *, wh: bool, attempt: int = 0
    ) -> dict:
        """The ``attempt``-th question about an edge (0 = first) and what verifies it.

        Each attempt gets a different phrasing: template rotation first, then the
        subject's alias, and for yes/no the object (the true one and the wrong candidates
        C − T, alternating by attempt from a start fixed per edge). Once an edge's
        phrasings of the kind are used up, the question repeats an earlier one and
        ``phrasing["repeated"]`` says so: the engine then counts it as no new evidence.
        """
        t = kg.triple(edge)
        forms = self.subject_forms(kg, edge)
        kind = "wh" if wh else "yes_no"
        templates = self.templates(kg, t.predicate, kind)
        subject_names = all_names(kg.entity(t.subject))
        if wh:
            total = len(templates) * len(forms)
            i = attempt % total
            template, source = templates[i % len(templates)]
            shown = forms[i // len(templates)]
            text = fill(template, shown)
            phrasing = {"kind": "wh", "template": template, "source": source, "subject": shown,
                        "attempt": attempt, "distinct": total, "repeated": attempt >= total}
            return {"type": "wh", "question": text, "gold": gold_names(kg, t.subject, t.predicate),
                    "subject_names": subject_names, "phrasing": phrasing}
        pool = _negatives(kg, edge)
        if pool:
            # True and false objects alternate by attempt, from a start fixed per edge.
            positive = (_edge_hash(kg, edge) + attempt) % 2 == 0
            i = attempt // 2
        else:
            positive, i = True, attempt  # C − T is empty: only a "yes" question can be asked
        n_t, n_s = len(templates), len(forms)
        if positive:
            total = n_t * n_s
            j = i % total
            template, source = templates[j % n_t]
            shown = forms[j // n_t]
            obj_id, obj = t.object, name_of(kg, t.object, edge=edge, role="object")
        else:
            total = n_t * n_s * len(pool)
            j = i % total
            order = np.random.default_rng(_edge_hash(kg, edge)).permutation(len(pool))
            template, source = templates[j % n_t]
            obj_id, obj = pool[int(order[(j // n_t) % len(pool)])]
            shown = forms[j // (n_t * len(pool))]
        text = fill(template, shown, obj)
        phrasing = {"kind": "yes_no", "template": template, "source": source, "subject": shown, "object": obj,
                    "attempt": attempt, "distinct": total, "repeated": i >= total}
        return {
            "type": "yes_no",
            "question": text,
            "expected": bool(positive),
            "object": obj,
            "subject_names": subject_names,
            "object_names": all_names(kg.entity(obj_id)),
            "phrasing": phrasing,
        }

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        return self.render_attempt(kg, edge, rng, 0)

    def render_attempt(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator, attempt: int) -> ProbeTask:
        wh = self._wants_wh(kg, edge, rng)
        q = self.question(kg, edge, rng, wh=wh, attempt=attempt)
        if q["phrasing"]["repeated"] and self.mode == "hard" and self._wh_allowed(kg, edge):
            # HARD mode: when one kind's phrasings are used up, the other kind may have fresh ones.
            other = self.question(kg, edge, rng, wh=not wh, attempt=attempt)
            if not other["phrasing"]["repeated"]:
                q, wh = other, not wh
        request = GenerateRequest(
            answer_prompt(q["question"], wh=wh),
            max_tokens=self.max_tokens_wh if wh else self.max_tokens_yes_no,
            stop=("\nQuestion:", "\n\n"),
            chat=self.chat,
            edge=edge,
        )
        return ProbeTask(edge=edge, generate_requests=[request], question=q["question"], payload=q)

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        response = generations[0].strip()
        q = task.payload
        detail = _phrasing_detail(q)
        if q["type"] == "yes_no":
            said = parse_yes_no(
                response, subject_names=q.get("subject_names", ()), object_names=q.get("object_names", ())
            )
            return Verdict(said is not None and said == q["expected"], response,
                           {"type": "yes_no", "parsed": said, **detail})
        result = verify_wh(kg, task.edge, response, lang=self.lang, demo_names=WH_DEMO_NAMES)
        correct, judged = result.correct, None
        if self.judge is not None and not result.correct and result.reason == "no-match":
            judged = self.judge.judge(q["question"], q["gold"], response)
            if judged is not None:
                correct = judged
        return Verdict(correct, response, {"type": "wh", "reason": result.reason, "judge": judged,
                                           **wh_detail(result), **detail})

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        """Random guessing: ½ on yes/no, 0 on wh; HARD mixes them when wh is allowed."""
        t = kg.triple(edge)
        wh_allowed = kg.out_degree(t.subject, t.predicate) < WH_MAX_OUT_DEGREE
        if self.mode in ("yes-no", "easy") or not wh_allowed:
            return 0.5
        return 0.0 if self.mode == "wh" else 0.25


class YesNoLogprobProbe(Probe):
    """Yes/no by log-probability: is " Yes" or " No" more likely after the question?"""

    name: ClassVar[str] = "yes-no-logprob"
    needs_scoring: ClassVar[bool] = True

    def __init__(self, *, use_alias: bool = True, questions: LLMQuestionGenerator | None = None):
        self._questions = KGLensProbe("yes-no", questions=questions, use_alias=use_alias)

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        return self.render_attempt(kg, edge, rng, 0)

    def render_attempt(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator, attempt: int) -> ProbeTask:
        q = self._questions.question(kg, edge, rng, wh=False, attempt=attempt)
        context = answer_prompt(q["question"], wh=False)
        return ProbeTask(
            edge=edge,
            score_requests=[ScoreRequest(context, " Yes", edge=edge), ScoreRequest(context, " No", edge=edge)],
            question=q["question"],
            payload=q,
        )

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        yes, no = scores[0].logprob, scores[1].logprob
        said = True if yes > no else False if no > yes else None
        correct = said is not None and said == task.payload["expected"]
        p_yes = float(1.0 / (1.0 + np.exp(no - yes)))
        answer = "Yes" if said else "No" if said is False else "tie"
        return Verdict(correct, answer, {"type": "yes_no", "p_yes": p_yes, **_phrasing_detail(task.payload)})

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        return 0.5


def _edge_hash(kg: KnowledgeGraph, edge: int) -> int:
    """A number fixed by the edge's triple (not its position), for per-edge orders."""
    t = kg.triple(edge)
    return zlib.crc32("\t".join((t.subject, t.predicate, t.object)).encode("utf-8"))


def _phrasing_detail(question: dict) -> dict:
    """The verdict's record of how the edge was asked; ``repeated`` only when it was."""
    phrasing = question.get("phrasing")
    if not phrasing:
        return {}
    detail = {"phrasing": {k: v for k, v in phrasing.items() if k != "repeated"}}
    if phrasing.get("repeated"):
        detail["repeated"] = True
    return detail


def _negatives(kg: KnowledgeGraph, edge: int) -> list[tuple[str, str]]:
    """C − T for a yes/no "no" question, without the subject itself ("Is X the spouse of X?")."""
    t = kg.triple(edge)
    return [(eid, name) for eid, name in negative_pool(kg, t.subject, t.predicate) if eid != t.subject]
