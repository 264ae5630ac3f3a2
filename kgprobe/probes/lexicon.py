"""What a language's words tell the verifier: common words, place nouns, the demo's names.

A KG name can also be an ordinary word: Iceland's alias "Island", Turkey, China
(porcelain), Chile (the pepper). In English a proper noun is written with a capital
letter, so the verifier reads such a name as the entity only where the answer writes it
as a proper noun (see :func:`reads_as_proper_noun`). Which words are common words is a
property of the language: "Island" is Iceland's own name in German. So the rule only
applies where kgprobe ships a word list for the run's language; for any other language
every name matches as before.

The English list (``data/common_words.en.txt.gz``) is the lower-case entries of SCOWL's
size-50 American English list (Debian ``wamerican`` 2020.12.07, ``/usr/share/dict/american-
english``; copyright and licence in ``data/common_words.en.COPYRIGHT``), words of two letters
or more; a tab and ``+`` mark words the same list also holds capitalized, as a proper noun
("china" / "China"). It is data shipped with kgprobe: nothing is needed at run time.
"""

from __future__ import annotations

import gzip
import re
from functools import lru_cache
from importlib import resources

#: Languages with a shipped common-word list (the proper-noun rule applies to them only).
LEXICON_LANGUAGES = ("en",)

#: Nouns for places that a demonym locates: "a Brazilian city" names Brazil. Per language.
PLACE_NOUNS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "city town village municipality island islands region province state prefecture district "
        "county port capital country nation territory settlement commune suburb neighborhood "
        "neighbourhood locality place metropolis resort harbour harbor seaport borough parish "
        "department canton archipelago coast peninsula".split()
    ),
}

#: Verbs after which a demonym is said of the subject: "Yugawara is Japanese".
COPULAS: dict[str, frozenset[str]] = {"en": frozenset({"is", "are", "was", "were"})}


def base_language(lang: str | None) -> str:
    """"en-GB" -> "en"; None or "" -> "en" (the language kgprobe's prompts are written in)."""
    return (lang or "en").split("-")[0].split("_")[0].casefold()


def common_words(lang: str | None) -> dict[str, bool] | None:
    """Common words of a language: lower-case word -> whether it is also a proper noun.

    None for a language without a shipped list (then no name is treated as a common word).
    """
    return _load_words(base_language(lang))


@lru_cache(maxsize=8)
def _load_words(lang: str) -> dict[str, bool] | None:
    if lang not in LEXICON_LANGUAGES:
        return None
    raw = resources.files("kgprobe.probes").joinpath(f"data/common_words.{lang}.txt.gz").read_bytes()
    words: dict[str, bool] = {}
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        word, _, mark = line.partition("\t")
        words[word] = mark == "+"
    return words


def is_common_name(normalized: str, lang: str) -> bool:
    """True when every word of a normalized name is a common word of ``lang``."""
    words = common_words(lang)
    return bool(words) and bool(normalized) and all(w in words for w in normalized.split())


_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n])[\s\"'“‘(\[*_-]*$")


def case_is_informative(raw: str, lang: str = "en") -> bool:
    """Capitals say something only in a text that does not capitalize every word.

    In "OMAEZAKI IS A JAPANESE ISLAND" or the Title Case line "Omaezaki Is A Japanese
    Island" every word is capitalized, so a capital is no evidence of a proper noun. A text
    of names only ("In Heqiao, China.") is not Title Case: it has no capitalized common
    word after a sentence start.
    """
    words = list(re.finditer(r"[^\W\d_]{2,}", raw))
    if any(m.group(0)[0].islower() for m in words):
        return True
    if not any(ch.islower() for m in words for ch in m.group(0)):
        return not words
    common = common_words(lang) or {}
    return not any(common.get(m.group(0).casefold()) is False and not _SENTENCE_START.search(raw[: m.start()])
                   for m in words)


def reads_as_proper_noun(raw: str, start: int, lang: str, end: int | None = None) -> bool:
    """Is the common-word name written at ``raw[start:end]`` a proper noun of its own?

    It is when its first letter is a capital in a text whose case is informative, and the
    capital is not just the one every sentence starts with — unless the word list also
    knows the word as a proper noun ("China is …", "Turkey is …" read as the countries;
    "Island is …" does not read as Iceland). A capitalized word joined to another
    capitalized word (only spaces between, the other not at a sentence start) is part of a
    longer name: "Hokkaido Island", "Rhode Island" and "a Japanese Island" do not name
    Iceland.
    """
    if not raw[start : start + 1].isupper() or not case_is_informative(raw, lang):
        return False
    before = re.search(r"([^\W\d_]+)[ \t]+$", raw[:start])
    if before and before.group(1)[0].isupper() and not _SENTENCE_START.search(raw[: before.start(1)]):
        return False
    if end is not None and re.match(r"[ \t]+[^\W\d_]*[A-Z]", raw[end:]):
        return False
    if _SENTENCE_START.search(raw[:start]):
        first = re.match(r"[^\W\d_]+", raw[start:])
        words = common_words(lang) or {}
        return bool(first) and words.get(first.group(0).casefold(), False)
    return True
