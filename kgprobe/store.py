"""The run store: one SQLite file per run that never loses a model response.

What a run file holds (format version :data:`FORMAT_VERSION`):

``meta``
    key/value: ``format_version``, ``kgprobe_version``, ``created``, ``config`` (JSON),
    ``model_identity``, ``model_spec``, ``kg_fingerprint``, ``status`` (``running``,
    ``finished``, ``interrupted``) and ``stop_reason``.
``kg``
    the knowledge graph itself (zlib-compressed JSON), so a run file is self-contained:
    reports, ``compare`` and ``resume`` need nothing else.
``responses``
    every request and response of a round, one row per (round, phase) where phase is
    ``score`` or ``generate``, written in its own transaction right after the model
    returns and *before* the parameterized KG is updated from it. ``request_sha`` is the
    SHA-256 of the canonical JSON of the requests, so a resumed run can prove that the
    requests it is about to send are the ones already answered and replay the answers.
``rounds``
    one row per finished round, committed atomically together with that round's rows in
    ``probes``: queries, timing, metrics (JSON), the PKG state after the round, the
    sampler and convergence state. PKG states are stored as a keyframe every
    :data:`KEYFRAME_EVERY` rounds and as the changed entries (delta) otherwise, so the
    file stays small on large graphs while every round's PKG can be rebuilt exactly.
``probes``
    one row per probed edge: round, position in the round, edge, audit flag (uniform
    side sample feeding the unbiased estimate), correctness, the question and the
    model's answer, method-specific detail (JSON).

Crash safety: the file is in WAL mode and every write is one transaction, so a process
killed at any moment (SIGKILL included) leaves the file at the last committed
transaction. Two runs never share a file; a writer holds an exclusive ``flock`` on its
run file for its whole life, so resuming a run that is still running is refused instead
of corrupting it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import json
import os
import sqlite3
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from kgprobe.errors import InputError, StoreError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult

#: Bumped whenever the schema or the meaning of a column changes.
FORMAT_VERSION = 1
#: A full PKG snapshot every this many rounds; the rounds between store deltas.
KEYFRAME_EVERY = 16

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kg (id INTEGER PRIMARY KEY CHECK (id = 0), data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    round INTEGER NOT NULL, phase TEXT NOT NULL, request_sha TEXT NOT NULL,
    n INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (round, phase));
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY, queries INTEGER NOT NULL, queries_spent INTEGER NOT NULL,
    num_requests INTEGER NOT NULL, replayed INTEGER NOT NULL, started REAL NOT NULL,
    elapsed REAL NOT NULL, metrics TEXT NOT NULL, converged INTEGER NOT NULL,
    state_kind TEXT NOT NULL, pkg_state BLOB NOT NULL, sampler_state TEXT NOT NULL,
    convergence_state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS probes (
    round INTEGER NOT NULL, pos INTEGER NOT NULL, edge INTEGER NOT NULL,
    audit INTEGER NOT NULL, correct INTEGER NOT NULL, question TEXT NOT NULL,
    answer TEXT NOT NULL, detail TEXT NOT NULL, PRIMARY KEY (round, pos));
CREATE INDEX IF NOT EXISTS probes_edge ON probes (edge);
"""


# -- serialization helpers ---------------------------------------------------------------
def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


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
        "predicates": [[p.id, p.label, list(p.aliases)] for p in kg.predicates.values()],
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
    predicates = [Predicate(i, label, tuple(aliases)) for i, label, aliases in d["predicates"]]
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
    return hashlib.sha256(_json(kg_to_dict(kg)).encode()).hexdigest()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def request_to_json(req: ScoreRequest | GenerateRequest) -> dict:
    """The request's fields as a dict, equal to ``dataclasses.asdict`` for these flat
    requests (their fields are strings, numbers and tuples of strings) at a fraction of
    its cost: a round logs thousands of them."""
    names = _FIELD_NAMES.get(type(req))
    if names is None:
        names = _FIELD_NAMES[type(req)] = tuple(f.name for f in dataclasses.fields(req))
    return {name: getattr(req, name) for name in names}


def requests_sha(requests: Sequence[ScoreRequest | GenerateRequest], *, as_json: Sequence[dict] | None = None) -> str:
    """SHA-256 over the canonical JSON of a request list (order matters); ``as_json``:
    the requests already passed through :func:`request_to_json`."""
    h = hashlib.sha256()
    for obj in as_json if as_json is not None else (request_to_json(r) for r in requests):
        h.update(_json(obj).encode())
        h.update(b"\n")
    return h.hexdigest()


def _response_to_json(resp: ScoreResult | str):
    if isinstance(resp, ScoreResult):
        return {"lp": list(resp.token_logprobs), "g": bool(resp.is_greedy)}
    return resp


