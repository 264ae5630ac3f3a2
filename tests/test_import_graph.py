"""Imports flow one way: no circles among kgprobe's modules, and (almost) none back up the layers.

Every module is parsed with :mod:`ast`; every import counts, those at the top and those
inside functions (which run later but still tie the modules together), absolute and
relative ones. ``from kgprobe.x import y`` is an import of the submodule ``kgprobe.x.y``
when there is one, else of ``kgprobe.x``. The graph is over modules; a package's
``__init__`` is a module of its own (the package name).

The top package ``kgprobe/__init__.py`` is left out of the graph: its only kgprobe import
is the lazy re-export of the API inside ``__getattr__`` (``kgprobe.probe`` and friends),
which runs when user code asks for those names, never when a kgprobe module imports
``kgprobe`` for ``__version__``. Counting it would make every module that reads the
version depend on the whole API.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kgprobe"

#: The layers, lowest first: a module may import its own layer and those below.
#: The more specific prefix wins (``kgprobe.kg.graph`` over ``kgprobe.kg``). The store sits below the engine: the engine writes every round through it, and the
#: store needs only KGs and model request types. ``bench`` may import anything.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("kgprobe.errors", "kgprobe.run_spec", "kgprobe.metrics", "kgprobe.ranking", "kgprobe.report_plots")),
    # The KG data type that sources produce (it imports nothing but errors).
    ("kg data type", ("kgprobe.kg.graph",)),
    ("sources", ("kgprobe.sources",)),
    ("kg", ("kgprobe.kg",)),
    ("models", ("kgprobe.models",)),
    ("sampling/probes", ("kgprobe.sampling", "kgprobe.probes")),
    ("settings, estimators, prior, store", ("kgprobe.settings", "kgprobe.baselines", "kgprobe.estimators", "kgprobe.predictions",
                                            "kgprobe.prior",
                                            "kgprobe.store", "kgprobe.sweep", "kgprobe.inputs")),
    ("engine", ("kgprobe.engine", "kgprobe.protocol", "kgprobe.prior_sources", "kgprobe.simulation")),
    ("runs/live/report", ("kgprobe.live", "kgprobe.runs", "kgprobe.report", "kgprobe.compare", "kgprobe.start")),
    ("api/cli/commands", ("kgprobe.api", "kgprobe.cli", "kgprobe.commands")),
    ("bench", ("kgprobe.bench",)),
]

#: The one import allowed to run back up the layers: the parameterized KG keeps its
#: posterior bins with the sampler's numeric helper (a leaf module of plain numpy).
ALLOWED_UPWARD = {("kgprobe.kg.parameterized", "kgprobe.sampling.beta_bins")}


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module (or package) an imported dotted name lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """Every kgprobe module ``module`` imports, anywhere in its source."""
    path, is_package = MODULES[module]
    base = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                source = f"{anchor}.{node.module}" if node.module else anchor
            else:
                source = node.module or ""
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        for name in names:
            if name == "kgprobe" or name.startswith("kgprobe."):
                owner = _owner(name)
                if owner and owner not in (module, "kgprobe"):
                    found.add(owner)
    return found


GRAPH = {m: imports_of(m) for m in MODULES if m != "kgprobe"}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    if rank is None:
        raise AssertionError(f"{module} is in no layer of tests/test_import_graph.py; add it to LAYERS")
    return rank


def test_the_parser_sees_imports_inside_functions_relative_ones_and_submodules():
    # Hand-checked facts of the source: a function-level import, and ``from kgprobe import run_spec``.
    assert "kgprobe.live" in GRAPH["kgprobe.runs"]  # inside Run.finish
    assert "kgprobe.run_spec" in GRAPH["kgprobe.engine"]  # `from kgprobe import run_spec`: the submodule
    assert "kgprobe.probes.zp_lke" in GRAPH["kgprobe.probes"]  # the registry's imports
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_imports_run_down_the_layers():
    upward = sorted((m, t) for m, targets in GRAPH.items() for t in targets if layer_of(t) > layer_of(m))
    assert set(upward) <= ALLOWED_UPWARD, [f"{m} -> {t}" for m, t in upward if (m, t) not in ALLOWED_UPWARD]
    assert len(upward) <= 1


def test_nothing_imports_bench():
    assert [m for m, targets in GRAPH.items() if not m.startswith("kgprobe.bench")
            and any(t.startswith("kgprobe.bench") for t in targets)] == []


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_module_imports_another_modules_private_names(module):
    path, _ = MODULES[module]
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kgprobe"):
            bad += [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []
