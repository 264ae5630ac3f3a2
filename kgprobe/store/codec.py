"""How a run file encodes what it holds: canonical JSON, the KG, model requests and
responses, and PKG states as keyframes and deltas."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from typing import Any, Sequence

import numpy as np

from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult


def compact_json(obj: Any) -> str:
    # What json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)
    # returns, without building a new encoder on every call (a round makes thousands).
    return _ENCODER.encode(obj)


def _json_default(obj: Any):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return str(obj)


def kg_to_dict(kg: KnowledgeGraph) -> dict:
    """A JSON-able dict that :func:`kg_from_dict` turns back into an equal graph."""
    return {
        "name": kg.name,
        "metadata": kg.metadata,
        "entities": [
            [e.id, e.label, list(e.aliases), e.description, e.is_literal, e.group]
            for e in kg.entities.values()
        ],
        # the description is appended only when there is one, so older run files read the same
        "predicates": [[p.id, p.label, list(p.aliases)] + ([p.description] if p.description else [])
                       for p in kg.predicates.values()],
        "subjects": kg.subjects.tolist(),
        "predicate_of": kg.predicate_of.tolist(),
        "objects": kg.objects.tolist(),
        "active": kg.active.astype(int).tolist(),
        "candidates": {p: list(c) for p, c in kg.explicit_candidates.items()},
    }


def kg_from_dict(d: dict) -> KnowledgeGraph:
    entities = [
        Entity(i, label, tuple(aliases), description, bool(lit), group)
        for i, label, aliases, description, lit, group in d["entities"]
    ]
    predicates = [Predicate(p[0], p[1], tuple(p[2]), p[3] if len(p) > 3 else "") for p in d["predicates"]]
    eids = [e.id for e in entities]
    pids = [p.id for p in predicates]
    triples = [
        Triple(eids[s], pids[p], eids[o], bool(a))
        for s, p, o, a in zip(d["subjects"], d["predicate_of"], d["objects"], d["active"])
    ]
    return KnowledgeGraph(
        entities, predicates, triples, candidates=d["candidates"], name=d["name"], metadata=d["metadata"]
    )


def kg_fingerprint(kg: KnowledgeGraph) -> str:
    """SHA-256 of the graph's canonical JSON: equal fingerprints, equal graphs and edge order."""
    return hashlib.sha256(compact_json(kg_to_dict(kg)).encode()).hexdigest()


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_json_default)

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def request_to_json(req: ScoreRequest | GenerateRequest) -> dict:
    """The request's fields as a dict, equal to ``dataclasses.asdict`` for these flat
    requests (their fields are strings, numbers and tuples of strings): the canonical
    form whose ``compact_json`` text :func:`requests_json` writes, and the request hash covers."""
    return {name: getattr(req, name) for name in _field_names(type(req))}


def requests_sha(requests: Sequence[ScoreRequest | GenerateRequest], *, texts: Sequence[str] | None = None) -> str:
    """SHA-256 over the canonical JSON of a request list (order matters); ``texts``: the
    requests already through :func:`requests_json`."""
    if texts is None:
        texts = requests_json(requests)
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode())
        h.update(b"\n")
    return h.hexdigest()


def requests_json(requests: Sequence[ScoreRequest | GenerateRequest]) -> list[str]:
    """``compact_json(request_to_json(r))`` of every request, the same text, faster: the object is
    written field by field (sorted names, each value through :func:`compact_json`), and a value
    repeated across requests (a fact's context, shared by its 100 options) is encoded once."""
    out = []
    memo: dict[tuple, str] = {}
    heads: dict[type, list[tuple[str, str]]] = {}
    for req in requests:
        fields = heads.get(type(req))
        if fields is None:
            fields = heads[type(req)] = [(name, compact_json(name) + ":") for name in sorted(_field_names(type(req)))]
        parts = []
        for name, head in fields:
            value = getattr(req, name)
            if isinstance(value, str) and len(value) > 32:
                key = (value,)
                text = memo.get(key)
                if text is None:
                    text = memo[key] = compact_json(value)
            else:
                text = compact_json(value)
            parts.append(head + text)
        out.append("{" + ",".join(parts) + "}")
    return out


def response_to_json(resp: ScoreResult | str):
    if isinstance(resp, ScoreResult):
        return {"lp": list(resp.token_logprobs), "g": bool(resp.is_greedy)}
    return resp


def response_from_json(obj) -> ScoreResult | str:
    if isinstance(obj, dict):
        return ScoreResult(tuple(float(x) for x in obj["lp"]), bool(obj["g"]))
    return obj


def pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def unpack_arrays(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def state_delta(prev: dict[str, np.ndarray], cur: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """Changed entries of ``cur`` relative to ``prev``; None when a full snapshot is needed."""
    if set(prev) != set(cur):
        return None
    out: dict[str, np.ndarray] = {}
    for key, value in cur.items():
        a, b = np.asarray(prev[key]), np.asarray(value)
        if a.shape != b.shape or a.dtype != b.dtype or b.ndim != 1:
            if a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True):
                continue
            out["full:" + key] = b
            continue
        same = (a == b) | (np.isnan(a) & np.isnan(b)) if b.dtype.kind == "f" else a == b
        changed = np.flatnonzero(~same)
        out["idx:" + key] = changed.astype(np.int64)
        out["val:" + key] = b[changed]
    return out


def apply_delta(prev: dict[str, np.ndarray], delta: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    state = {k: np.array(v, copy=True) for k, v in prev.items()}
    for name, value in delta.items():
        kind, key = name.split(":", 1)
        if kind == "full":
            state[key] = value
        elif kind == "idx":
            state[key][value] = delta["val:" + key]
    return state