def _response_from_json(obj) -> ScoreResult | str:
    if isinstance(obj, dict):
        return ScoreResult(tuple(float(x) for x in obj["lp"]), bool(obj["g"]))
    return obj


def _pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _unpack_arrays(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _state_delta(prev: dict[str, np.ndarray], cur: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
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


def _apply_delta(prev: dict[str, np.ndarray], delta: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    state = {k: np.array(v, copy=True) for k, v in prev.items()}
    for name, value in delta.items():
        kind, key = name.split(":", 1)
        if kind == "full":
            state[key] = value
        elif kind == "idx":
            state[key][value] = delta["val:" + key]
    return state


# -- records --------------------------------------------------------------------------
@dataclass
class ProbeRecord:
    """One probed edge in one round, as reports and the unbiased estimate read it."""

    round: int
    pos: int
    edge: int
    audit: bool
    correct: bool
    question: str
    answer: str
    detail: dict


@dataclass
class RoundRecord:
    """Everything the engine commits at the end of a round, in one transaction."""

    round: int
    queries: int
    queries_spent: int
    num_requests: int
    replayed: bool
    started: float
    elapsed: float
    metrics: dict
    converged: bool
    pkg_state: dict[str, np.ndarray]
    sampler_state: dict
    convergence_state: dict
    probes: list[ProbeRecord]


@dataclass
class Checkpoint:
    """The state after the last committed round, from which a run resumes."""

    round: int
    queries_spent: int
    pkg_state: dict[str, np.ndarray]
    sampler_state: dict
    convergence_state: dict
    converged: bool


class RunStore:
    """One run's SQLite file. Create with :meth:`create`, reopen with :meth:`open`.

    ``path=":memory:"`` keeps everything in memory (the Python API's default when no
    store is asked for); the behaviour is identical apart from persistence.
    """

    def __init__(self, conn: sqlite3.Connection, path: str, lock_fd: int | None, writable: bool):
        self._conn = conn
        self.path = path
        self._lock_fd = lock_fd
        self.writable = writable
        self._kg: KnowledgeGraph | None = None
        self._last_state: tuple[int, dict[str, np.ndarray]] | None = None

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        config: dict,
        kg: KnowledgeGraph,
        model_identity: str,
        model_spec: str = "",
        model_name: str = "",
    ) -> "RunStore":
        """A new run file at ``path`` (must not exist); ``":memory:"`` for an in-memory store."""
        path = str(path)
        lock_fd = None
        if path != ":memory:":
            parent = Path(path).parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                raise StoreError(f"run file {path} already exists; choose another name or resume it") from None
            except OSError as exc:
                raise StoreError(
                    f"cannot create the run store in {parent}: {exc.strerror}; "
                    "choose a writable directory with --out"
                ) from None
            lock_fd = fd
            _lock(fd, path)
        conn = _connect(path)
        store = cls(conn, path, lock_fd, True)
        try:
            with conn:
                conn.executescript(_SCHEMA)
                meta = {
                    "format_version": str(FORMAT_VERSION),
                    "kgprobe_version": _kgprobe_version(),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "config": _json(config),
                    "model_identity": model_identity,
                    "model_spec": model_spec,
                    "model_name": model_name or model_identity,
                    "kg_fingerprint": kg_fingerprint(kg),
                    "status": "running",
                    "stop_reason": "",
                }
                conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
                conn.execute(
                    "INSERT INTO kg VALUES (0, ?)", (zlib.compress(_json(kg_to_dict(kg)).encode(), 6),)
                )
        except sqlite3.Error as exc:
            store.close()
            raise StoreError(f"cannot write the run store {path}: {exc}") from None
        store._kg = kg
        return store

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False) -> "RunStore":
        """Open an existing run file; ``writable=True`` takes the run's exclusive lock."""
        path = str(path)
        if not os.path.isfile(path):
            raise InputError(f"run file {path} does not exist; pass the path printed by `kgprobe run`")
        lock_fd = None
        if writable:
            try:
                lock_fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                raise StoreError(f"cannot open run file {path} for writing: {exc.strerror}") from None
            _lock(lock_fd, path)
        try:
            conn = _connect(path, readonly=not writable)
            rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError:
            if lock_fd is not None:
                os.close(lock_fd)
            raise InputError(f"{path} is not a kgprobe run file (not a SQLite database with a meta table)") from None
        store = cls(conn, path, lock_fd, writable)
        version = int(rows.get("format_version", "0") or 0)
        if version > FORMAT_VERSION:
            store.close()
            raise InputError(
                f"run file {path} has format version {version}, written by kgprobe "
                f"{rows.get('kgprobe_version', '?')}; this kgprobe ({_kgprobe_version()}) reads up to "
                f"version {FORMAT_VERSION}. Upgrade kgprobe to read it."
            )
        if version < 1 or "config" not in rows:
            store.close()
            raise InputError(f"{path} is not a kgprobe run file (no format version in its meta table)")
        return store

    def close(self) -> None:
        """Close the database, then release the lock (in that order: see :func:`_lock`)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- metadata ----------------------------------------------------------------------
    def meta(self, key: str, default: str = "") -> str:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def config(self) -> dict:
        return json.loads(self.meta("config"))

    @property
    def model_identity(self) -> str:
        return self.meta("model_identity")

    @property
    def model_name(self) -> str:
        """A short display name of the model (its identity for older files)."""
        return self.meta("model_name") or self.model_identity

    @property
    def model_spec(self) -> str:
        return self.meta("model_spec")

    @property
    def status(self) -> str:
        return self.meta("status")

    @property
    def stop_reason(self) -> str:
        return self.meta("stop_reason")

    def set_status(self, status: str, stop_reason: str = "") -> None:
        with self._transaction():
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('status', ?)", (status,))
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('stop_reason', ?)", (stop_reason,))

    @property
    def kg(self) -> KnowledgeGraph:
        if self._kg is None:
            (blob,) = self._conn.execute("SELECT data FROM kg WHERE id = 0").fetchone()
            self._kg = kg_from_dict(json.loads(zlib.decompress(blob)))
        return self._kg

    # -- responses ----------------------------------------------------------------------
    def log_responses(
        self,
        round_: int,
        phase: str,
        requests: Sequence[ScoreRequest | GenerateRequest],
        responses: Sequence[ScoreResult | str],
    ) -> None:
        """Persist one round's requests and responses of one phase (``score``/``generate``)."""
        as_json = [request_to_json(r) for r in requests]
        payload = {
            "requests": as_json,
            "responses": [_response_to_json(r) for r in responses],
        }
        blob = zlib.compress(_json(payload).encode(), 6)
        self._write(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (round_, phase, requests_sha(requests, as_json=as_json), len(requests), blob),
        )

    def logged_responses(self, round_: int, phase: str) -> tuple[str, list] | None:
        """``(request_sha, responses)`` logged for a round and phase, or None."""
        row = self._conn.execute(
            "SELECT request_sha, data FROM responses WHERE round = ? AND phase = ?", (round_, phase)
        ).fetchone()
        if row is None:
            return None
        payload = json.loads(zlib.decompress(row[1]))
        return row[0], [_response_from_json(r) for r in payload["responses"]]

    def logged_requests(self, round_: int, phase: str) -> tuple[list[dict], list] | None:
        """The raw JSON requests and decoded responses of a round, for audits and reports."""
        row = self._conn.execute(
            "SELECT data FROM responses WHERE round = ? AND phase = ?", (round_, phase)
        ).fetchone()
        if row is None:
            return None
        payload = json.loads(zlib.decompress(row[0]))
        return payload["requests"], [_response_from_json(r) for r in payload["responses"]]

    def num_logged_requests(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(SUM(n), 0) FROM responses").fetchone()[0])

    # -- rounds -------------------------------------------------------------------------
    def commit_round(self, record: RoundRecord) -> None:
        """Write a finished round (metrics, PKG, sampler/convergence state, probes) atomically."""
        state = {k: np.asarray(v) for k, v in record.pkg_state.items()}
        kind, blob = "full", None
        if self._last_state is None and record.round > 1:
            self._last_state = (record.round - 1, self.pkg_state(record.round - 1))
        if (
            record.round % KEYFRAME_EVERY != 1
            and self._last_state is not None
            and self._last_state[0] == record.round - 1
        ):
            delta = _state_delta(self._last_state[1], state)
            if delta is not None:
                kind, blob = "delta", _pack_arrays(delta)
        if blob is None:
            blob = _pack_arrays(state)
        with self._transaction():
            self._conn.execute(
                "INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.round,
                    record.queries,
                    record.queries_spent,
                    record.num_requests,
                    int(record.replayed),
                    record.started,
                    record.elapsed,
                    _json(record.metrics),
                    int(record.converged),
                    kind,
                    blob,
                    _json(record.sampler_state),
                    _json(record.convergence_state),
                ),
            )
            self._conn.executemany(
                "INSERT INTO probes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (p.round, p.pos, p.edge, int(p.audit), int(p.correct), p.question, p.answer, _json(p.detail))
                    for p in record.probes
                ],
            )
        self._last_state = (record.round, state)

    def last_round(self) -> int:
        """The last committed round (0 when none)."""
        return int(self._conn.execute("SELECT COALESCE(MAX(round), 0) FROM rounds").fetchone()[0])

    def pkg_state(self, round_: int | None = None) -> dict[str, np.ndarray]:
        """The PKG state after ``round_`` (default: the last committed round)."""
        if round_ is None:
            round_ = self.last_round()
        keyframe = self._conn.execute(
            "SELECT MAX(round) FROM rounds WHERE round <= ? AND state_kind = 'full'", (round_,)
        ).fetchone()[0]
        if keyframe is None:
            raise StoreError(f"run file {self.path} has no PKG state at or before round {round_}")
        rows = self._conn.execute(
            "SELECT round, state_kind, pkg_state FROM rounds WHERE round >= ? AND round <= ? ORDER BY round",
            (keyframe, round_),
        ).fetchall()
        if len(rows) != round_ - keyframe + 1:
            raise StoreError(f"run file {self.path} is missing rounds between {keyframe} and {round_}")
        state: dict[str, np.ndarray] = {}
        for _, kind, blob in rows:
            arrays = _unpack_arrays(blob)
            state = arrays if kind == "full" else _apply_delta(state, arrays)
        return state

    def checkpoint(self) -> Checkpoint | None:
        """The state after the last committed round, or None for a run with no round yet."""
        row = self._conn.execute(
            "SELECT round, queries_spent, sampler_state, convergence_state, converged "
            "FROM rounds ORDER BY round DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        r, spent, sampler_state, conv_state, converged = row
        return Checkpoint(
            round=r,
            queries_spent=spent,
            pkg_state=self.pkg_state(r),
            sampler_state=json.loads(sampler_state),
            convergence_state=json.loads(conv_state),
            converged=bool(converged),
        )

    def history(self) -> list[dict]:
        """Per-round rows, oldest first: round, queries, queries_spent, elapsed, metrics, …"""
        rows = self._conn.execute(
            "SELECT round, queries, queries_spent, num_requests, replayed, started, elapsed, metrics, converged "
            "FROM rounds ORDER BY round"
        ).fetchall()
        keys = ("round", "queries", "queries_spent", "num_requests", "replayed", "started", "elapsed",
                "metrics", "converged")
        out = []
        for row in rows:
            d = dict(zip(keys, row))
            d["metrics"] = json.loads(d["metrics"])
            d["replayed"] = bool(d["replayed"])
            d["converged"] = bool(d["converged"])
            out.append(d)
        return out

    def probes(self, edge: int | None = None) -> list[ProbeRecord]:
        """Every probe in (round, pos) order, or only those of one edge."""
        sql = "SELECT round, pos, edge, audit, correct, question, answer, detail FROM probes"
        args: tuple = ()
        if edge is not None:
            sql += " WHERE edge = ?"
            args = (edge,)
        rows = self._conn.execute(sql + " ORDER BY round, pos", args).fetchall()
        return [
            ProbeRecord(r, p, e, bool(a), bool(c), q, ans, json.loads(d)) for r, p, e, a, c, q, ans, d in rows
        ]

    def probe_arrays(self) -> dict[str, np.ndarray]:
        """Round, edge, audit and correct columns of every probe as arrays (for estimators)."""
        rows = self._conn.execute("SELECT round, edge, audit, correct FROM probes ORDER BY round, pos").fetchall()
        arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        return {
            "round": arr[:, 0],
            "edge": arr[:, 1],
            "audit": arr[:, 2].astype(bool),
            "correct": arr[:, 3].astype(bool),
        }

    # -- internals ---------------------------------------------------------------------
    def _transaction(self):
        if not self.writable:
            raise StoreError(f"run file {self.path} is open read-only")
        return _Transaction(self._conn, self.path)

    def _write(self, sql: str, args: Iterable) -> None:
        with self._transaction():
            self._conn.execute(sql, tuple(args))


class _Transaction:
    def __init__(self, conn: sqlite3.Connection, path: str):
        self.conn, self.path = conn, path

    def __enter__(self):
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the run store {self.path}: {exc}") from None
        return self.conn

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as err:
                self.conn.execute("ROLLBACK")
                raise StoreError(f"cannot write the run store {self.path}: {err}") from None
        else:
            self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot write the run store {self.path}: {exc}") from None
        return False


def _connect(path: str, readonly: bool = False) -> sqlite3.Connection:
    try:
        if readonly and path != ":memory:":
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=30)
        else:
            conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            # WAL: readers (a report while the run goes on) never block the writer, and a
            # killed writer leaves the file at its last commit. NORMAL sync is durable
            # against process death; only a power cut can lose the last transactions.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the run store {path}: {exc}") from None
    return conn


def _lock(fd: int, path: str) -> None:
    """Exclusive ``flock`` for the writer's lifetime; released by the kernel if it dies.

    flock locks are independent of SQLite's POSIX record locks on Linux, and the fd is
    closed only after the SQLite connection (closing another fd of the file while
    SQLite holds POSIX locks would drop them).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"run file {path} is in use by another kgprobe process; wait for it to finish or stop it"
        ) from None


def _kgprobe_version() -> str:
    from kgprobe import __version__

    return __version__
