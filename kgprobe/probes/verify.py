"""Answer normalization and matching: turns free model text into right or wrong.

Two questions are answered here:

* :func:`parse_yes_no` — which polarity does a response to a yes/no question commit
  to? KGLens verifies by the first word; kgprobe does too, but tolerates case,
  punctuation, quoting, a leading "A:" / "Answer:" and a few fillers ("Well,",
  "Certainly,"), and returns ``None`` (counted wrong) when the response hedges,
  refuses, or contradicts its own first word ("Yes. Actually, no …").
* :func:`match_answer` — does a free-text response name one of the gold answers
  (every true object and its aliases)? Both sides are normalized (case, articles,
  punctuation, diacritics, "X language" vs "X", UTC offsets, dates and numbers
  written differently) and a gold name must occur as a whole-word sequence. A pure
  refusal is wrong; a hedge that still names a gold answer ("I think it is Paris")
  is right, as KGLens' annotators were told ("correct when the answer or any alias
  appears"); a disjunctive guess over several alternatives ("Paris or Lyon") is
  wrong unless every alternative is gold; a negated mention ("not Paris", "does not
  border France") does not count. Names are found longest first ("South Africa"
  claims its words before "Africa"); given the KG's names and candidates
  (:class:`NameIndex`, ``true_keys``, ``candidate_keys``; see
  :mod:`kgprobe.probes.candidates`), naming a candidate outside the true objects is
  wrong for a single-valued fact and a recorded precision error for a multi-valued one.
  Names are read in the run's language: a name that is also a common word ("Island",
  "Turkey") only as a proper noun, a true object's demonym where it locates the subject
  ("a Brazilian city"), and an answer that repeats the prompt's demonstration is wrong
  (rules 7-9 of :func:`match_answer`; ``docs/verifier.md``).

Decisions where the papers are silent are documented at each function. The labelled
set ``kgprobe/probes/data/labelled_answers.jsonl`` is the test of these rules.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from kgprobe.probes.lexicon import COPULAS, PLACE_NOUNS, base_language, common_words, reads_as_proper_noun

_ARTICLES = {"a", "an", "the"}

# Words whose removal leaves the same entity: "French language" ≡ "French". Only
# stripped at the end of a gold name and only when something remains. Prefixes such as
# "Republic of" are deliberately not stripped: "Republic of China", "Democratic Republic
# of the Congo" and "Republic of Korea" would collapse onto other entities; the KG's
# labels already carry the short common name. Likewise "city": "Mexico City" is not
# "Mexico".
_GENERIC_SUFFIXES = ("language", "languages", "people")
# Abbreviations that entity names spell both ways.
_WORD_FORMS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort"}

_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}

_REFUSAL_PATTERNS = [
    r"\bi (?:do not|don ?t|dont) know\b",
    r"\bi (?:am|m) (?:not sure|unsure|not certain|sorry)\b",
    r"\bi (?:cannot|can ?t|cant|could not|couldn ?t) (?:answer|provide|determine|find|say|help|tell|verify|confirm)\b",
    r"\b(?:i|we) (?:do not|don ?t|dont) have (?:any |enough |the )?(?:information|data|access|knowledge)\b",
    r"\bno (?:information|data) (?:is )?available\b",
    r"\bunknown\b",
    r"\bas an ai\b",
    r"\bnot (?:able|possible) to (?:answer|determine|say)\b",
    r"\bunable to (?:answer|determine|provide|find|verify)\b",
    r"^sorry\b",
    r"\bthere is no\b",
]
_REFUSAL_RE = re.compile("|".join(_REFUSAL_PATTERNS))

# Hedges that do not commit to a yes/no polarity.
_YES_WORDS = {"yes", "yeah", "yep", "correct", "true", "right", "indeed", "affirmative", "certainly", "absolutely",
              "definitely"}
# Whole-phrase answers, checked before the first-word rule (normalized, apostrophes as spaces).
_YES_PHRASES = ("of course", "i think so", "i believe so", "that is right", "that s right")
_NO_PHRASES = ("i don t think so", "i do not think so", "i dont think so", "not really", "of course not")
_NO_WORDS = {"no", "nope", "incorrect", "false", "wrong", "not"}
# In normalized form (articles already dropped): "The answer is" -> "answer is".
_LEADING_FILLERS = (
    "a",  # "A: Yes"
    "answer to your question is",
    "answer to this question is",
    "answer to question is",
    "answer is",
    "my answer is",
    "answer",
    "well",
    "sure",
    "ok",
    "okay",
    "response",
    "assistant",
)
# A later sentence that reverses the first word: "Yes. Actually, no, ...".
_REVERSAL_RE = re.compile(
    r"(?:^|[.!?;]\s*|\b(?:actually|wait|correction|sorry|oops|hmm|rather|i mean)\b[,\s]*)"
    r"(yes|no)(?=[.,!;]|\s*$)",
)
_YES_NEGATION_RE = re.compile(
    r"\b(?:is not|isn ?t|are not|aren ?t|was not|wasn ?t|does not|doesn ?t|do not|don ?t|"
    r"did not|didn ?t|has not|hasn ?t|have not|haven ?t|not the|not a|not an|never|"
    r"that is (?:false|incorrect|wrong)|that s (?:false|incorrect|wrong))\b"
)
_NO_AFFIRMATION_RE = re.compile(
    r"\b(?:that is|that s|it is|this is) (?:true|correct|right)\b|\bi mean yes\b"
)


def strip_diacritics(text: str) -> str:
    """Remove combining marks after NFKD decomposition; other scripts keep their letters."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalize(text: str) -> str:
    """Lowercase, strip diacritics and punctuation, drop articles, collapse spaces.

    Letters and digits of every script are kept (Cyrillic, CJK, Arabic…), so labels in
    another script still match themselves. Signs inside UTC offsets ("UTC+01:00") are
    kept as words so that "+1" and "-1" differ.

    >>> normalize("The Côte d'Ivoire!")
    'cote d ivoire'
    """
    text = strip_diacritics(text).casefold()
    text = text.replace("’", "'").replace("‘", "'").replace("−", "-").replace("–", "-")
    text = _canonical_utc(text)
    # "U.S.A." -> "usa", so dotted abbreviations meet their undotted aliases.
    text = re.sub(r"\b(?:\w\.){2,}", lambda m: m.group(0).replace(".", ""), text)
    # Separate digits from thousands separators before punctuation goes: "1,000" -> "1000".
    text = re.sub(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)", "", text)
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or ch in "+-." or ch.isspace():
            out.append(ch)
        else:
            out.append(" ")
    text = "".join(out)
    # A dot or sign only matters inside a number ("3.5", "+1"); elsewhere it is punctuation.
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)
    text = re.sub(r"(?<=\S)[+-]|[+-](?!\d)", " ", text)
    words = [_WORD_FORMS.get(w, w) for w in text.split() if w not in _ARTICLES]
    return " ".join(words)


