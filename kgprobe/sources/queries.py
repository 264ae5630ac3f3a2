"""The SPARQL queries in ``queries/*.rq``: one query per file, shared by every endpoint.

Parameters are written ``${name}`` in the query text (:class:`string.Template`); each
file's header comment lists them. ``#`` comment lines are dropped before substitution,
so a parameter can never spill out of a comment.

Where the files live: the repository's top-level ``queries/`` directory. The package
directory ``kgprobe/queries`` is a symlink to it, so an editable install reads the repo
files and a wheel or sdist (setuptools copies symlinked package data as regular files,
``[tool.setuptools.package-data] kgprobe = ["queries/*.rq"]``) ships them inside the
package. Either way they are read with :mod:`importlib.resources`.
"""

from __future__ import annotations

import string
from functools import lru_cache
from importlib import resources

from kgprobe.errors import SourceError

QUERY_NAMES = (
    "forward_walk",
    "backward_walk",
    "entity_labels",
    "predicate_labels",
    "true_objects",
    "candidate_objects",
    "resolve_labels",
    "entity_claims",
    "label_languages",
)


@lru_cache(maxsize=None)
def load_query(name: str) -> str:
    """The text of ``queries/<name>.rq`` (comments included)."""
    resource = resources.files("kgprobe") / "queries" / f"{name}.rq"
    try:
        return resource.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise SourceError(
            f"query file {name}.rq is missing from the kgprobe installation; reinstall kgprobe"
        ) from None


def render_query(name: str, **params: object) -> str:
    """``queries/<name>.rq`` with its ``${...}`` parameters filled in; comments removed.

    A missing parameter is a programming error and raises ``KeyError``.
    """
    body = "\n".join(line for line in load_query(name).splitlines() if not line.lstrip().startswith("#"))
    return string.Template(body).substitute({k: str(v) for k, v in params.items()})


def with_limit(query: str, limit: int | None = None, offset: int = 0) -> str:
    """``query`` with ``LIMIT``/``OFFSET`` appended (the query must not have its own)."""
    out = query.rstrip()
    if limit is not None:
        out += f"\nLIMIT {int(limit)}"
    if offset:
        out += f"\nOFFSET {int(offset)}"
    return out + "\n"
