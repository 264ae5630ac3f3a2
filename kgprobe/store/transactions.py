"""Opening, locking and writing a run file: one transaction per write, a clear error for
every SQLite failure, and an exclusive lock for the writer's lifetime."""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3

from kgprobe.errors import DamagedFileError, KgprobeError, StoreError

#: Test hook, the fault-injecting write layer: with this environment variable set to
#: ``ROUND``, committing that round (and every later one) fails as SQLite fails on a full
#: disk (``database or disk is full``), so the fault suite can aim a full disk at the
#: middle of a run; a real full disk is hard to time (the KG is most of the file).
DISK_FULL_ENV = "KGPROBE_TEST_DISK_FULL_AT_ROUND"



def reads(method):
    """Decoding or SQLite failures while reading become a clear error, never a traceback."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except KgprobeError:
            raise
        except sqlite3.OperationalError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                raise DamagedFileError(f"run file {self.path} is damaged: SQLite says {exc}",
                                       [str(exc)]) from None
            raise StoreError(f"cannot read the run store {self.path}: {exc}") from None
        except Exception as exc:  # zlib.error, JSON, npz, sqlite3.DatabaseError: the bytes are wrong
            raise DamagedFileError(
                f"run file {self.path} is damaged: reading {method.__name__} failed ({type(exc).__name__}: "
                f"{str(exc)[:160]}); `kgprobe verify {self.path}` lists the damage",
                [str(exc)],
            ) from None

    return wrapper


class Transaction:
    """One write transaction; inside an open one (a round's, :meth:`RunStore.round_transaction`)
    a savepoint instead, so the block is still all-or-nothing within the outer transaction."""

    def __init__(self, conn: sqlite3.Connection, path: str):
        self.conn, self.path = conn, path
        self.nested = False

    def __enter__(self):
        self.nested = self.conn.in_transaction
        try:
            self.conn.execute("SAVEPOINT nested" if self.nested else "BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise write_error(self.path, exc) from None
        return self.conn

    def __exit__(self, exc_type, exc, tb):
        if self.nested:
            try:
                self.conn.execute("RELEASE nested" if exc_type is None else "ROLLBACK TO nested")
                if exc_type is not None:
                    self.conn.execute("RELEASE nested")
            except sqlite3.Error as err:
                if exc_type is None:
                    raise write_error(self.path, err) from None
            if isinstance(exc, sqlite3.Error):
                raise write_error(self.path, exc) from None
            return False
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as err:
                self._rollback()
                raise write_error(self.path, err) from None
        else:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise write_error(self.path, exc) from None
        return False

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite already rolled back (disk full, I/O error)


def disk_full_hook(round_: int) -> None:
    """:data:`DISK_FULL_ENV`: fail this round's commit as a full disk would."""
    at = os.environ.get(DISK_FULL_ENV)
    if at and round_ >= int(at):
        raise sqlite3.OperationalError("database or disk is full")


def write_error(path: str, exc: sqlite3.Error) -> Exception:
    """A clear error for a failed write: damaged file (exit 2), else store error (exit 5)."""
    text = str(exc)
    if path != ":memory:" and not os.path.exists(path):
        return StoreError(f"run file {path} was deleted while the run was writing it (SQLite: {text}); "
                          "the results of this run are lost. Keep the run file in place until the run ends")
    if "malformed" in text or "not a database" in text:
        return DamagedFileError(f"run file {path} is damaged: SQLite says {text}; `kgprobe verify {path}` "
                                "lists the damage", [text])
    if "full" in text:
        return StoreError(f"cannot write the run store {path}: the disk is full ({text}). Everything up to the "
                          f"last finished round is saved; free some space, then `kgprobe resume {path}`")
    return StoreError(f"cannot write the run store {path}: {text}. Everything up to the last finished round "
                      f"is saved; fix the cause, then `kgprobe resume {path}`")


def connect(path: str, readonly: bool = False) -> sqlite3.Connection:
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


def writer_active(path: str) -> bool:
    """Whether a kgprobe process holds ``path``'s writer lock now (a run still being written).

    A shared, non-blocking ``flock`` on a fresh descriptor fails exactly while a writer
    holds its exclusive one (:func:`lock`); it is released at once. A writer that was
    killed holds nothing, so its file reads as not being written (its status stays
    ``running``, which is how a reader tells it from a finished run).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing the descriptor releases a shared lock taken on it
    return False


def lock(fd: int, path: str) -> None:
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
