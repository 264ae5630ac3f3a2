"""The run store itself (:class:`RunStore`): one SQLite file per run; see :mod:`kgprobe.store`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from kgprobe.errors import DamagedFileError, InputError, StoreError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult
from kgprobe.store.codec import (
    apply_delta,
    compact_json,
    kg_fingerprint,
    kg_from_dict,
    kg_to_dict,
    pack_arrays,
    requests_json,
    requests_sha,
    response_from_json,
    response_to_json,
    state_delta,
    unpack_arrays,
)
from kgprobe.store.integrity import INTEGRITY_SCHEME, Problem, Verification, digest_rows, meta_digest
from kgprobe.store.records import Checkpoint, ProbeRecord, RoundRecord
from kgprobe.store.transactions import Transaction, connect, disk_full_hook, lock, reads

#: Bumped whenever the schema or the meaning of a column changes. Version 2 added each
#: probe's prediction and inclusion probability and each round's mean predictions
#: (columns ``probes.predicted``, ``probes.inclusion``, ``rounds.predictions``); version 1
#: files are still read (the new columns read as missing).
FORMAT_VERSION = 2
#: A full PKG snapshot every this many rounds; the rounds between store deltas.
KEYFRAME_EVERY = 16
#: The probes column holding each probe's design part (0 the sampler's own choice, 1 floor,
#: 2 lean). Its on-disk name is the concept's older name, kept so that older run files
#: read and resume unchanged and older kgprobe versions read new ones.
DESIGN_COLUMN = "audit"

_SCHEMA = f"""
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
    convergence_state TEXT NOT NULL, predictions TEXT);
CREATE TABLE IF NOT EXISTS probes (
    round INTEGER NOT NULL, pos INTEGER NOT NULL, edge INTEGER NOT NULL,
    {DESIGN_COLUMN} INTEGER NOT NULL, correct INTEGER NOT NULL, question TEXT NOT NULL,
    answer TEXT NOT NULL, detail TEXT NOT NULL, predicted REAL, inclusion REAL, PRIMARY KEY (round, pos));
CREATE INDEX IF NOT EXISTS probes_edge ON probes (edge);
CREATE TABLE IF NOT EXISTS checks (name TEXT PRIMARY KEY, sha TEXT NOT NULL);
"""

#: Answers kept from a round whose batch failed part-way (created on first use, so that
#: files without it stay readable by older kgprobe versions).
_PARTIAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS partial_responses (
    round INTEGER NOT NULL, phase TEXT NOT NULL, request_sha TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (round, phase));
"""

#: Test hook: with this environment variable set to ``SECONDS`` (or ``SECONDS@ROUND``),
#: the engine announces on stderr and waits between logging a round's responses and
#: committing the round, so that a kill in that window (the replay window) can be aimed at.
REPLAY_WINDOW_ENV = "KGPROBE_TEST_PAUSE_BEFORE_COMMIT"

class RunStore:
    """One run's SQLite file. Create with :meth:`create`, reopen with :meth:`open`.

    ``path=":memory:"`` keeps everything in memory (the Python API's ``store=None``); the
    behaviour is identical apart from persistence.
    """

    def __init__(self, conn: sqlite3.Connection, path: str, lock_fd: int | None, writable: bool):
        self._conn = conn
        self.path = path
        self._lock_fd = lock_fd
        self.writable = writable
        self._kg: KnowledgeGraph | None = None
        self._last_state: tuple[int, dict[str, np.ndarray]] | None = None
        #: Whether this file carries checksums (every file created by this kgprobe does).
        self.checked = True
        self._inode: tuple[int, int] | None = None
        if lock_fd is not None:
            st = os.fstat(lock_fd)
            self._inode = (st.st_dev, st.st_ino)

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
            lock(fd, path)
        conn = connect(path)
        store = cls(conn, path, lock_fd, True)
        try:
            with conn:
                conn.executescript(_SCHEMA)
                meta = {
                    "format_version": str(FORMAT_VERSION),
                    "kgprobe_version": kgprobe_version(),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "config": compact_json(config),
                    "model_identity": model_identity,
                    "model_spec": model_spec,
                    "model_name": model_name or model_identity,
                    "kg_fingerprint": kg_fingerprint(kg),
                    "status": "running",
                    "stop_reason": "",
                    "integrity": INTEGRITY_SCHEME,
                }
                conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
                conn.executemany("INSERT INTO checks VALUES (?, ?)",
                                 [(f"meta:{k}", meta_digest(k, v)) for k, v in meta.items()])
                conn.execute(
                    "INSERT INTO kg VALUES (0, ?)", (zlib.compress(compact_json(kg_to_dict(kg)).encode(), 6),)
                )
                store._put_check("kg", store._kg_digest())
        except sqlite3.Error as exc:
            store.close()
            if path != ":memory:":  # ours (O_EXCL) and holding nothing: leave no unusable file behind
                for suffix in ("", "-wal", "-shm"):
                    try:
                        os.unlink(path + suffix)
                    except OSError:
                        pass
            raise StoreError(f"cannot create the run store {path}: {exc}") from None
        store._kg = kg
        return store

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False, verify: bool | None = None) -> "RunStore":
        """Open an existing run file; ``writable=True`` takes the run's exclusive lock.

        ``verify`` (default: for read-only opens) checks every record first and raises a
        :class:`~kgprobe.errors.DamagedFileError` naming the damage; a writer (resume)
        calls :meth:`verify` itself, to be able to drop a damaged last round.
        """
        path = str(path)
        if not os.path.isfile(path):
            raise InputError(f"run file {path} does not exist; pass the path printed by `kgprobe run`")
        lock_fd = None
        if writable:
            try:
                lock_fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                raise StoreError(f"cannot open run file {path} for writing: {exc.strerror}") from None
            lock(lock_fd, path)
        try:
            conn = connect(path, readonly=not writable)
        except StoreError:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        try:
            rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            conn.close()
            if lock_fd is not None:
                os.close(lock_fd)
            if "malformed" in str(exc) or "disk image" in str(exc):
                raise DamagedFileError(f"run file {path} is damaged: SQLite says {exc}; it cannot be read",
                                       [str(exc)]) from None
            raise InputError(f"{path} is not a kgprobe run file (not a SQLite database with a meta table)") from None
        store = cls(conn, path, lock_fd, writable)
        store.checked = "integrity" in rows or "checks" in tables
        try:
            version = int(rows.get("format_version", "0") or 0)
        except ValueError:
            version = -1
        if version > FORMAT_VERSION:
            store.close()
            raise InputError(
                f"run file {path} has format version {version}, written by kgprobe "
                f"{rows.get('kgprobe_version', '?')}; this kgprobe ({kgprobe_version()}) reads up to "
                f"version {FORMAT_VERSION}. Upgrade kgprobe to read it."
            )
        if version < 1 and not rows and "meta" in tables:
            store.close()
            raise DamagedFileError(f"run file {path} has no metadata: it is damaged (or its creation was cut "
                                   "short); it cannot be read", ["empty meta table"])
        if version < 1 or "config" not in rows:
            store.close()
            raise InputError(f"{path} is not a kgprobe run file (no format version in its meta table)")
        if verify is None:
            verify = not writable
        if verify:
            try:
                store.require_intact()
            except BaseException:
                store.close()
                raise
        if writable and version < FORMAT_VERSION:
            # A resumed older run gains the new columns; its old rows keep NULLs there.
            store.upgrade_schema()
            store.set_meta("format_version", str(FORMAT_VERSION))
        return store

    def close(self) -> None:
        """Close the database, then release the lock (in that order: see :func:`lock`)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def discard(self) -> None:
        """Close and remove the file: for a new run that failed before recording anything,
        which must not be left behind looking like a run. An in-memory store is only closed."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.path != ":memory:":
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(self.path + suffix)
                except OSError:
                    pass
        self.close()  # releases the lock last, so no one opens the file in between

    def holds_answers(self) -> bool:
        """Whether anything of the model's was recorded: a round, a logged response, or the
        kept answers of a failed round (which a resume reuses)."""
        if self.last_round() > 0 or self.num_logged_requests() > 0:
            return True
        try:
            return self._conn.execute("SELECT 1 FROM partial_responses LIMIT 1").fetchone() is not None
        except sqlite3.OperationalError:  # no such table: nothing was ever kept
            return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- metadata ----------------------------------------------------------------------
    @reads
    def meta(self, key: str, default: str = "") -> str:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            self._put_check(f"meta:{key}", meta_digest(key, value))

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
            self._put_check("meta:status", meta_digest("status", status))
            self._put_check("meta:stop_reason", meta_digest("stop_reason", stop_reason))

    @property
    @reads
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
        """Persist one round's requests and responses of one phase (``score``/``generate``).

        The stored JSON is ``{"requests": [...], "responses": [...]}`` with sorted keys, as
        ``compact_json`` writes it; it is assembled from each request's text
        (:func:`requests_json`), which is the same text, computed once for the payload and
        the request hash. zlib level 1: a round's JSON is mostly each fact's context
        repeated per option, which the fastest level already compresses ~50×.
        """
        texts = requests_json(requests)
        text = ('{"requests":[' + ",".join(texts) + '],"responses":'
                + compact_json([response_to_json(r) for r in responses]) + "}")
        blob = zlib.compress(text.encode(), 1)
        with self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (round_, phase, requests_sha(requests, texts=texts), len(requests), blob),
            )
            self._put_check(f"responses:{round_}:{phase}", self._responses_digest(round_, phase))
        if not self._conn.in_transaction:
            self.check_still_there()

    def _logged(self, round_: int, phase: str) -> tuple[str, dict] | None:
        """``(request_sha, decoded payload)`` of a round and phase's response log, or None."""
        row = self._conn.execute(
            "SELECT request_sha, data FROM responses WHERE round = ? AND phase = ?", (round_, phase)
        ).fetchone()
        return None if row is None else (row[0], json.loads(zlib.decompress(row[1])))

    @reads
    def logged_responses(self, round_: int, phase: str) -> tuple[str, list] | None:
        """``(request_sha, responses)`` logged for a round and phase, or None."""
        logged = self._logged(round_, phase)
        if logged is None:
            return None
        sha, payload = logged
        return sha, [response_from_json(r) for r in payload["responses"]]

    @reads
    def logged_requests(self, round_: int, phase: str) -> tuple[list[dict], list] | None:
        """The raw JSON requests and decoded responses of a round, for checks and reports."""
        logged = self._logged(round_, phase)
        if logged is None:
            return None
        payload = logged[1]
        return payload["requests"], [response_from_json(r) for r in payload["responses"]]

    def log_partial(self, round_: int, phase: str, request_sha: str, answered: dict[int, ScoreResult | str]) -> None:
        """Keep the answered requests of a phase whose batch failed, for the resume."""
        blob = zlib.compress(compact_json({str(i): response_to_json(v) for i, v in answered.items()}).encode(), 6)
        with self._transaction():
            self._conn.execute(_PARTIAL_SCHEMA)
            self._conn.execute("INSERT OR REPLACE INTO partial_responses VALUES (?, ?, ?, ?)",
                               (round_, phase, request_sha, blob))
            self._put_check(f"partial:{round_}:{phase}", self._partial_digest(round_, phase))
        self.check_still_there()

    def _partial_digest(self, round_: int, phase: str) -> str:
        h = hashlib.sha256(b"partial")
        digest_rows(h, self._conn.execute("SELECT * FROM partial_responses WHERE round = ? AND phase = ?",
                                           (round_, phase)))
        return h.hexdigest()

    def has_partial_responses(self, round_: int, phase: str) -> bool:
        """Whether answers of a failed attempt at this round and phase were kept (any requests)."""
        try:
            return self._conn.execute("SELECT 1 FROM partial_responses WHERE round = ? AND phase = ?",
                                      (round_, phase)).fetchone() is not None
        except sqlite3.OperationalError:  # no such table: nothing was ever kept
            return False
        except sqlite3.DatabaseError:  # a damaged record: let partial_responses decide (it ignores it)
            return True

    def partial_responses(self, round_: int, phase: str, request_sha: str) -> dict[int, ScoreResult | str]:
        """Answers kept from a failed attempt at this round and phase with the same requests.

        Anything that does not match (other requests, a damaged record) is ignored: those
        requests are simply asked again.
        """
        try:
            row = self._conn.execute("SELECT request_sha, data FROM partial_responses WHERE round = ? AND phase = ?",
                                     (round_, phase)).fetchone()
            if row is None or row[0] != request_sha:
                return {}
            if self.checked and self._check(f"partial:{round_}:{phase}") != self._partial_digest(round_, phase):
                return {}
            return {int(i): response_from_json(v) for i, v in json.loads(zlib.decompress(row[1])).items()}
        except sqlite3.OperationalError:  # no such table: nothing was ever kept
            return {}
        except (sqlite3.DatabaseError, zlib.error, ValueError, TypeError, KeyError):
            return {}

    @reads
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
            delta = state_delta(self._last_state[1], state)
            if delta is not None:
                kind, blob = "delta", pack_arrays(delta)
        if blob is None:
            blob = pack_arrays(state)
        with self._transaction():
            disk_full_hook(record.round)
            self._conn.execute(
                "INSERT INTO rounds (round, queries, queries_spent, num_requests, replayed, started, elapsed, "
                "metrics, converged, state_kind, pkg_state, sampler_state, convergence_state, predictions) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.round,
                    record.queries,
                    record.queries_spent,
                    record.num_requests,
                    int(record.replayed),
                    record.started,
                    record.elapsed,
                    compact_json(record.metrics),
                    int(record.converged),
                    kind,
                    blob,
                    compact_json(record.sampler_state),
                    compact_json(record.convergence_state),
                    None if record.predictions is None else compact_json(record.predictions),
                ),
            )
            self._conn.executemany(
                f"INSERT INTO probes (round, pos, edge, {DESIGN_COLUMN}, correct, question, answer, detail, predicted, "
                "inclusion) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (p.round, p.pos, p.edge, int(p.design), int(p.correct), p.question, p.answer, compact_json(p.detail),
                     p.predicted, p.inclusion)
                    for p in record.probes
                ],
            )
            if self.checked:
                # Digest of the rows as stored (read back inside the transaction), chained.
                prev = self._check(f"round:{record.round - 1}") or ""
                digest = self._round_digest(record.round, prev)
                self._put_check(f"round:{record.round}", digest)
                self._put_check("head", f"{record.round}:{digest}")
        self._last_state = (record.round, state)
        if not self._conn.in_transaction:  # else the round transaction does it after its commit
            self._after_commit()

    @reads
    def last_round(self) -> int:
        """The last committed round (0 when none)."""
        return int(self._conn.execute("SELECT COALESCE(MAX(round), 0) FROM rounds").fetchone()[0])

    @reads
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
            arrays = unpack_arrays(blob)
            state = arrays if kind == "full" else apply_delta(state, arrays)
        return state

    @reads
    def sampler_state(self) -> dict | None:
        """The sampler's state after the last committed round (None before one), without the
        PKG state :meth:`checkpoint` decodes with it."""
        row = self._conn.execute("SELECT sampler_state FROM rounds ORDER BY round DESC LIMIT 1").fetchone()
        return None if row is None else json.loads(row[0])

    @reads
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

    @reads
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

    @reads
    def probes(self, edge: int | None = None) -> list[ProbeRecord]:
        """Every probe in (round, pos) order, or only those of one edge."""
        sql = f"SELECT round, pos, edge, {DESIGN_COLUMN}, correct, question, answer, detail FROM probes"
        args: tuple = ()
        if edge is not None:
            sql += " WHERE edge = ?"
            args = (edge,)
        rows = self._conn.execute(sql + " ORDER BY round, pos", args).fetchall()
        return [
            ProbeRecord(r, p, e, bool(a), bool(c), q, ans, json.loads(d)) for r, p, e, a, c, q, ans, d in rows
        ]

    @reads
    def probe_arrays(self) -> dict[str, np.ndarray]:
        """Round, edge, design and correct columns of every probe as arrays (for estimators).

        Files of format 2 add ``predicted`` and ``inclusion`` (float, NaN where not recorded).
        """
        rows = self._conn.execute(f"SELECT round, edge, {DESIGN_COLUMN}, correct FROM probes ORDER BY round, pos").fetchall()
        arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        out = {
            "round": arr[:, 0],
            "edge": arr[:, 1],
            "design": arr[:, 2].astype(bool),
            # The design part (kgprobe.sampling.design): 0 sampler's choice, 1 floor, 2 lean.
            "part": arr[:, 2],
            "correct": arr[:, 3].astype(bool),
        }
        if self._has_column("probes", "predicted"):
            rows = self._conn.execute("SELECT predicted, inclusion FROM probes ORDER BY round, pos").fetchall()
            extra = np.asarray([[np.nan if v is None else v for v in row] for row in rows],
                               dtype=np.float64).reshape(-1, 2)
            out["predicted"], out["inclusion"] = extra[:, 0], extra[:, 1]
        return out

    def round_predictions(self) -> dict[int, dict]:
        """Per round, the mean predictions recorded before it (empty for format-1 files)."""
        if not self._has_column("rounds", "predictions"):
            return {}
        rows = self._conn.execute("SELECT round, predictions FROM rounds ORDER BY round").fetchall()
        return {int(r): json.loads(p) for r, p in rows if p is not None}

    def _has_column(self, table: str, column: str) -> bool:
        return any(row[1] == column for row in self._conn.execute(f"PRAGMA table_info({table})"))

    def upgrade_schema(self) -> None:
        """Add the format-2 columns to a format-1 file opened for writing (a resumed old run)."""
        with self._transaction():
            for table, column, kind in (("probes", "predicted", "REAL"), ("probes", "inclusion", "REAL"),
                                        ("rounds", "predictions", "TEXT")):
                if not self._has_column(table, column):
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    # -- integrity ---------------------------------------------------------------------
    def _put_check(self, name: str, digest: str) -> None:
        if self.checked:
            self._conn.execute("INSERT OR REPLACE INTO checks VALUES (?, ?)", (name, digest))

    def _check(self, name: str) -> str | None:
        row = self._conn.execute("SELECT sha FROM checks WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def _kg_digest(self) -> str:
        h = hashlib.sha256(b"kg")
        digest_rows(h, self._conn.execute("SELECT * FROM kg ORDER BY id"))
        return h.hexdigest()

    def _responses_digest(self, round_: int, phase: str) -> str:
        h = hashlib.sha256(b"responses")
        digest_rows(h, self._conn.execute("SELECT * FROM responses WHERE round = ? AND phase = ?", (round_, phase)))
        return h.hexdigest()

    def _round_tables(self) -> list[str]:
        """Tables with a ``round`` column whose rows belong to a committed round.

        ``rounds`` and ``probes`` today; a table another feature adds later (one row per
        probe or per round, written before or with the commit) is covered automatically.
        """
        names = [r[0] for r in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out = []
        for name in names:
            if name in ("meta", "kg", "checks", "responses", "partial_responses"):
                continue
            cols = [c[1] for c in self._conn.execute(f'PRAGMA table_info("{name}")')]
            if "round" in cols:
                out.append(name)
        return sorted(out, key=lambda n: (n != "rounds", n != "probes", n))

    def _round_digest(self, round_: int, prev: str) -> str:
        h = hashlib.sha256(prev.encode())
        for table in self._round_tables():
            h.update(table.encode() + b"#")
            digest_rows(h, self._conn.execute(f'SELECT * FROM "{table}" WHERE round = ? ORDER BY rowid', (round_,)))
        return h.hexdigest()

    def verify(self) -> Verification:
        """Check every record: SQLite's structure, then each checksum (or, in a file
        without checksums, that every record decodes and the rounds are consistent)."""
        problems: list[Problem] = []
        records = 0
        rounds: list[int] = []
        conn = self._conn
        try:
            conn.execute("BEGIN")  # one consistent snapshot, even while a run writes
        except sqlite3.Error:
            pass
        try:
            try:
                quick = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
            except sqlite3.DatabaseError as exc:
                quick = [str(exc)]
            if quick != ["ok"]:
                problems.append(Problem("file", None, "SQLite structure damaged: " + "; ".join(quick)[:300]))
            try:
                records, rounds = self._verify_records(problems)
            except (sqlite3.DatabaseError, zlib.error, ValueError, KeyError, TypeError, OSError, EOFError) as exc:
                problems.append(Problem("file", None, f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"))
        finally:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                pass
        return Verification(self.path, self.checked, len(rounds), records, problems)

    def _verify_records(self, problems: list[Problem]) -> tuple[int, list[int]]:
        conn, checked = self._conn, self.checked
        checks = dict(conn.execute("SELECT name, sha FROM checks").fetchall()) if checked else {}
        if checked and not checks:
            problems.append(Problem("file", None, "the checksum table is empty"))
        used: set[str] = set()
        records = 0

        def expect(name: str, digest: str, where: str, round_: int | None, what: str) -> None:
            nonlocal records
            used.add(name)
            records += 1
            if not checked:
                return
            if name not in checks:
                problems.append(Problem(where, round_, f"{what} has no checksum"))
            elif checks[name] != digest:
                problems.append(Problem(where, round_, f"{what} does not match its checksum"))

        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        for key, value in sorted(meta.items()):
            expect(f"meta:{key}", meta_digest(key, value), "meta", None, f"meta {key!r}")
        if checked and meta.get("integrity", INTEGRITY_SCHEME) != INTEGRITY_SCHEME:
            problems.append(Problem("meta", None, f"unknown integrity scheme {meta.get('integrity')!r}"))
        try:
            json.loads(meta.get("config", ""))
        except ValueError:
            problems.append(Problem("meta", None, "meta 'config' is not valid JSON"))
        expect("kg", self._kg_digest(), "kg", None, "the KG")
        try:
            row = conn.execute("SELECT data FROM kg WHERE id = 0").fetchone()
            kg = kg_from_dict(json.loads(zlib.decompress(row[0])))
            if kg_fingerprint(kg) != meta.get("kg_fingerprint"):
                problems.append(Problem("kg", None, "the KG does not match its fingerprint"))
        except Exception as exc:  # any decoding failure of the blob is damage
            problems.append(Problem("kg", None, f"the KG cannot be decoded ({type(exc).__name__})"))
        rounds = [r for (r,) in conn.execute("SELECT round FROM rounds ORDER BY round")]
        if rounds != list(range(1, len(rounds) + 1)):
            problems.append(Problem("round", rounds[-1] if rounds else None,
                                    f"the rounds are not 1..{len(rounds)} (found {rounds[:3]}…{rounds[-3:]})"))
        prev = ""
        for r in rounds:
            digest = self._round_digest(r, prev)
            expect(f"round:{r}", digest, "round", r, f"round {r} (its row or its probes)")
            prev = checks.get(f"round:{r}", digest)
            try:
                mrow = conn.execute("SELECT metrics, sampler_state, convergence_state FROM rounds WHERE round = ?",
                                    (r,)).fetchone()
                for text in mrow:
                    json.loads(text)
                for (detail,) in conn.execute("SELECT detail FROM probes WHERE round = ?", (r,)):
                    json.loads(detail)
            except (ValueError, TypeError):
                problems.append(Problem("round", r, f"round {r} has a record that is not valid JSON"))
        if rounds:
            try:
                self.pkg_state(rounds[-1])
            except Exception as exc:
                problems.append(Problem("round", rounds[-1], f"the PKG state of round {rounds[-1]} cannot be "
                                        f"rebuilt ({type(exc).__name__})"))
        orphans = [r for (r,) in conn.execute("SELECT DISTINCT round FROM probes WHERE round > ?",
                                              (rounds[-1] if rounds else 0,))]
        for r in orphans:
            problems.append(Problem("round", r, f"probes of round {r}, which was never committed"))
        if checked:
            used.add("head")
            last = rounds[-1] if rounds else 0
            head = checks.get("head")
            if last and head != f"{last}:{checks.get(f'round:{last}')}":
                got = head.split(":", 1)[0] if head else "none"
                problems.append(Problem("head", last, f"the last round is {last} but the checksum chain ends at "
                                        f"round {got} (a round was removed or added)"))
        cursor = conn.execute("SELECT * FROM responses")
        columns = [d[0] for d in cursor.description]
        for row in cursor.fetchall():
            rnd, phase, sha, n, blob = (row[columns.index(c)] for c in ("round", "phase", "request_sha", "n", "data"))
            h = hashlib.sha256(b"responses")
            digest_rows(h, [row])
            expect(f"responses:{rnd}:{phase}", h.hexdigest(), "responses", rnd, f"the {phase} responses of round {rnd}")
            try:
                payload = json.loads(zlib.decompress(blob))
                req = hashlib.sha256()
                for r in payload["requests"]:
                    req.update(compact_json(r).encode())
                    req.update(b"\n")
                if req.hexdigest() != sha or len(payload["responses"]) != n:
                    raise ValueError("requests do not match their hash")
            except Exception:
                problems.append(Problem("responses", rnd, f"the {phase} responses of round {rnd} cannot be decoded"))
        for name in sorted(set(checks) - used):
            kind, _, rest = name.partition(":")
            rnd = int(rest.split(":")[0]) if kind in ("round", "responses") and rest.split(":")[0].isdigit() else None
            if kind == "partial":
                continue  # kept answers of a failed round: checked where they are read
            where = kind if kind in ("meta", "kg", "round", "responses") else "file"
            problems.append(Problem(where, rnd, f"record {name!r} has a checksum but is missing"))
        return records, rounds

    def require_intact(self) -> Verification:
        """:meth:`verify`, raising a :class:`DamagedFileError` that names the damage."""
        result = self.verify()
        if result.problems:
            raise DamagedFileError(
                f"run file {self.path} is damaged: {result.summary()}. Its numbers cannot be trusted; "
                f"`kgprobe verify {self.path}` lists the damage"
                + ("; `kgprobe resume` can drop the damaged last round and play it again" if result.only_last_round
                   else ""),
                [str(p) for p in result.problems],
            )
        return result

    def drop_last_round(self, result: Verification) -> str:
        """Remove the damaged records of the last round (and of responses after it).

        Allowed only when :attr:`Verification.only_last_round`; returns what was dropped.
        The round is then played again by the resume (from its logged responses when
        those are intact, else by asking the model).
        """
        if not result.only_last_round:
            raise DamagedFileError(f"run file {self.path} is damaged beyond its last round: {result.summary()}",
                                   [str(p) for p in result.problems])
        last = result.rounds
        dropped = []
        with self._transaction():
            if any(p.where in ("round", "head") for p in result.problems) and last:
                for table in self._round_tables():
                    self._conn.execute(f'DELETE FROM "{table}" WHERE round >= ?', (last,))
                self._conn.execute("DELETE FROM checks WHERE name = ?", (f"round:{last}",))
                prev = self._check(f"round:{last - 1}")
                if prev is None:
                    self._conn.execute("DELETE FROM checks WHERE name = 'head'")
                else:
                    self._put_check("head", f"{last - 1}:{prev}")
                dropped.append(f"round {last}")
            for p in result.problems:
                if p.where == "responses":
                    self._conn.execute("DELETE FROM responses WHERE round = ?", (p.round,))
                    self._conn.execute("DELETE FROM checks WHERE name LIKE ?", (f"responses:{p.round}:%",))
                    dropped.append(f"the logged responses of round {p.round}")
        self._last_state = None
        return ", ".join(dict.fromkeys(dropped))

    def check_still_there(self) -> None:
        """Raise a :class:`StoreError` if the run file was deleted or replaced under us.

        SQLite keeps writing to an unlinked file without complaint, so a run whose file
        is removed would otherwise go on and "finish" with every result gone.
        """
        if self._inode is None or self.path == ":memory:":
            return
        try:
            st = os.stat(self.path)
            gone = (st.st_dev, st.st_ino) != self._inode
        except OSError:
            gone = True
        if gone:
            raise StoreError(
                f"run file {self.path} was deleted or replaced while the run was writing it; "
                "the results of this run are lost. Keep the run file in place until the run ends",
                exit_code=5,
            )

    # -- internals ---------------------------------------------------------------------
    def _transaction(self):
        if not self.writable:
            raise StoreError(f"run file {self.path} is open read-only")
        return Transaction(self._conn, self.path)

    @contextlib.contextmanager
    def round_transaction(self):
        """One transaction for all of a round's writes (its responses, then its commit).

        Inside it, :meth:`log_responses` and :meth:`commit_round` write into this
        transaction (each as a savepoint) instead of their own, so a round costs one
        commit. Atomicity is as before: the file holds the round's responses and its
        record together, or neither, or (after an exception between logging and the
        round's commit, such as a failed commit or an error in the update) the responses
        alone: on any exception the responses written so far are committed and the round
        is not, so the resume replays them. A kill -9 before the commit leaves the last
        committed round; the resume then asks the model for that round again, which gives
        the same answers and the same state as an unbroken run.
        """
        if self._conn.in_transaction:  # checked before opening: a savepoint would be left open
            raise StoreError("a round transaction cannot be nested in another transaction")
        tx = self._transaction()
        tx.__enter__()
        try:
            yield self
        except BaseException:
            # Keep what was logged (the commit_round savepoint, if it failed, is rolled back).
            self._last_state = None
            try:
                tx.__exit__(None, None, None)
            except Exception:  # the disk that failed the round may fail this too: nothing kept
                pass
            raise
        try:
            tx.__exit__(None, None, None)
        except BaseException:
            self._last_state = None
            raise
        self._after_commit()

    def _after_commit(self) -> None:
        # Move committed rounds from the WAL into the main file now (not after 1000
        # pages): damage to the WAL can then cost at most the uncommitted tail.
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            pass  # a busy reader: the next round's checkpoint catches up
        self.check_still_there()


def kgprobe_version() -> str:
    from kgprobe import __version__

    return __version__
