"""A response cache that wraps any backend: SQLite, keyed by backend identity + request.

* Key: sha256 of a canonical JSON of (``model.identity``, request kind, request fields).
  ``edge`` is bookkeeping and is left out, so the same question about another edge hits.
* Sampled generations (``temperature > 0``) are never cached: a cache hit would turn
  a random draw into a constant.
* No partial entries: results are written only after the backend has returned the
  whole batch, in one transaction. A backend that raises writes nothing.
* Every entry carries a checksum of its key and value (column ``sha``; entries of older
  caches have none and are trusted as before): an entry that fails it is asked again
  and overwritten, never used. A file SQLite cannot read is a clear error (exit 2)
  telling to delete it: the cache only saves model calls.
* Two processes can share one file: WAL journal, a busy timeout, and
  ``INSERT OR IGNORE`` (both writers computed the same deterministic answer).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

from kgprobe.errors import DamagedFileError, PartialBatchError, StoreError
from kgprobe.models.base import DelegatingModel, GenerateRequest, LanguageModel, ScoreRequest, ScoreResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL,
    value TEXT NOT NULL,
    sha TEXT
)
"""


def request_key(identity: str, request: ScoreRequest | GenerateRequest) -> str:
    """The cache key of ``request`` sent to the backend with ``identity``."""
    if isinstance(request, ScoreRequest):
        payload = ["score", identity, request.context, request.continuation]
    else:
        payload = ["generate", identity, request.prompt, request.max_tokens, list(request.stop),
                   request.temperature, request.seed, request.chat]
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _entry_sha(key: str, value: str) -> str:
    return hashlib.sha256(f"{key}\n{value}".encode("utf-8")).hexdigest()[:32]


class CachedModel(DelegatingModel):
    """``model`` with answers remembered in the SQLite file at ``path``.

    ``hits`` and ``misses`` count requests answered from / sent past the cache.
    """

    def __init__(self, model: LanguageModel, path: str | Path):
        super().__init__(model)
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        #: Entries found damaged (failed checksum) and asked again.
        self.damaged = 0
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 60000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(_SCHEMA)
            columns = [c[1] for c in self._db.execute("PRAGMA table_info(responses)")]
            if "sha" not in columns:  # a cache written before checksums
                try:
                    self._db.execute("ALTER TABLE responses ADD COLUMN sha TEXT")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):  # another process added it just now
                        raise
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                raise self._damaged(exc) from None
            raise StoreError(f"cannot open the response cache {self.path}: {exc}. "
                             "Check the path and its permissions, or delete a corrupt cache file.") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the response cache {self.path}: {exc}. "
                             "Check the path and its permissions, or delete a corrupt cache file.") from exc

    def _lookup(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        try:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value, sha in self._db.execute(
                    f"SELECT key, value, sha FROM responses WHERE key IN ({marks})", chunk
                ):
                    if sha is not None and sha != _entry_sha(key, value):
                        self.damaged += 1  # asked again and overwritten
                        continue
                    try:
                        json.loads(value)
                    except ValueError:
                        self.damaged += 1
                        continue
                    found[key] = value
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                raise self._damaged(exc) from None
            raise StoreError(f"cannot read the response cache {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the response cache {self.path}: {exc}") from exc
        return found

    def _damaged(self, exc: Exception) -> DamagedFileError:
        return DamagedFileError(f"the response cache {self.path} is damaged (SQLite says {exc}); delete it: "
                                "it only saves model calls, the run files hold every answer", [str(exc)])

    def _store(self, kind: str, items: list[tuple[str, str]]) -> None:
        if not items:
            return
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    # REPLACE: an entry that failed its checksum is overwritten by the fresh answer.
                    self._db.executemany(
                        "INSERT OR REPLACE INTO responses (key, kind, identity, value, sha) VALUES (?, ?, ?, ?, ?)",
                        [(key, kind, self.identity, value, _entry_sha(key, value)) for key, value in items],
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                raise self._damaged(exc) from None
            raise StoreError(f"cannot write the response cache {self.path}: {exc}") from exc

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Scores, answering repeated requests from the cache."""
        keys = [request_key(self.identity, r) for r in requests]
        found = self._lookup(keys)
        missing = [i for i, key in enumerate(keys) if key not in found]
        # A request repeated inside one batch is sent once.
        first_of: dict[str, int] = {}
        to_send = [i for i in missing if first_of.setdefault(keys[i], i) == i]
        self.hits += len(requests) - len(to_send)
        self.misses += len(to_send)
        try:
            fresh = self.model.score([requests[i] for i in to_send]) if to_send else []
        except PartialBatchError as exc:
            # Keep what was answered (and paid for) before re-raising, in request indices.
            kept = {to_send[i]: r for i, r in exc.answered.items()}
            self._store("score", [(keys[i], json.dumps([list(r.token_logprobs), r.is_greedy])) for i, r in kept.items()])
            raise PartialBatchError(str(exc), self._spread(kept, keys)) from None
        new_values = {keys[i]: json.dumps([list(r.token_logprobs), r.is_greedy]) for i, r in zip(to_send, fresh)}
        self._store("score", list(new_values.items()))
        found.update(new_values)
        results = []
        for key in keys:
            logprobs, greedy = json.loads(found[key])
            results.append(ScoreResult(tuple(float(x) for x in logprobs), bool(greedy)))
        return results

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Generations; greedy ones are cached, sampled ones always go to the backend."""
        keys = [request_key(self.identity, r) if r.temperature == 0 else None for r in requests]
        found = self._lookup([k for k in keys if k is not None])
        first_of: dict[str, int] = {}
        to_send = [
            i for i, key in enumerate(keys)
            if key is None or (key not in found and first_of.setdefault(key, i) == i)
        ]
        self.hits += len(requests) - len(to_send)
        self.misses += len(to_send)
        try:
            fresh = self.model.generate([requests[i] for i in to_send]) if to_send else []
        except PartialBatchError as exc:
            kept = {to_send[i]: t for i, t in exc.answered.items()}
            self._store("generate", [(keys[i], json.dumps(t)) for i, t in kept.items() if keys[i] is not None])
            raise PartialBatchError(str(exc), self._spread(kept, keys)) from None
        outputs: dict[int, str] = dict(zip(to_send, fresh))
        new_values = {keys[i]: json.dumps(text) for i, text in outputs.items() if keys[i] is not None}
        self._store("generate", list(new_values.items()))
        found.update(new_values)
        return [outputs[i] if i in outputs else json.loads(found[key]) for i, key in enumerate(keys)]

    @staticmethod
    def _spread(kept: dict[int, object], keys: list) -> dict[int, object]:
        """Answers for every request index whose key was answered (repeats included)."""
        by_key = {keys[i]: v for i, v in kept.items() if keys[i] is not None}
        out = {i: by_key[k] for i, k in enumerate(keys) if k is not None and k in by_key}
        out.update(kept)
        return out

    def close(self) -> None:
        """Close the cache file and the wrapped backend."""
        db, self._db = getattr(self, "_db", None), None
        if db is not None:
            db.close()
        super().close()
