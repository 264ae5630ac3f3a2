"""Strict checks of every value that reaches a SPARQL query from outside.

Language tags are checked against the BCP 47 syntax (RFC 5646, section 2.1: language
with optional extlang, script, region, variants, extensions and private use; the
grandfathered irregular tags are not accepted). IRIs and literals are checked against
their SPARQL grammar before they are written into a query; everything else kgprobe
puts into a query is a number it formats itself.
"""

from __future__ import annotations

import re

from kgprobe.errors import InputError

_ALNUM = "[A-Za-z0-9]"
_LANGTAG = re.compile(
    r"^(?:"
    r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"  # language (+ extlang)
    r"(?:-[A-Za-z]{4})?"  # script
    r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"  # region
    rf"(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*"  # variants
    rf"(?:-[0-9A-WY-Za-wy-z](?:-{_ALNUM}{{2,8}})+)*"  # extensions
    rf"(?:-[xX](?:-{_ALNUM}{{1,8}})+)?"  # private use
    rf"|[xX](?:-{_ALNUM}{{1,8}})+"  # a private-use tag alone
    r")$"
)
#: Characters an IRIREF may not contain (SPARQL 1.1 grammar, production 139).
_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')
#: A literal as kgprobe writes it: a quoted string with escapes, then @lang or ^^<iri>.
_LITERAL = re.compile(r'^"(?:[^"\\\n\r]|\\["\\nrt])*"(?:@([A-Za-z0-9-]+)|\^\^<([^<>"{}|^`\\\x00-\x20]*)>)?$')


def is_language_tag(tag: str) -> bool:
    """True when ``tag`` is a well-formed BCP 47 language tag."""
    return isinstance(tag, str) and len(tag) <= 64 and bool(_LANGTAG.match(tag))


def check_language_tag(tag: str, what: str = "--lang") -> str:
    """``tag`` if it is a well-formed BCP 47 language tag, else a clear InputError."""
    if not is_language_tag(tag):
        raise InputError(f"{what} {tag!r} is not a language tag (BCP 47, e.g. en, pt-BR, zh-Hans, sr-Latn-RS)")
    return tag


def check_iri(iri: str) -> str:
    """``iri`` if SPARQL can write it as ``<iri>``, else ValueError."""
    if not iri or _IRI_FORBIDDEN.search(iri):
        raise ValueError(f"{iri!r} is not an IRI SPARQL can write (it is empty or has a forbidden character)")
    return iri


def check_literal(text: str) -> str:
    """``text`` if it is a literal in kgprobe's N-Triples form, else ValueError."""
    m = _LITERAL.match(text)
    if not m or (m.group(1) is not None and not is_language_tag(m.group(1))):
        raise ValueError(f"{text[:80]!r} is not a well-formed literal")
    return text
