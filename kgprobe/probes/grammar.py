"""Questions for any predicate: a small English grammar over the predicate's label.

The hand-written templates (``data/templates.json``) cover the predicates of the embedded
KGs. Every other predicate — a Wikidata property of a user's subgraph, or a label in a
user's TSV file — gets templates built here from three things the KG holds:

* the **label** (and its aliases), read for its shape:

  ============================  =====================================  ==========================
  shape                         example label                          wh-question
  ============================  =====================================  ==========================
  relational noun               author, element symbol, capital        Who is the author of {s}?
  noun + "of" (inverse)         capital of, part of, member of         What is {s} the capital of?
  participle + "by" (passive)   founded by, written by                 Who was {s} founded by?
  participle/adjective + prep.  located in, twinned with, named after  What is {s} located in?
  verb (+ preposition)          flows into, shares border with         What does {s} flow into?
  "number of" + noun            number of moons                        How many moons does {s} have?
  ============================  =====================================  ==========================

* the **kind of object** (:func:`object_kind`): people → *who*, places → *what* /
  *which place* (*where* for events: "Where was {s} born?"), dates → *when* ("When was
  {s} born?") or "What is the date of birth of {s}?", quantities → *how many* / *what
  number*, anything else → *what*. The kind comes from the objects themselves (dates and
  numbers are recognised by their labels, people and places by the entity group the KG
  builder assigns), then from words of the label and of the predicate's description.
* **symmetric** predicates (the KG holds most edges in both directions, or Wikidata marks
  the property symmetric: spouse, sibling, shares border with, …) get the yes/no
  question with subject and object swapped as an extra phrasing.

Agent nouns with a known verb ("author" → wrote, "composer" → composed) and event nouns
("date of birth" → "When was {s} born?") add paraphrases. Quoting the label is never
needed: a label that fits no shape is used as a relational noun ("What is the twinned
with of …" cannot happen, since "twinned with" is a participle + preposition).
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from dataclasses import dataclass

from kgprobe.kg.graph import KnowledgeGraph

OBJECT_KINDS = ("person", "place", "date", "quantity", "thing")

_PREPOSITIONS = {
    "with", "in", "into", "to", "from", "on", "at", "for", "after", "as", "onto", "upon", "within",
    "near", "under", "over", "about", "against", "through", "towards", "toward", "via",
}

#: Agent noun -> (base verb, past tense) for "Who wrote {s}?" / "Did {o} write {s}?".
_AGENT_VERBS = {
    "author": ("write", "wrote"),
    "writer": ("write", "wrote"),
    "composer": ("compose", "composed"),
    "creator": ("create", "created"),
    "painter": ("paint", "painted"),
    "director": ("direct", "directed"),
    "founder": ("found", "founded"),
    "architect": ("design", "designed"),
    "designer": ("design", "designed"),
    "developer": ("develop", "developed"),
    "discoverer": ("discover", "discovered"),
    "inventor": ("invent", "invented"),
    "illustrator": ("illustrate", "illustrated"),
    "sculptor": ("sculpt", "sculpted"),
    "translator": ("translate", "translated"),
    "publisher": ("publish", "published"),
    "producer": ("produce", "produced"),
    "librettist": ("write the libretto of", "wrote the libretto of"),
    "lyricist": ("write the lyrics of", "wrote the lyrics of"),
    "screenwriter": ("write the screenplay of", "wrote the screenplay of"),
}

#: Event noun -> (auxiliary, participle or base verb) for "When was {s} born?", "Where did {s} die?".
_EVENTS = {
    "birth": ("was", "born"),
    "death": ("did", "die"),
    "burial": ("was", "buried"),
    "baptism": ("was", "baptized"),
    "publication": ("was", "published"),
    "founding": ("was", "founded"),
    "foundation": ("was", "founded"),
    "establishment": ("was", "established"),
    "formation": ("was", "formed"),
    "discovery": ("was", "discovered"),
    "creation": ("was", "created"),
    "completion": ("was", "completed"),
    "release": ("was", "released"),
    "dissolution": ("was", "dissolved"),
}

#: Participles that do not end in -ed.
_IRREGULAR_PARTICIPLES = {
    "born", "written", "known", "made", "built", "drawn", "sung", "given", "taken", "held", "led", "won",
    "shown", "worn", "found", "sold", "told", "run", "begun", "set", "spoken", "bound", "kept", "said",
}
#: Participle -> past tense where they differ ("Who wrote {s}?" from "written by").
_IRREGULAR_PAST = {"written": "wrote", "drawn": "drew", "sung": "sang", "given": "gave", "taken": "took",
                   "shown": "showed", "begun": "began", "spoken": "spoke", "known": "knew"}
#: Participles whose "by" names a person: "founded by", "written by", "painted by".
_AGENTIVE_PARTICIPLES = {"written", "composed", "created", "painted", "directed", "designed", "developed",
                         "discovered", "invented", "illustrated", "founded", "authored", "sculpted",
                         "translated", "performed", "narrated", "edited", "drawn", "sung", "killed",
                         "assassinated", "commissioned", "conducted", "choreographed", "photographed"}
#: Adjectives that head relational labels like participles ("adjacent to", "different from").
_ADJECTIVES = {"adjacent", "different", "similar", "equivalent", "opposite", "next", "close", "parallel",
               "native", "endemic", "related", "subject", "contemporary", "identical"}

# Words of a label or description that tell the kind of object.
_PERSON_WORDS = {
    "author", "writer", "composer", "creator", "painter", "director", "founder", "architect", "designer",
    "discoverer", "inventor", "illustrator", "sculptor", "translator", "father", "mother", "parent", "child",
    "son", "daughter", "spouse", "wife", "husband", "sibling", "brother", "sister", "partner", "student",
    "teacher", "doctoral", "advisor", "head", "leader", "chairperson", "president", "monarch", "king", "queen",
    "ruler", "mayor", "governor", "owner", "employee", "member", "librettist", "lyricist", "screenwriter",
    "performer", "singer", "actor", "cast", "coach", "captain", "winner", "person", "human", "people",
    "relative", "successor", "predecessor", "heir", "editor", "narrator", "conductor", "presenter",
}
_PLACE_WORDS = {
    "capital", "place", "location", "located", "country", "city", "continent", "headquarters", "mouth",
    "birthplace", "residence", "origin", "seat", "region", "territory", "state", "province", "county",
    "district", "municipality", "town", "village", "island", "where", "area", "site", "source", "basin",
    "border", "neighbour", "neighbor", "terminus", "destination", "venue",
}
_DATE_WORDS = {"date", "time", "year", "day", "when", "inception", "birthday", "anniversary", "period"}
_QUANTITY_WORDS = {"number", "population", "count", "height", "length", "width", "area", "mass", "weight",
                   "elevation", "depth", "age", "speed", "temperature", "quantity", "amount", "size",
                   "volume", "duration", "distance", "diameter", "radius", "density", "score", "rank"}

#: Wikidata properties that are symmetric (instances of "symmetric Wikidata property").
SYMMETRIC_PROPERTIES = {"P47", "P26", "P3373", "P190", "P530", "P1327", "P197", "P461", "P1889", "P460", "P2789"}


@dataclass(frozen=True)
class Grammar:
    """Generated templates of one predicate, and why they look the way they do."""

    hgp: tuple[str, ...]
    wh: tuple[str, ...]
    yes_no: tuple[str, ...]
    kind: str
    """The object kind the wh-word was chosen for (one of :data:`OBJECT_KINDS`)."""
    shape: str
    """How the label was read: noun, inverse-noun, passive, participle, verb, count."""
    symmetric: bool


def clean_label(label: str) -> str:
    """A label as words: "date_of_birth" / "dateOfBirth" -> "date of birth"; "(s)" dropped."""
    camel = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", label.strip())
    if camel != label.strip() and " " not in label.strip():
        # "birthPlace" -> "birth place" (acronyms such as "ISBN" keep their case)
        camel = " ".join(w if w[1:2].isupper() else w.lower() for w in camel.split())
    text = camel.replace("_", " ").replace("(s)", "")
    text = re.sub(r"\s+", " ", text).strip()
    # Lower-case a label whose words are all capitalised ("Date Of Birth"), keep acronyms ("ISBN-13").
    if text and all(w[:1].isupper() and not w[1:2].isupper() for w in text.split()):
        text = text.lower()
    return text


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _verb_base(word: str) -> str:
    """Third person singular -> base form: shares -> share, flows -> flow, has -> have."""
    if word == "has":
        return "have"
    if word == "does":
        return "do"
    if word == "goes":
        return "go"
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z)es$", word):
        return word[:-2]
    return word[:-1]


def _is_participle(word: str) -> bool:
    return word.endswith("ed") or word in _IRREGULAR_PARTICIPLES


def _looks_like_verb(words: list[str]) -> bool:
    """"flows into", "shares border with", "contains": a third-person verb first."""
    first = words[0]
    if not first.endswith("s") or first.endswith("ss") or first.endswith("us") or len(first) < 4:
        return first == "has"
    # A plural noun can head a label too ("characters"); a verb is followed by a preposition
    # or a noun and a preposition, or stands alone only when it is a common relation verb.
    if len(words) >= 2 and (words[1] in _PREPOSITIONS or (len(words) >= 3 and words[-1] in _PREPOSITIONS)):
        return True
    return first in {"contains", "includes", "replaces", "follows", "uses", "depicts", "affects", "owns",
                     "borders", "produces", "precedes", "succeeds", "supports", "operates", "drains"}


def shape_of(label: str) -> str:
    words = label.split()
    if not words:
        return "noun"
    if label.startswith("number of ") and len(words) > 2:
        return "count"
    if len(words) >= 2 and words[-1] == "of" and not _is_participle(words[0]) and words[0] not in _ADJECTIVES:
        return "inverse-noun"
    if len(words) >= 2 and words[-1] == "by" and _is_participle(words[-2]):
        return "passive"
    if words[0] == "has" or _looks_like_verb(words):
        return "verb"
    if len(words) >= 2 and words[-1] in _PREPOSITIONS | {"of"} and (
        _is_participle(words[0]) or words[0] in _ADJECTIVES
    ):
        return "participle"
    return "noun"


# -- the kind of object --------------------------------------------------------------------


def _label_kind(text: str) -> str | None:
    words = set(re.findall(r"[a-z]+", text.lower()))
    if words & _DATE_WORDS:
        return "date"
    if words & _QUANTITY_WORDS and not words & {"place"}:
        return "quantity"
    if words & _PERSON_WORDS:
        return "person"
    if words & _PLACE_WORDS:
        return "place"
    return None


_PERSON_GROUPS = {"human", "person"}
_PLACE_GROUPS = {"country", "city", "continent", "region", "settlement", "state", "county", "place"}


def object_kind(kg: KnowledgeGraph, predicate: str) -> str:
    """The kind of object ``predicate`` takes: person, place, date, quantity or thing.

    Evidence, strongest first: the objects' labels (most of them dates → date, numbers →
    quantity), their entity groups (human → person; country, city… → place), the words of
    the predicate's label and aliases, then of its description.
    """
    from kgprobe.probes.verify import canonical_dates, is_number_like

    objects = [kg.entity(kg.entity_id(int(o))) for o in kg.objects[kg.edges_of_predicate(predicate)]]
    objects = list({e.id: e for e in objects}.values())
    pred = kg.predicates.get(predicate)
    label = clean_label(pred.label) if pred else predicate
    if objects:
        n = len(objects)
        dates = sum(bool(canonical_dates(e.label)) for e in objects)
        numbers = sum(is_number_like(e.label) for e in objects)
        if dates > n / 2:
            return "date"
        if numbers > n / 2:
            # a bare year is a number; the label says whether the number is a date
            return "date" if _label_kind(label) == "date" else "quantity"
        groups = Counter(e.group for e in objects if e.group)
        if groups:
            group, count = groups.most_common(1)[0]
            if count > n / 2 and group in _PERSON_GROUPS:
                return "person"
            if count > n / 2 and group in _PLACE_GROUPS:
                return "place"
    words = label.split()
    if len(words) >= 2 and words[-1] == "by" and words[-2] in _AGENTIVE_PARTICIPLES:
        return "person"
    for text in ([label, *(clean_label(a) for a in pred.aliases)] if pred else [label]):
        kind = _label_kind(text)
        if kind is not None:
            return kind
    if pred and pred.description:
        kind = _label_kind(pred.description)
        if kind is not None:
            return kind
    return "thing"


def is_symmetric(kg: KnowledgeGraph, predicate: str) -> bool:
    """Wikidata marks it symmetric, or the KG holds most of its edges in both directions."""
    if predicate in SYMMETRIC_PROPERTIES:
        return True
    edges = kg.edges_of_predicate(predicate)
    if len(edges) < 2:
        return False
    pairs = set(zip(kg.subjects[edges].tolist(), kg.objects[edges].tolist()))
    both = sum((o, s) in pairs for s, o in pairs)
    return both >= 2 and both > len(pairs) / 2


def is_multi_valued(kg: KnowledgeGraph, predicate: str) -> bool:
    """More true objects than subjects: "an official language of", not "the capital of"."""
    edges = kg.edges_of_predicate(predicate)
    if len(edges) == 0:
        return False
    return len(edges) > len(set(kg.subjects[edges].tolist())) * 1.2


# -- the templates ------------------------------------------------------------------------

_WH_WORD = {"person": "Who", "place": "What", "date": "What", "quantity": "What", "thing": "What"}


def _swap(template: str) -> str:
    return template.replace("{subject}", "\0").replace("{object}", "{subject}").replace("\0", "{object}")


def _fronted(words: list[str], kind: str, clause: str) -> str:
    """The preposition moved to the front: "Into what does {subject} flow?"."""
    what = {"person": "whom", "place": "which place"}.get(kind, "what")
    return f"{words[-1].capitalize()} {what} {clause}?"


def _event(label: str) -> tuple[str, str, str] | None:
    """("birth", aux, verb) for "date of birth", "birth date", "place of birth", "birthplace"."""
    m = re.fullmatch(r"(?:date|time|place|location|year|day) of (\w+)|(\w+) (?:date|time|place|location|year|day)",
                     label)
    word = (m.group(1) or m.group(2)) if m else ("birth" if label == "birthplace" else None)
    if word in _EVENTS:
        return (word, *_EVENTS[word])
    return None


def _noun_templates(label: str, kind: str, multi: bool) -> tuple[list, list, list]:
    wh_word = _WH_WORD[kind]
    det = _article(label) if multi else "the"
    nouns = [label]
    wh: list[str] = []
    yes_no: list[str] = []
    hgp = [f"The {label} of {{subject}} is", f"{{subject}}'s {label} is"]
    event = _event(label)
    if event and kind in ("date", "place"):
        _, aux, verb = event
        question = "When" if kind == "date" else "Where"
        wh.append(f"{question} {aux} {{subject}} {verb}?")
        prep = "on" if kind == "date" else "in"
        if aux == "was":
            yes_no.append(f"Was {{subject}} {verb} {prep} {{object}}?")
            hgp.insert(0, f"{{subject}} was {verb} {prep}")
        else:
            yes_no.append(f"Did {{subject}} {verb} {prep} {{object}}?")
            hgp.insert(0, f"{{subject}} {'died' if verb == 'die' else verb + 'ed'} {prep}")
    head = label.split()[0]
    agent = _AGENT_VERBS.get(head) if kind == "person" or head in _AGENT_VERBS else None
    if agent and len(label.split()) == 1:
        base, past = agent
        wh.insert(0, f"Who is the {label} of {{subject}}?")
        wh.append(f"Who {past} {{subject}}?")
        yes_no += [f"Is {{object}} the {label} of {{subject}}?", f"Did {{object}} {base} {{subject}}?"]
    for noun in nouns:
        wh.append(f"{wh_word} is the {noun} of {{subject}}?")
        yes_no.append(f"Is {{object}} {det} {noun} of {{subject}}?")
    if kind == "place" and "place" not in label:
        wh.append(f"Which place is the {label} of {{subject}}?")
    elif kind == "date" and not event:
        wh.append(f"On what date is the {label} of {{subject}}?" if "date" in label
                  else f"When is the {label} of {{subject}}?")
    elif kind == "quantity":
        wh.append(f"What number is the {label} of {{subject}}?")
    elif kind == "thing":
        wh.append(f"What is {{subject}}'s {label}?")
    elif kind == "person":
        wh.append(f"Who is {{subject}}'s {label}?")
    yes_no.append(f"Is the {label} of {{subject}} {{object}}?")
    return hgp, wh, yes_no


_CACHE: "weakref.WeakKeyDictionary[KnowledgeGraph, dict[str, Grammar]]" = weakref.WeakKeyDictionary()


def grammar_for(kg: KnowledgeGraph, predicate: str) -> Grammar:
    """Templates for ``predicate`` built from its label, aliases, description and objects.

    Cached per KG (a KG never changes once built), since every probe asks for them.
    """
    per_kg = _CACHE.setdefault(kg, {})
    if predicate not in per_kg:
        per_kg[predicate] = _build(kg, predicate)
    return per_kg[predicate]


#: Aliases used for extra phrasings ("alias swap"), in the order the KG lists them.
MAX_ALIASES = 3


def _build(kg: KnowledgeGraph, predicate: str) -> Grammar:
    pred = kg.predicates.get(predicate)
    raw = pred.label if pred else predicate
    label = clean_label(raw) or predicate
    aliases = [clean_label(a) for a in (pred.aliases if pred else ()) if clean_label(a)]
    kind = object_kind(kg, predicate) if pred else "thing"
    multi = is_multi_valued(kg, predicate) if pred else False
    symmetric = is_symmetric(kg, predicate) if pred else False
    shape = shape_of(label)
    hgp, wh, yes_no = _templates(label, kind, multi, shape)
    # Alias swap: each alias read by its own shape adds its most natural wh and yes/no question
    # ("empties into" of "mouth of the watercourse": "What does {s} empty into?").
    for alias in [a for a in dict.fromkeys(aliases) if a.casefold() != label.casefold()][:MAX_ALIASES]:
        _, a_wh, a_yes_no = _templates(alias, kind, multi, shape_of(alias))
        wh, yes_no = wh + a_wh[:1], yes_no + a_yes_no[:1]
    if symmetric:
        yes_no = yes_no + [_swap(t) for t in yes_no if "{subject}" in t and "{object}" in t][:2]
    return Grammar(
        tuple(dict.fromkeys(hgp)), tuple(dict.fromkeys(wh)), tuple(dict.fromkeys(yes_no)), kind, shape, symmetric
    )


def _templates(label: str, kind: str, multi: bool, shape: str) -> tuple[list, list, list]:
    """(hgp, wh, yes/no) templates of one label read as ``shape``."""
    words = label.split()
    wh_word = _WH_WORD[kind]
    which = {"person": "Who", "place": "Which place", "date": "When", "quantity": "What number",
             "thing": "What"}[kind]
    if shape == "count":
        rest = label[len("number of "):]
        hgp = [f"The number of {rest} of {{subject}} is", "{subject} has"]
        wh = [f"How many {rest} does {{subject}} have?", f"What is the number of {rest} of {{subject}}?"]
        yes_no = [f"Does {{subject}} have {{object}} {rest}?", f"Is the number of {rest} of {{subject}} {{object}}?"]
    elif shape == "inverse-noun":
        noun = " ".join(words[:-1])
        det = "" if noun in ("part", "subclass") else ("the " if not multi else _article(noun) + " ")
        hgp = [f"{{subject}} is {det}{noun} of"]
        wh = [f"{wh_word} is {{subject}} {det}{noun} of?"]
        if which != wh_word:
            wh.append(f"{which} is {{subject}} {det}{noun} of?")
        wh.append(f"{{subject}} is {det}{noun} of {'whom' if kind == 'person' else 'what'}?")
        yes_no = [f"Is {{subject}} {det}{noun} of {{object}}?"]
    elif shape == "passive":
        participle = " ".join(words[:-1])
        who = "Who" if kind == "person" else "What"
        hgp = [f"{{subject}} was {participle} by"]
        whom = "whom" if kind == "person" else "what"
        wh = [f"{who} was {{subject}} {participle} by?", f"By {whom} was {{subject}} {participle}?"]
        if len(words) == 2 and (words[0].endswith("ed") or words[0] in _IRREGULAR_PAST):
            # the active voice reads best: "Who founded Microsoft?"
            wh.insert(0, f"{who} {_IRREGULAR_PAST.get(words[0], words[0])} {{subject}}?")
        yes_no = [f"Was {{subject}} {participle} by {{object}}?"]
    elif shape == "participle":
        hgp = [f"{{subject}} is {label}"]
        wh = [f"{wh_word} is {{subject}} {label}?"]
        if which not in (wh_word, "When", "What number"):
            wh.append(f"{which} is {{subject}} {label}?")
        yes_no = [f"Is {{subject}} {label} {{object}}?"]
        wh.append(_fronted(words, kind, "is {subject} " + " ".join(words[:-1])))
    elif shape == "verb":
        base = _verb_base(words[0])
        rest = " ".join(words[1:])
        phrase = f"{base} {rest}".strip()
        hgp = [f"{{subject}} {label}"]
        if words[0] == "has" and rest and rest.split()[-1] not in _PREPOSITIONS:
            wh = [f"What {rest} does {{subject}} have?", f"Which {rest} does {{subject}} have?"]
            art = _article(rest)
            yes_no = [f"Does {{subject}} have {{object}} as {art} {rest}?", f"Is {{object}} {art} {rest} of {{subject}}?"]
        else:
            wh = [f"{wh_word} does {{subject}} {phrase}?"]
            if which not in (wh_word, "When", "What number"):
                wh.append(f"{which} does {{subject}} {phrase}?")
            yes_no = [f"Does {{subject}} {phrase} {{object}}?"]
            if len(words) >= 2 and words[-1] in _PREPOSITIONS:
                wh.append(_fronted(words, kind, "does {subject} " + " ".join([base, *words[1:-1]])))
    else:
        hgp, wh, yes_no = _noun_templates(label, kind, multi)
    return hgp, wh, yes_no