def _canonical_utc(text: str) -> str:
    """"UTC+01:00", "UTC +1", "GMT+1" -> "utc +1"; "UTC+05:30" -> "utc +5.5"; "UTC" -> "utc +0"."""

    def repl(m: re.Match) -> str:
        sign, hours, minutes = m.group(2), m.group(3), m.group(4)
        if not hours:
            return " utc +0 "
        value = int(hours) + (int(minutes) / 60 if minutes else 0)
        text_value = f"{value:g}"
        # UTC-0 and UTC+0 are the same zone.
        return f" utc {'-' if sign == '-' and value else '+'}{text_value} "

    return re.sub(r"\b(utc|gmt)(?:\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?)?(?![\d:])", repl, text)


# -- dates and numbers -------------------------------------------------------------------


def canonical_dates(text: str) -> set[str]:
    """Every calendar date written in ``text``, as ``YYYY-MM-DD`` (or ``YYYY`` alone)."""
    t = strip_diacritics(text).casefold()
    found: set[str] = set()
    # Wikidata / ISO: +1990-05-01T00:00:00Z, 1990-05-01
    for y, mo, d in re.findall(r"\+?\b(\d{3,4})-(\d{1,2})-(\d{1,2})", t):
        # Wikidata writes a year-precision date as YYYY-00-00: keep just the year.
        found.add(f"{int(y):04d}" if int(mo) == 0 else _ymd(y, mo, d))
    month_names = "|".join(sorted(_MONTHS, key=len, reverse=True))
    # 1 May 1990, 1st of May, 1990
    for d, mo, y in re.findall(
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? ({month_names})\.?,? (\d{{3,4}})\b", t
    ):
        found.add(_ymd(y, _MONTHS[mo], d))
    # May 1, 1990 / May 1st 1990
    for mo, d, y in re.findall(rf"\b({month_names})\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{3,4}})\b", t):
        found.add(_ymd(y, _MONTHS[mo], d))
    # 01/05/1990 is ambiguous (day/month order); only accepted when one reading is impossible.
    for a, b, y in re.findall(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b", t):
        a_i, b_i = int(a), int(b)
        if a_i > 12 >= b_i:
            found.add(_ymd(y, b, a))
        elif b_i > 12 >= a_i:
            found.add(_ymd(y, a, b))
    return found


def _year_words(text: str) -> set[str]:
    return {f"{int(y):04d}" for y in re.findall(r"(?<![\d-])(\d{3,4})(?![\d-])", text)}


def _ymd(y, mo, d) -> str:
    return f"{int(y):04d}-{int(mo):02d}-{int(d):02d}"


_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def _canonical_numbers(text: str) -> set[float]:
    """Numbers written in ``text``: "1,234,567", "1.2 million", "+42", "3.5"."""
    t = strip_diacritics(text).casefold()
    t = re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", t)
    found: set[float] = set()
    for num, scale in re.findall(
        r"(?<![\w.])[+]?(-?\d+(?:\.\d+)?)(?:\s*(thousand|million|billion|trillion))?(?![\w])", t
    ):
        value = float(num) * (_SCALE[scale] if scale else 1.0)
        found.add(value)
    return found


def _is_date_like(name: str) -> bool:
    return bool(canonical_dates(name))


def is_number_like(name: str) -> bool:
    return bool(re.fullmatch(r"\s*[+-]?[\d,.\u202f\u00a0 ]+(?:\s*(thousand|million|billion|trillion))?\s*", name.casefold()))


# -- matching ------------------------------------------------------------------------------


def name_variants(name: str) -> set[str]:
    """Normalized forms of one gold name that still identify the same entity."""
    base = normalize(name)
    variants = {base} if base else set()
    for suffix in _GENERIC_SUFFIXES:
        if base.endswith(" " + suffix) and len(base) > len(suffix) + 1:
            variants.add(base[: -len(suffix) - 1])
    return {v for v in variants if v}


def _uses_spaces(text: str) -> bool:
    """False for scripts written without spaces between words (CJK, Thai…)."""
    for ch in text:
        name = unicodedata.name(ch, "")
        if any(s in name for s in ("CJK", "HIRAGANA", "KATAKANA", "THAI", "HANGUL")):
            return False
    return True


def _find_all(haystack: str, needle: str) -> list[int]:
    """Start offsets of ``needle`` as a whole-word sequence in ``haystack`` (both normalized)."""
    if not needle:
        return []
    if not _uses_spaces(needle):
        return [m.start() for m in re.finditer(re.escape(needle), haystack)]
    pattern = r"(?<![^\s])" + re.escape(needle) + r"(?![^\s])"
    return [m.start() for m in re.finditer(pattern, haystack)]


_NEGATORS = ("not", "isn t", "isnt", "no", "never", "nor", "neither", "aren t", "wasn t", "except", "besides", "other than")


_NEGATED_AFTER = re.compile(r"\s*(?:is|was|are|were)\s+(?:not|never)\b|\s*(?:isn t|wasn t|aren t|weren t)\b")


# A negated verb a few words before a mention: "does not border France", "was never in Spain".
_CLAUSE_NEGATORS = {"not", "never", "t", "neither", "nor"}
# Words that start a new assertion, so a negation before them does not reach the mention:
# "It is not Madrid but Paris".
_CLAUSE_BREAKS = {"but", "and", "or", "rather", "instead", "it", "is", "was", "are", "yes", "so", "|"}


def _negated(haystack: str, start: int, length: int) -> bool:
    """"not Paris", "except Paris", "does not border Paris" and "Paris is not …" do not assert Paris."""
    before = haystack[:start].rstrip()
    if any(before.endswith(" " + n) or before == n for n in _NEGATORS):
        return True
    for word in reversed(before.split()[-3:]):
        if word in _CLAUSE_BREAKS or "\u2400" in word:
            break
        if word in _CLAUSE_NEGATORS:
            return True
    return bool(_NEGATED_AFTER.match(haystack, start + length))


def is_refusal(response: str) -> bool:
    """True when the response declines to answer ("I'm sorry, I don't know", "Unknown")."""
    return bool(_REFUSAL_RE.search(normalize(response).replace("'", " ")))


def _split_alternatives(response: str) -> list[str]:
    """Normalized items of a disjunctive first sentence "x, y or z" (empty without "or")."""
    first_sentence = re.split(r"(?<=[.!?])\s", response.strip(), maxsplit=1)[0].casefold()
    if not re.search(r"\bor\b", first_sentence):
        return []
    parts = re.split(r"[,;]|\b(?:or|either|maybe|perhaps|possibly)\b", first_sentence)
    return [n for n in (normalize(p) for p in parts) if n]


def _mask_echo(norm_response: str, echoed: Iterable[str], gold_variants: set[str]) -> str:
    """Blank out names the response merely repeats from the question.

    A model that echoes "Federated States of Micronesia (also known as …)" has not
    answered "Micronesia". Every echoed name is masked, except a name that is itself a
    gold answer (Djibouti's capital is Djibouti: the echo cannot be told apart) and an
    occurrence that lies inside a mention of a gold answer.
    """
    # An echo inside a gold mention is part of the answer, not an echo: "Bissau" in the
    # answer "Guinea-Bissau" to "In which country is Bissau?".
    in_gold = [False] * len(norm_response)
    for variant in gold_variants:
        for start in _find_all(norm_response, variant):
            in_gold[start : start + len(variant)] = [True] * len(variant)
    masked = [False] * len(norm_response)
    for variant in {v for name in echoed for v in name_variants(name)} - gold_variants:
        for start in _find_all(norm_response, variant):
            if all(in_gold[start : start + len(variant)]):
                continue
            masked[start : start + len(variant)] = [True] * len(variant)
    # Overlapping echoes ("Micronesia, Federated States of Micronesia") are masked as one span.
    return "".join("\u2400" if m and not ch.isspace() else ch for ch, m in zip(norm_response, masked))


@dataclass(frozen=True)
class Match:
    """The outcome of :func:`match_answer`."""

    correct: bool
    reason: str
    """"match", "match-with-extras", "wrong-candidate", "wrong-extra", "no-match", "refusal",
    "negated", "disjunctive-guess", "demo-echo" or "empty"."""
    matched: str = ""
    """The gold name that was found, when one was."""
    named_true: tuple[str, ...] = ()
    """Keys of the true objects the answer names (entity ids when a name index is given)."""
    named_wrong: tuple[str, ...] = ()
    """Keys of candidates outside the true objects that the answer names."""
    complete: bool | None = None
    """Whether every true object is named (None when the answer names none)."""


# Words that make a longer place name out of a shorter one: "South Africa" is not "Africa".
_QUALIFIERS = ("South", "North", "East", "West", "Southern", "Northern", "Eastern", "Western", "Central", "New",
               "Upper", "Lower", "Greater", "Little", "Equatorial")
_QUALIFIED_RE = re.compile(r"\b(" + "|".join(_QUALIFIERS) + r")[\s-]+(\w+)")


class NameIndex:
    """Every name of a set of entities, for finding which entities a response mentions.

    ``groups`` is ``(key, names)`` per entity (the key is the entity id). Names are
    normalized with :func:`name_variants`; a normalized name may belong to several keys
    (two entities called "Georgia"). Lookup is by word n-grams, so an index over a whole
    KG costs one pass over the response; names in scripts written without spaces are
    searched as substrings.
    """

    def __init__(self, groups: Iterable[tuple[str, Iterable[str]]]):
        self.keys: dict[str, set[str]] = {}
        self.unspaced: dict[str, set[str]] = {}
        # How each key writes a name that normalizes to a variant, and whether it is the
        # key's first name (its label), for the common-word rule (``_Reading.names_entity``).
        self.spellings: dict[str, dict[str, set[tuple[str, bool]]]] = {}
        self.max_words = 1
        for key, names in groups:
            for i, name in enumerate(names):
                for variant in name_variants(name):
                    table = self.keys if _uses_spaces(variant) else self.unspaced
                    table.setdefault(variant, set()).add(key)
                    self.spellings.setdefault(variant, {}).setdefault(key, set()).add((name.strip(), i == 0))
                    self.max_words = max(self.max_words, variant.count(" ") + 1)

    def spans(self, norm: str) -> list[tuple[int, int, frozenset[str]]]:
        """(start, end, keys) of every name occurrence in a normalized text, overlaps included."""
        out = []
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", norm)]
        for i in range(len(words)):
            for n in range(1, min(self.max_words, len(words) - i) + 1):
                start, end = words[i][0], words[i + n - 1][1]
                keys = self.keys.get(norm[start:end])
                if keys:
                    out.append((start, end, frozenset(keys)))
        for variant, keys in self.unspaced.items():
            for start in _find_all(norm, variant):
                out.append((start, start + len(variant), frozenset(keys)))
        return out


class _Reading:
    """How one response reads in the run's language: where its common-word names are proper nouns.

    ``plain`` is the normalized response before echoed names are masked (masking keeps
    every offset), ``raw`` the response as written.
    """

    def __init__(self, plain: str, raw: str, lang: str):
        self.plain = plain
        self.raw = strip_diacritics(raw)
        self.lang = base_language(lang)
        self.words = common_words(self.lang)
        self.bare = _strip_leading(normalize(raw))
        self._occurrences: dict[str, tuple[list[tuple[int, int]], list[int]]] = {}

    def is_common(self, text: str) -> bool:
        return bool(self.words) and all(w in self.words for w in text.split())

    def names_entity(self, start: int, text: str, spellings: Iterable[tuple[str, bool]]) -> bool:
        """Does the common-word mention ``text`` at ``plain[start:]`` name an entity that the KG
        writes as ``spellings`` ((name, is the entity's label) pairs)?

        * A name that starts with a sign (".is", a top-level domain) names it only where
          the answer writes the sign: the verb "is" is not Iceland's domain.
        * A name that must be read as a proper noun (:meth:`needs_proper_noun`) names it
          only where the answer writes a proper noun there.
        * Any other name matches as written: the KG's own common noun ("island", as
          Wikidata writes the class) and a label that is the common word itself ("Euro":
          "the euro" is the currency).
        """
        for name, is_label in spellings:
            sign = re.match(r"[^\w\s]+", name)
            if sign:
                if any(self.raw[:at].endswith(sign.group(0)) for at, _ in self._raw_offsets(start, text)):
                    return True
            elif not self.needs_proper_noun(name, is_label) or self.proper_noun_at(start, text):
                return True
        return False

    def needs_proper_noun(self, name: str, is_label: bool) -> bool:
        """A capitalized common-word name is read as the entity only where written as a proper
        noun when it is an alias (Iceland's "Island": another name than the entity's own) or
        when the word list knows every word of it as a proper noun too (the label "Turkey":
        turkey the bird is another thing). A label the list knows only as a common word
        ("Euro", "Yen") is that word."""
        if not name[:1].isupper():
            return False
        if not is_label:
            return True
        words = self.words or {}
        return all(words.get(w, False) for w in normalize(name).split())

    def _raw_offsets(self, start: int, text: str) -> list[tuple[int, int]]:
        """Where (start, end) the mention ``text`` at ``plain[start:]`` is written in the raw text.

        The k-th mention in the normalized text is the k-th occurrence in the raw text;
        when the two do not line up (a name written "St." for "Saint") every occurrence
        is returned, and none when the name is not found in the raw text at all.
        """
        if text not in self._occurrences:
            self._occurrences[text] = (_raw_occurrences(self.raw, text), _find_all(self.plain, text))
        in_raw, in_norm = self._occurrences[text]
        if len(in_raw) == len(in_norm) and start in in_norm:
            return [in_raw[in_norm.index(start)]]
        return in_raw

    def proper_noun_at(self, start: int, text: str) -> bool:
        """Does the mention ``text`` at ``plain[start:]`` read as a proper noun in the response?

        A response that is nothing but the name ("turkey.") names it whatever its case; a
        name not found in the raw text keeps the old reading.
        """
        if self.bare == text:
            return True
        offsets = self._raw_offsets(start, text)
        return not offsets or any(reads_as_proper_noun(self.raw, at, self.lang, end) for at, end in offsets)

    def demonym_locates(self, start: int, end: int) -> bool:
        """A demonym names its place when it qualifies a place noun ("a Brazilian city", "a
        Japanese fishing village") or is said of the subject ("Yugawara is Japanese.")."""
        places = PLACE_NOUNS.get(self.lang)
        if not places:
            return False
        after = self.plain[end:].split()
        if any(w in places for w in after[: after.index("|") if "|" in after else None][:2]):
            return True
        before = self.plain[:start].split()
        copulas = COPULAS.get(self.lang, frozenset())
        return bool(before) and before[-1] in copulas and (not after or after[0] == "|")


def _raw_occurrences(folded: str, variant: str) -> list[tuple[int, int]]:
    """(start, end) in the raw text (diacritics stripped) where a normalized name is written."""
    gap = r"[\W_]+(?:(?:a|an|the)[\W_]+)?"
    pattern = r"(?<![^\W_])" + gap.join(re.escape(w) for w in variant.split()) + r"(?![^\W_])"
    return [m.span() for m in re.finditer(pattern, folded, flags=re.IGNORECASE)]


def _longest_mentions(
    norm: str,
    raw: str,
    indexes: Sequence[NameIndex],
    *,
    reading: _Reading | None = None,
    demonyms: NameIndex | None = None,
) -> list[tuple[int, int, frozenset[str]]]:
    """Non-overlapping mentions, longest first: "South Africa" claims its words before "Africa".

    A mention right after a capitalised qualifier in the response ("South", "New", …) is
    part of a longer name the index does not know ("New Mexico" is not "Mexico"): it
    claims its words for no entity. With a ``reading``, a name that is also a common word
    of the language names its entities only where it reads as a proper noun ("a Japanese
    island" does not name Iceland, alias "Island"), and a demonym (``demonyms``) only
    where it locates something.
    """
    qualified = {(normalize(q), normalize(w)) for q, w in _QUALIFIED_RE.findall(raw)}
    merged: dict[tuple[int, int], frozenset[str]] = {}
    for index in indexes:
        for start, end, keys in index.spans(norm):
            text = norm[start:end]
            if reading is not None and reading.is_common(text):
                spellings = index.spellings.get(text, {})
                keys = frozenset(k for k in keys if reading.names_entity(start, text, spellings.get(k, ())))
                if not keys:
                    continue
            merged[(start, end)] = merged.get((start, end), frozenset()) | keys
    if demonyms is not None and reading is not None:
        for start, end, keys in demonyms.spans(norm):
            if reading.demonym_locates(start, end):
                merged[(start, end)] = merged.get((start, end), frozenset()) | keys
    taken = [False] * len(norm)
    chosen = []
    for (start, end), keys in sorted(merged.items(), key=lambda h: (h[0][0] - h[0][1], h[0][0])):
        if any(taken[start:end]):
            continue
        taken[start:end] = [True] * (end - start)
        before = norm[:start].split()
        first = norm[start:end].split()[0]
        if before and (before[-1], first) in qualified:
            keys = frozenset()
        chosen.append((start, end, keys))
    return sorted(chosen)


# A sentence ends at "!", "?", ";", or at "." after a word of three or more lower-case
# letters and before a capital ("… Spain. It …"), not after "St." or "D.C.".
_SENTENCE_BREAK = re.compile(r"(?<=[a-z]{3}\.)\s+(?=[A-Z])|(?<=[!?;])\s+")


def match_answer(
    response: str,
    gold_names: Iterable[str],
    *,
    echoed: Iterable[str] = (),
    index: NameIndex | None = None,
    true_keys: Iterable[str] = (),
    candidate_keys: Iterable[str] = (),
    single_valued: bool | None = None,
    lang: str = "en",
    demonyms: Mapping[str, Iterable[str]] | None = None,
    demo_names: Iterable[str] = (),
) -> Match:
    """Does ``response`` name one of ``gold_names`` (true objects and all their aliases)?

    Rules, in order:

    1. Empty response: wrong.
    2. Dates and numbers: a gold that is a date matches any way of writing the same day
       ("1990-05-01", "1 May 1990", "May 1st, 1990"); a numeric gold matches the same
       value ("1,234", "1234", "1.2 thousand" ≠ 1234 though — values must be equal).
    3. Entity mentions, longest first: the response's words are claimed by the longest
       name that covers them ("South Africa" before "Africa"), including names of other
       entities of the KG when an ``index`` is given and any name right after a
       capitalised qualifier ("New Mexico"). Mentions right after a negator ("not",
       "isn't", "except") do not count.
    4. With the KG's candidates (``index`` over the KG, ``true_keys`` = T,
       ``candidate_keys`` = C): naming a candidate outside T is wrong when (s, p) has one
       true object (``single_valued``; reason "wrong-extra" when a true object is named
       too, "wrong-candidate" otherwise) and a precision error for several true objects:
       still right, reason "match-with-extras". ``complete`` says whether every true
       object was named.
    5. A disjunctive guess ("It could be Paris, Lyon or Nice") is wrong unless every
       alternative is gold; a conjunctive list ("French and German") is right when it
       names a gold answer (KGLens asks the model to list all answers).
    6. A refusal without a gold mention is wrong (reason "refusal").

    ``echoed`` names text the question itself contained (the subject and its aliases);
    repeating it does not count as naming anything.

    Reading names the way a person does (``lang``, the run's language):

    7. A name that is also a common word of the language and is an alias ("Island", an
       alias of Iceland) or a label the word list also knows as a proper noun ("Turkey",
       "Chile") names its entity only where it is written as a proper noun: capitalized,
       standing alone (not joined to another capitalized word: "Hokkaido Island"), in a
       response that writes other words in lower case, and not merely capitalized because
       it starts a sentence (unless the word list knows it as a proper noun: "China is
       …"). A response that is only the name counts whatever its case. A label that is
       only a common word ("Euro") and a name the KG writes in lower case match as
       before; a name starting with a sign (".is") only where the sign is written.
       Languages without a word list (:data:`kgprobe.probes.lexicon.LEXICON_LANGUAGES`)
       skip this rule.
    8. ``demonyms`` (key of a true object -> its demonyms, e.g. "Brazilian") count as
       naming that true object where they locate something: before a place noun ("a
       Brazilian city") or said of the subject ("… is Japanese.").
    9. A response that names a person or place of the prompt's few-shot demonstrations
       (``demo_names``) that is neither a gold name nor in the question repeats the
       demonstration instead of answering: wrong (reason "demo-echo").
    """
    golds = [g for g in dict.fromkeys(gold_names) if g and g.strip()]
    raw = response.strip()
    if not raw:
        return Match(False, "empty")
    # Sentences stay apart ("|"), so a negation in one ("I'm not sure.") does not reach
    # a name in the next ("Maybe Canberra?").
    plain = " | ".join(n for n in (normalize(x) for x in _SENTENCE_BREAK.split(raw)) if n)
    echoed = list(echoed)
    gold_variants = {v for g in golds for v in name_variants(g)}
    norm = _mask_echo(plain, echoed, gold_variants) if echoed else plain
    repeats_demo = _repeats_demo(plain, demo_names, gold_variants | {v for n in echoed for v in name_variants(n)})
    for gold in golds if not repeats_demo else ():
        if _is_date_like(gold):
            gold_dates = canonical_dates(gold)
            response_dates = canonical_dates(raw)
            years = {d for d in gold_dates if len(d) == 4}
            if gold_dates & response_dates or any(y in _year_words(raw) for y in years):
                return Match(True, "match", gold)
            # a year-only gold ("1990") falls through to the number rule below
        if is_number_like(gold):
            gold_values = _canonical_numbers(gold)
            response_values = _canonical_numbers(raw)
            if any(abs(g - r) <= 1e-9 * max(1.0, abs(g)) for g in gold_values for r in response_values):
                return Match(True, "match", gold)
    # The gold names are true objects whatever the index holds; "\0gold" keys them.
    true_set = set(true_keys) | {"\0gold"}
    indexes = [NameIndex([("\0gold", golds)])] + ([index] if index is not None else [])
    wrong_set = set(candidate_keys) - true_set
    named_true: dict[str, str] = {}
    named_wrong: dict[str, str] = {}
    negated = ""
    first_gold = ""
    demonym_index = NameIndex((k, names) for k, names in demonyms.items()) if demonyms else None
    mentions = _longest_mentions(norm, raw, indexes, reading=_Reading(plain, raw, lang), demonyms=demonym_index)
    for start, end, keys in mentions:
        text = norm[start:end]
        is_true, is_wrong = bool(keys & true_set), bool(keys & wrong_set)
        if not (is_true or is_wrong):
            continue
        if _negated(norm, start, end - start):
            negated = negated or text
            continue
        if is_true:
            first_gold = first_gold or next((g for g in golds if text in name_variants(g)), text)
            for k in sorted(keys & true_set):
                named_true.setdefault(k, text)
        else:
            for k in sorted(keys & wrong_set):
                named_wrong.setdefault(k, text)
    real_true = {k for k in named_true if k != "\0gold"}
    entities = true_set - {"\0gold"}
    complete = None
    if named_true:
        complete = entities <= real_true if entities else True
    if repeats_demo:
        # What it names is recorded; the verdict is wrong whatever it is.
        return Match(False, "demo-echo", first_gold, tuple(sorted(real_true)), tuple(named_wrong), complete)
    if named_true:
        alternatives = _split_alternatives(raw)
        if len(alternatives) >= 2:
            non_gold = [a for a in alternatives if not any(_find_all(a, v) for v in gold_variants)]
            if non_gold:
                return Match(False, "disjunctive-guess", first_gold, tuple(sorted(real_true)), tuple(named_wrong))
        if named_wrong:
            single = len(entities) <= 1 if single_valued is None else single_valued
            if single:
                return Match(False, "wrong-extra", first_gold, tuple(sorted(real_true)), tuple(named_wrong), complete)
            return Match(True, "match-with-extras", first_gold, tuple(sorted(real_true)), tuple(named_wrong), complete)
        return Match(True, "match", first_gold, tuple(sorted(real_true)), (), complete)
    if named_wrong:
        return Match(False, "wrong-candidate", "", (), tuple(named_wrong), None)
    if negated:
        return Match(False, "negated", negated)
    if is_refusal(raw):
        return Match(False, "refusal")
    return Match(False, "no-match")


def _repeats_demo(plain: str, demo_names: Iterable[str], allowed: set[str]) -> bool:
    """Does the normalized response name a demonstration's name that the question does not?"""
    for name in demo_names:
        for variant in name_variants(name) - allowed:
            if _find_all(plain, variant):
                return True
    return False


# -- yes / no -----------------------------------------------------------------------------


def _strip_leading(norm: str) -> str:
    """Drop quoting, "A:", "Answer:", "Well," and similar before the first real word."""
    changed = True
    while changed:
        changed = False
        for filler in _LEADING_FILLERS:
            if norm == filler:
                continue
            if norm.startswith(filler + " "):
                norm = norm[len(filler) + 1 :]
                changed = True
    return norm


def parse_yes_no(
    response: str, *, subject_names: Iterable[str] = (), object_names: Iterable[str] = ()
) -> bool | None:
    """The polarity a yes/no response commits to: True (yes), False (no) or None.

    KGLens checks the first word only; kgprobe keeps that rule but returns ``None``
    (verified wrong) for:

    * no yes/no word first ("Maybe", "I think so", "It depends", a refusal);
    * a later sentence that reverses it ("Yes. Actually, no, …", "No… wait, yes");
    * "Yes" followed in its own sentence by a negation of the claim
      ("Yes, Paris is not the capital …"), and "No, that is correct".

    "Correct"/"True"/"Certainly"/"I think so" count as yes and "Incorrect"/"False"/
    "Not really"/"I don't think so" as no, since models answer that way; case,
    punctuation, "A:" and fillers ("Well, yes", "The answer is no") are ignored.

    When the response starts with no yes/no word but restates the claim — it names the
    question's subject and object in its first sentence — that restatement is the answer
    (yes, or no when the sentence is negated: "Basseterre is not the capital of
    Mayotte"). ``subject_names`` / ``object_names`` enable this; refusals never count.
    """
    if not response or not response.strip():
        return None
    norm = normalize(response.replace("'", " "))
    norm = _strip_leading(norm)
    if not norm:
        return None
    first = norm.split()[0]
    phrase = next((p for p in _NO_PHRASES if norm == p or norm.startswith(p + " ")), None)
    if phrase is None:
        phrase = next((p for p in _YES_PHRASES if norm == p or norm.startswith(p + " ")), None)
    if phrase is not None:
        return phrase not in _NO_PHRASES
    if first in _YES_WORDS:
        polarity = True
    elif first in _NO_WORDS:
        polarity = False
    else:
        return _implied_yes_no(response, subject_names, object_names)
    if re.match(r"\S+\s+(?:and|or)\s+(?:yes|no)\b", norm):
        return None  # "Yes and no", "No or yes"
    # Work on the raw text (lower-cased) after the first word to see sentence breaks.
    lowered = strip_diacritics(response).casefold().replace("’", "'").replace("'", " ")
    m = re.search(r"\b" + re.escape(first) + r"\b", lowered)
    rest = lowered[m.end() :] if m else lowered
    for rm in _REVERSAL_RE.finditer(rest):
        word = rm.group(1)
        if (word == "yes") != polarity:
            return None
    first_sentence = re.split(r"[.!?;]", rest, maxsplit=1)[0]
    if polarity and _YES_NEGATION_RE.search(first_sentence):
        return None
    if not polarity and _NO_AFFIRMATION_RE.search(first_sentence):
        return None
    return polarity


def _implied_yes_no(response: str, subject_names: Iterable[str], object_names: Iterable[str]) -> bool | None:
    subjects, objects = list(subject_names), list(object_names)
    if not subjects or not objects or is_refusal(response):
        return None
    sentence = normalize(re.split(r"(?<=[.!?])\s", response.strip(), maxsplit=1)[0])
    if not any(_find_all(sentence, v) for n in subjects for v in name_variants(n)):
        return None
    if not any(_find_all(sentence, v) for n in objects for v in name_variants(n)):
        return None
    return not re.search(r"\b(?:not|never|isn t|isnt|aren t|doesn t|don t|no longer)\b", sentence)


def first_segment(text: str, separator: str) -> str:
    """The text before the first ``separator`` (the model's answer in a many-shot pattern)."""
    if separator and separator in text:
        return text[: text.index(separator)]
    return text
