"""KG files: kgprobe's own versioned JSONL format, plus plain triple files and N-Triples.

kgprobe KG file (format version 1), one JSON object per line, UTF-8, optionally gzip
(``.gz`` suffix):

1. header: ``{"kgprobe_kg": 1, "name": str, "metadata": {...},
   "counts": {"entities": E, "predicates": P, "edges": N, "candidates": C}}``
2. ``P`` lines ``{"type": "predicate", "id": "P36", "label": "capital", "aliases": [...]}``
   (plus an optional ``"description"``, written when the source had one)
3. ``E`` lines ``{"type": "entity", "id": "Q142", "label": "France", "aliases": [...],
   "description": "...", "literal": false, "group": "country"}``
4. ``N`` lines ``{"type": "edge", "s": "Q142", "p": "P36", "o": "geonames:2988507",
   "active": true}`` — edge ``j`` is the ``j``-th edge line;
5. ``C`` lines ``{"type": "candidates", "predicate": "P36", "objects": [ids...]}``
6. footer ``{"type": "end"}``.

Ids follow :mod:`kgprobe.sources.rdf` (``Q142``, ``geonames:N``, ``kgprobe:…``, literals in
N-Triples form). The counts and the footer let :func:`load_kg` reject a truncated file.
A reader refuses files whose version is newer than :data:`FORMAT_VERSION`.

:func:`load_kg` also reads, by suffix (``.gz`` allowed):

* ``.nt`` — N-Triples (Wikidata-shaped: labels, aliases, descriptions, ``wdt:`` claims);
* ``.tsv`` / ``.txt`` — ``subject<TAB>predicate<TAB>object[<TAB>active]`` per line, names
  used as ids and labels; an optional first line ``subject predicate object``;
* ``.jsonl`` without a kgprobe header — ``{"subject": .., "predicate": .., "object": ..}``
  per line (``s``/``p``/``o`` also accepted, optional ``active``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tempfile
from pathlib import Path

from kgprobe.errors import InputError, KgprobeError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple

#: Version written by :func:`save_kg`; :func:`load_kg` reads this and older versions.
FORMAT_VERSION = 1
HEADER_KEY = "kgprobe_kg"


def _open_text(path: Path, mode: str):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def save_kg(kg: KnowledgeGraph, path: str | os.PathLike) -> Path:
    """Write ``kg`` to ``path`` in the kgprobe KG format (gzip if it ends in ``.gz``).

    The file is written to a temporary file in the same directory and renamed into
    place, so ``path`` is either the old file or the complete new one, never partial.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write the KG to {path}: it is a directory; give a file name")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write the KG to {path}: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; a KG file is ordinary data
    candidates = kg.explicit_candidates
    try:
        with open(tmp, "wb") as fobj:
            raw = gzip.GzipFile(fileobj=fobj, mode="wb", mtime=0, filename="") if path.suffix == ".gz" else fobj
            out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            _write_records(kg, out, candidates)
            out.flush()
            out.detach()
            if raw is not fobj:
                raw.close()
            fobj.flush()
            os.fsync(fobj.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _write_records(kg: KnowledgeGraph, out, candidates) -> None:
    def line(obj) -> None:
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")

    line(
        {
            HEADER_KEY: FORMAT_VERSION,
            "name": kg.name,
            "metadata": kg.metadata,
            "counts": {
                "entities": kg.num_entities,
                "predicates": len(kg.predicates),
                "edges": kg.num_edges,
                "candidates": len(candidates),
            },
        }
    )
    for p in kg.predicates.values():
        rec = {"type": "predicate", "id": p.id, "label": p.label, "aliases": list(p.aliases)}
        if p.description:  # optional field: files without it read as before
            rec["description"] = p.description
        line(rec)
    for e in kg.entities.values():
        line(
            {
                "type": "entity",
                "id": e.id,
                "label": e.label,
                "aliases": list(e.aliases),
                "description": e.description,
                "literal": e.is_literal,
                "group": e.group,
            }
        )
    for s, p, o, a in zip(
        kg.subjects.tolist(), kg.predicate_of.tolist(), kg.objects.tolist(), kg.active.tolist()
    ):
        line({"type": "edge", "s": kg.entity_id(s), "p": kg.predicate_id(p), "o": kg.entity_id(o), "active": a})
    for pid, objs in candidates.items():
        line({"type": "candidates", "predicate": pid, "objects": list(objs)})
    line({"type": "end"})


def load_kg(path: str | os.PathLike) -> KnowledgeGraph:
    """Read a KG file: kgprobe JSONL, N-Triples (``.nt``), TSV (``.tsv``/``.txt``) or
    plain JSONL triples; ``.gz`` compression allowed. Malformed input raises
    :class:`~kgprobe.errors.InputError` naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"KG file {path} does not exist; build one with `kgprobe build` or check the path")
    if path.is_dir():
        raise InputError(f"KG file {path} is a directory, not a file")
    stem_suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    try:
        if stem_suffix == ".nt":
            return _load_ntriples(path)
        if stem_suffix in (".tsv", ".txt"):
            return _load_tsv(path)
        return _load_jsonl(path)
    except KgprobeError:
        raise
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read KG file {path}: {exc}") from None


def _bad(path: Path, lineno: int, what: str) -> InputError:
    return InputError(f"malformed KG file {path}, line {lineno}: {what}")


def _load_jsonl(path: Path) -> KnowledgeGraph:
    with _open_text(path, "rt") as fh:
        first = fh.readline()
        if not first.strip():
            raise InputError(f"KG file {path} is empty")
        try:
            head = json.loads(first)
        except json.JSONDecodeError as exc:
            raise _bad(path, 1, f"not JSON ({exc.msg}); expected a kgprobe KG header or a triple object") from None
        if isinstance(head, dict) and HEADER_KEY in head:
            return _load_native(path, head, fh)
        return _load_plain_jsonl(path, head, fh)


def _load_native(path: Path, head: dict, fh) -> KnowledgeGraph:
    version = head[HEADER_KEY]
    if not isinstance(version, int) or version < 1:
        raise _bad(path, 1, f"format version {version!r} is not a positive integer")
    if version > FORMAT_VERSION:
        raise InputError(
            f"KG file {path} uses format version {version}, newer than this kgprobe reads "
            f"(up to {FORMAT_VERSION}); upgrade kgprobe (pip install -U kgprobe) or rebuild the KG"
        )
    counts = head.get("counts") or {}
    entities, predicates, triples, candidates = [], [], [], {}
    ended = False
    lineno = 1
    for lineno, raw in enumerate(fh, start=2):
        if not raw.strip():
            continue
        if ended:
            raise _bad(path, lineno, "content after the end marker")
        try:
            rec = json.loads(raw)
            kind = rec["type"]
            if kind == "entity":
                entities.append(
                    Entity(
                        str(rec["id"]), str(rec["label"]), tuple(rec.get("aliases", ())),
                        rec.get("description", ""), bool(rec.get("literal", False)), rec.get("group", ""),
                    )
                )
            elif kind == "predicate":
                predicates.append(
                    Predicate(
                        str(rec["id"]), str(rec["label"]), tuple(rec.get("aliases", ())),
                        str(rec.get("description", "")),
                    )
                )
            elif kind == "edge":
                triples.append(Triple(str(rec["s"]), str(rec["p"]), str(rec["o"]), bool(rec.get("active", True))))
            elif kind == "candidates":
                candidates[str(rec["predicate"])] = [str(x) for x in rec["objects"]]
            elif kind == "end":
                ended = True
            else:
                raise _bad(path, lineno, f"unknown record type {kind!r}")
        except json.JSONDecodeError as exc:
            raise _bad(path, lineno, f"not JSON ({exc.msg}); the file may be truncated or corrupted") from None
        except (KeyError, TypeError) as exc:
            raise _bad(path, lineno, f"record lacks field {exc}") from None
    if not ended:
        raise InputError(
            f"KG file {path} is incomplete (no end marker after line {lineno}): it was truncated "
            "or written by an interrupted program; rebuild it"
        )
    got = {"entities": len(entities), "predicates": len(predicates), "edges": len(triples), "candidates": len(candidates)}
    for key, n in got.items():
        if key in counts and counts[key] != n:
            raise InputError(f"KG file {path} is inconsistent: header says {counts[key]} {key}, file has {n}")
    return KnowledgeGraph(
        entities, predicates, triples, candidates=candidates,
        name=str(head.get("name", "")), metadata=head.get("metadata") or {},
    )


def _plain_graph(path: Path, rows, *, name: str) -> KnowledgeGraph:
    """A KG from (subject, predicate, object, active) name rows: names are ids and labels."""
    if not rows:
        raise InputError(f"KG file {path} holds no triples")
    entities = dict.fromkeys(x for s, _, o, _ in rows for x in (s, o))
    predicates = dict.fromkeys(p for _, p, _, _ in rows)
    return KnowledgeGraph(
        (Entity(e, e) for e in entities),
        (Predicate(p, p) for p in predicates),
        (Triple(s, p, o, a) for s, p, o, a in rows),
        name=path.name.split(".")[0],
        metadata={"source": str(path)},
    )


def _parse_active(path: Path, lineno: int, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "active"):
        return True
    if text in ("0", "false", "no", "dead"):
        return False
    raise _bad(path, lineno, f"active flag {value!r} is not one of 1/0/true/false")


def _load_plain_jsonl(path: Path, first, fh) -> KnowledgeGraph:
    rows = []

    def take(lineno: int, rec) -> None:
        if not isinstance(rec, dict):
            raise _bad(path, lineno, "expected a JSON object with subject, predicate, object")
        try:
            s = rec["subject"] if "subject" in rec else rec["s"]
            p = rec["predicate"] if "predicate" in rec else rec["p"]
            o = rec["object"] if "object" in rec else rec["o"]
        except KeyError as exc:
            raise _bad(path, lineno, f"triple lacks field {exc} (need subject, predicate, object)") from None
        if not all(isinstance(x, str) and x for x in (s, p, o)):
            raise _bad(path, lineno, "subject, predicate and object must be non-empty strings")
        rows.append((s, p, o, _parse_active(path, lineno, rec.get("active", True))))

    take(1, first)
    for lineno, raw in enumerate(fh, start=2):
        if raw.strip():
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise _bad(path, lineno, f"not JSON ({exc.msg})") from None
            take(lineno, rec)
    return _plain_graph(path, rows, name=path.name)


def _load_tsv(path: Path) -> KnowledgeGraph:
    rows = []
    with _open_text(path, "rt") as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if lineno == 1 and [c.strip().lower() for c in cols[:3]] == ["subject", "predicate", "object"]:
                continue
            if len(cols) not in (3, 4) or not all(c.strip() for c in cols[:3]):
                raise _bad(
                    path, lineno,
                    f"expected 3 or 4 tab-separated columns (subject, predicate, object[, active]), got {len(cols)}",
                )
            active = _parse_active(path, lineno, cols[3]) if len(cols) == 4 else True
            rows.append((cols[0].strip(), cols[1].strip(), cols[2].strip(), active))
    return _plain_graph(path, rows, name=path.name)


def _load_ntriples(path: Path) -> KnowledgeGraph:
    import pyoxigraph as ox

    from kgprobe.sources.rdf import Term, kg_from_rdf

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            triples = [
                (Term.from_oxigraph(t.subject), Term.from_oxigraph(t.predicate), Term.from_oxigraph(t.object))
                for t in ox.parse(fh, format=ox.RdfFormat.N_TRIPLES)
            ]
    except SyntaxError as exc:
        raise InputError(f"malformed N-Triples file {path}: {exc}") from None
    kg = kg_from_rdf(triples, name=path.name.split(".")[0], metadata={"source": str(path)})
    if kg.num_edges == 0:
        raise InputError(f"N-Triples file {path} holds no edges (only labels or nothing)")
    return kg
