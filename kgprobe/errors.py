"""Errors that kgprobe reports to a user instead of a traceback.

Every error a user can cause (bad input, an unreachable endpoint, a malformed file)
is a :class:`KgprobeError`. The CLI prints its message and exits with ``exit_code``;
the Python API lets it propagate. Messages name what is wrong and how to fix it.
"""

from __future__ import annotations


class KgprobeError(Exception):
    """An error with a message meant for the user. CLI exit code 2 unless overridden."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(KgprobeError):
    """Invalid arguments, configuration or data supplied by the user (exit 2)."""


class SourceError(KgprobeError):
    """A KG source (SPARQL endpoint, file) failed or returned unusable data (exit 3)."""

    exit_code = 3


class ModelError(KgprobeError):
    """A model backend failed: missing weights, server down, API error (exit 4)."""

    exit_code = 4


class StoreError(KgprobeError):
    """The run store cannot be read or written (exit 5)."""

    exit_code = 5


class DamagedFileError(InputError):
    """A run or cache file whose content fails its checksums or cannot be decoded (exit 2).

    Raised instead of reading on: a damaged file never yields numbers. ``problems`` lists
    what is damaged, one line each.
    """

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems or [])


class PartialBatchError(ModelError):
    """A batch failed part-way: some requests were answered, at least one failed for good
    (or the round's deadline passed). ``answered`` maps request index -> result, so the
    caller can keep what was paid for (the run store and the response cache do)."""

    def __init__(self, message: str, answered: dict | None = None):
        super().__init__(message)
        self.answered = dict(answered or {})
