"""The run settings, declared once: default, type and range, help, flag, TOML key, API keyword.

Each row of :data:`SETTINGS` is one setting of a run. Everything else is generated from
this table:

- the flags of ``kgprobe run`` (and the shared ones of ``kgprobe sweep`` and ``kgprobe
  resume``): :func:`kgprobe.commands.options.add_setting_arguments`;
- the check of a ``--config`` TOML file and of every resolved layer: :func:`check_settings`;
- :data:`kgprobe.settings.RUN_DEFAULTS`: :func:`defaults`;
- the keywords of :func:`kgprobe.probe` (its signature is written out for readers and
  editors; a test holds it to the table) and their documentation: :func:`api_doc`;
- the defaults and range checks of :class:`kgprobe.engine.EngineConfig`: :func:`check_value`.

Adding a setting is one :class:`Setting` row here, plus the code that consumes it.

Rules that plain ``isinstance`` gets wrong: ``True`` is not an integer (Python's bool is
an int subclass; ``seed = true`` is a mistake, not seed 1), an integer is a valid float
(``propagation_weight = 1``), and ``nan``/``inf`` are not valid numbers here.

Why not a schema library: the checks are few, the messages must name the key and the
expected type in the user's terms, and the bool-vs-int rule is easy to state here; a JSON
Schema validator would add a dependency for less clear messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kgprobe.errors import InputError

#: Commands whose flags come from this table.
RUN, SWEEP, RESUME = "run", "sweep", "resume"


@dataclass(frozen=True)
class Setting:
    """One run setting.

    ``name`` is the TOML key, the key of the resolved settings and (when ``api`` is true)
    the keyword of :func:`kgprobe.probe`. ``kind`` is the value type: ``"int"``,
    ``"float"``, ``"bool"``, ``"str"``, ``"list[str]"`` or ``"table"``. ``low``/``high``
    bound numbers (``low_open``: the bound itself is excluded); ``choices``: the values a
    string may take; ``optional``: ``None`` (unset) is allowed.

    Command line: ``flag`` (default ``--name-with-dashes``; ``""``: no flag),
    ``aliases`` (old flag names that still work with a warning), ``cli``: how the flag
    takes its value: ``"value"`` (one value of ``kind``), ``"list"`` (one or more values),
    ``"pairs"`` (repeatable ``KEY=VALUE``, for tables), ``"on"`` (a flag that sets true),
    ``"off"`` (a flag that sets false); ``commands``: the commands that offer the flag.
    ``group`` is the ``--help`` section.

    ``engine``: a field of :class:`kgprobe.engine.EngineConfig` (which takes its default
    from here). ``api_doc``: the documentation of the :func:`kgprobe.probe` keyword when
    it differs from ``help``.
    """

    name: str
    default: Any
    kind: str
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    optional: bool = False
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    toml_aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    cli: str = "value"
    metavar: str | None = None
    commands: tuple[str, ...] = (RUN,)
    group: str = "sampling and stopping"
    api: bool = True
    api_doc: str | None = None
    engine: bool = False

    @property
    def flag_name(self) -> str:
        return ("--" + self.name.replace("_", "-")) if self.flag is None else self.flag

    def describe_range(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"<= {self.high:g}")
        return " and ".join(parts)


KG, MODEL, SAMPLING, OUTPUT = "knowledge graph", "model and method", "sampling and stopping", "output"

#: Every run setting, in ``--help`` order within each group.
SETTINGS: tuple[Setting, ...] = (
    Setting("kg", "countries", "str", "a KG file or an embedded KG name", group=KG, commands=(RUN, SWEEP),
            api_doc="A KnowledgeGraph, a KG file path, or an embedded KG name (``\"countries\"``, ``\"geo\"``)."),
    Setting("endpoint", None, "str", "build the KG from this SPARQL endpoint URL first", optional=True, group=KG,
            api=False),
    Setting("seed_entities", None, "list[str]", "seed entities (QIDs or labels) for --endpoint", optional=True,
            group=KG, cli="list", metavar="ENTITY", aliases=("--seeds",), toml_aliases=("seeds",), api=False),
    Setting("hops", 2, "int", "random-walk hops for --endpoint", low=1, high=10, group=KG, api=False),
    Setting("model", "default", "str",
            "default | a registry name | a hub id (HuggingFaceTB/SmolLM2-135M) | a local directory | "
            "hf:ID | vllm:MODEL | openai:MODEL@BASE_URL (default: default, SmolLM2-135M-Instruct "
            "(GGUF Q4_1, dequantized))", group=MODEL, commands=(RUN, SWEEP, RESUME),
            api_doc="A LanguageModel or a spec for :func:`kgprobe.models.registry.load_model` (``\"default\"``, "
                    "a hub id such as ``\"HuggingFaceTB/SmolLM2-135M\"``, a local directory, ``\"hf:…\"``, "
                    "``\"vllm:…\"``, ``\"openai:model@base_url\"``)."),
    Setting("model_options", {}, "table",
            'a backend setting (JSON values; repeatable), e.g. base_urls=\'["http://a:8000/v1", '
            '"http://b:8000/v1"]\' or tensor_parallel_size=2', flag="--model-option", cli="pairs",
            metavar="KEY=VALUE", group=MODEL, commands=(RUN, SWEEP),
            api_doc="Backend settings for a model spec (e.g. ``{\"dtype\": \"bfloat16\"}``)."),
    # auto: CUDA when present, else CPU (kgprobe.models.devices).
    Setting("device", "auto", "str",
            "where a local model runs: auto, cpu, cuda or cuda:N (default auto: the GPU when there is one); "
            "API backends ignore it", metavar="DEVICE", group=MODEL, commands=(RUN, SWEEP, RESUME),
            api_doc="Where a local model runs: ``\"auto\"`` (the GPU when there is one), ``\"cpu\"``, ``\"cuda\"`` "
                    "or ``\"cuda:N\"``; recorded, so :func:`resume` places the model alike. A ``\"device\"`` in "
                    "``model_options`` is the same setting."),
    Setting("method", "zp-lke", "str", "probe method: zp-lke, hgp, yes-no, wh, easy, hard, …", group=MODEL,
            commands=(RUN, SWEEP), engine=True,
            api_doc="A probe name (:data:`kgprobe.probes.PROBES`): ``\"zp-lke\"``, ``\"hgp\"``, ``\"yes-no\"`` …"),
    Setting("probe_options", {}, "table", "a probe setting, e.g. num_examples=20 (JSON values; repeatable)",
            flag="--probe-option", cli="pairs", metavar="KEY=VALUE", group=MODEL, commands=(RUN, SWEEP),
            engine=True, api_doc="Options merged key by key over the method's defaults (type-checked)."),
    Setting("cache", None, "str", "SQLite response cache shared across runs", optional=True, metavar="FILE",
            group=MODEL, commands=(RUN, SWEEP, RESUME), api=False),
    Setting("round_timeout", None, "float",
            "HTTP backends (openai:): give up a round after this many seconds; its answered requests are kept for "
            "the resume (default: no limit beyond per-request timeouts)", low=0, low_open=True, optional=True,
            metavar="SECONDS", group=MODEL, commands=(RUN, SWEEP, RESUME), api=False),
    # Model replicas on Ray (kgprobe.models.ray_workers). Not part of the protocol: the
    # answers are identical on any number of workers.
    Setting("workers", None, "int",
            "run N model replicas as Ray actors and split every round across them (answers are identical to one "
            "worker); without --ray-address on a private Ray instance on this machine", low=1, optional=True,
            metavar="N", group=MODEL, commands=(RUN, SWEEP, RESUME),
            api_doc="Run this many replicas of the model (a spec string) as Ray actors; every round is split "
                    "across them and the answers are identical to one worker's (:mod:`kgprobe.models.ray_workers`). "
                    "Left out: no Ray, the model runs in-process. The run closes the workers when it is closed."),
    Setting("ray_address", None, "str",
            "put the workers on this running Ray cluster (its head's address, e.g. head:6379); --workers defaults "
            "to one per GPU of the cluster", optional=True, metavar="ADDR", group=MODEL,
            commands=(RUN, SWEEP, RESUME),
            api_doc="The running Ray cluster for the workers (its head's address); left out, a private local "
                    "Ray instance."),
    # The best sampler on the recorded real answers (`kgprobe bench efficiency --truth`,
    # docs/samplers-margin-focus.md: best on 17 of 20 sweeps, most of them recorded on KGs
    # no sampler was tuned on): it needs the fewest queries to find the model's errors.
    # Without margins (probes that generate their answers) it picks as focus. With the
    # default design fraction of 1 every probe is a design draw, so the choice matters once
    # --design-fraction is below 1 (its estimates are also the predictions the design leans
    # on and the estimators use).
    Setting("sampler", "margin-focus", "str",
            "margin-focus, focus, thompson, kglens-thompson, epsilon-greedy, uniform, brute-force, …", engine=True,
            api_doc="The sampler name (:data:`kgprobe.sampling.SAMPLERS`)."),
    Setting("sampler_options", {}, "table", "a sampler setting", flag="--sampler-option", cli="pairs",
            metavar="KEY=VALUE", engine=True,
            api_doc="Options merged key by key over the sampler's defaults (type-checked)."),
    # Why all of it: a design-unbiased estimate's variance is about residual variance /
    # design probes, so at the default budget no smaller share keeps the interval on the
    # KG accuracy as narrow (docs: the replay table). The aliases are the concept's older
    # name ("audit"), kept working with a warning for existing scripts and config files.
    Setting("design_fraction", 1.0, "float",
            "share of each batch drawn by the known-probability design the unbiased estimates rest on "
            "(default 1: every probe; lower it to give the sampler's own choices more, at the price of wider "
            "intervals)", low=0, high=1, metavar="SHARE", aliases=("--audit-fraction",),
            toml_aliases=("audit_fraction",),
            api_doc="Share of each batch drawn by the design with known inclusion probabilities (see ``design``) "
                    "that the unbiased estimates rest on; the rest is the sampler's own choice (for samplers "
                    "that take ``design_fraction``). Default 1. The old keyword ``audit_fraction`` still works, "
                    "with a DeprecationWarning."),
    # Adaptive: each round's draws lean towards edges predicted wrong or uncertain (known
    # probabilities, a floor shared by every model with the same seed, a minimum of draws
    # for every predicate and subject group); stratified keeps uniform probabilities with
    # those minimums. Run files made before these designs resume with "uniform"
    # (RECORDED_BEFORE, below). docs/design-measured.md has what each measured.
    Setting("design", "adaptive", "str",
            "how design probes are drawn: adaptive (default) leans towards edges predicted wrong or uncertain, "
            "stratified keeps uniform probabilities, both give every predicate and subject group design "
            "probes; uniform is a simple random sample (see docs/design.md)",
            choices=("uniform", "stratified", "adaptive"), engine=True,
            api_doc="How design probes are drawn (:mod:`kgprobe.sampling.design`): ``\"adaptive\"`` (default), "
                    "``\"stratified\"`` or ``\"uniform\"``; see docs/design.md."),
    # Off by default: where a model is strong the hunt widens the interval towards the
    # target (docs/design.md, "Hunting within a half-width target").
    Setting("lean_target", None, "float",
            "with the adaptive design: spend the KG interval's room up to this projected half-width "
            "(e.g. 0.055) on drawing edges predicted wrong; default: off", low=0, low_open=True, high=1,
            optional=True, metavar="HALF_WIDTH", engine=True,
            api_doc="With the adaptive design: a projected KG half-width (e.g. ``0.055``) up to which each "
                    "round's lean mixes in the chance of a wrong answer squared, hunting harder where a model "
                    "is strong (:func:`kgprobe.sampling.design.hunting_weights`); ``None`` (default): off."),
    # Run files or recorded sweeps of other models on the same KG (kgprobe.prior).
    Setting("prior", [], "list[str]",
            "run files or recorded sweeps of other models on the same KG: an item-response model of edge "
            "difficulty fitted from them starts the PKG, the estimates and the design", optional=True,
            cli="list", metavar="RUN_OR_SWEEP",
            api_doc="Run files or recorded sweeps of *other* models on the same KG (one or a list): an "
                    "item-response model of edge difficulty fitted from their answers starts the PKG and predicts "
                    "each outcome (:mod:`kgprobe.prior`). Another KG, or no shared edge, is an ``InputError``."),
    # Half: on replays it is what lets a sharp prior beat the uniform design, at no
    # measured cost with a weak one. Fixed by the prior alone, so runs with the same prior
    # and seed still share design edges.
    Setting("prior_design", 0.5, "float",
            "with --prior: share (0-1) of the design probabilities that follows the prior's predicted spread, "
            "drawing edges it leaves uncertain more often; scaled by how much the prior's sources agree on "
            "which edges are hard (default 0.5; 0: uniform)", low=0, high=1,
            metavar="SHARE", engine=True,
            api_doc="With ``prior``: share (0–1) of the design probabilities that follows the prior's predicted "
                    "outcome spread, so edges the prior leaves uncertain are drawn more often "
                    "(:func:`kgprobe.sampling.design_draws.prior_design_weights`; default 0.5, 0 = uniform), "
                    "times the sources' agreement (:meth:`kgprobe.prior.ItemPrior.design_share`: 1 with one "
                    "source). Fixed by the prior alone: runs with the same prior and seed compare paired."),
    # 0 keeps the design uniform, so runs with the same seed share design edges (paired).
    Setting("design_tilt", 0.0, "float",
            "share (0-1) of the design probabilities leaning towards edges predicted wrong (default 0: uniform, "
            "so runs with the same seed compare paired)", low=0, high=1, engine=True),
    # The default budget lets the default run (embedded countries KG, default model,
    # ZP-LKE) finish in a few minutes on 2 CPU cores.
    Setting("budget", 256, "int", "model queries to spend", low=1, optional=True, commands=(RUN, RESUME),
            engine=True,
            api_doc="Model queries to spend (one per scored option set or generation); at least one batch. "
                    "``None``: no budget (the run stops on convergence or after 60 rounds)."),
    Setting("batch_size", 32, "int", "edges per round", low=1, commands=(RUN, SWEEP), engine=True),
    Setting("max_rounds", None, "int", "stop after this many rounds", low=1, optional=True, commands=(RUN, RESUME),
            engine=True),
    Setting("seed", 0, "int", "random seed of the whole run; not --seed-entities", low=0, high=2**63 - 1,
            commands=(RUN, SWEEP), engine=True,
            api_doc="The seed that makes the whole run reproducible."),
    Setting("propagation_weight", 1.0, "float", "one-hop propagation weight w (1 as in KGLens; 0 turns propagation off)",
            low=0, engine=True),
    # The API sets these three through one keyword, ``convergence``.
    Setting("convergence_window", 5, "int", "rounds in the convergence window", low=2, engine=True, api=False),
    Setting("convergence_tolerance", 0.01, "float", "convergence tolerance", low=0, low_open=True, engine=True,
            api=False),
    Setting("stop_on_convergence", True, "bool", "keep going after the metrics converge",
            flag="--no-convergence-stop", cli="off", engine=True, api=False),
    Setting("out", "runs", "str", "directory for the run file", group=OUTPUT, commands=(RUN, SWEEP), api=False),
    Setting("report", True, "bool", "do not write the Markdown/HTML report at the end", flag="--no-report",
            cli="off", group=OUTPUT, commands=(RUN, RESUME),
            api_doc="Write the Markdown/HTML report next to the run file when the run has played (not for "
                    "in-memory or lazy runs; see :func:`kgprobe.report.write_report`)."),
    Setting("quiet", False, "bool", "no progress output", cli="on", group=OUTPUT, commands=(RUN, SWEEP, RESUME),
            api=False),
    Setting("plain", False, "bool", "line-by-line progress even on a terminal", cli="on", group=OUTPUT,
            commands=(RUN, SWEEP, RESUME), api=False),
)

#: Settings by name.
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: Old TOML names still accepted, with a warning: ``old -> new``.
TOML_ALIASES: dict[str, str] = {a: s.name for s in SETTINGS for a in s.toml_aliases}
#: The settings of :class:`kgprobe.engine.EngineConfig` that come from this table.
ENGINE_SETTINGS: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.engine)
#: What a run file written before a field of :class:`kgprobe.engine.EngineConfig` was
#: recorded was played with (a new run's value may differ): two settings of this table,
#: and the design rules that are recorded but not settings (``design_pacing``,
#: ``lean_control``). The engine resumes such files with these; their protocols show them.
RECORDED_BEFORE: dict[str, Any] = {"prior_design": 0.0, "design": "uniform", "design_pacing": "early",
                                   "lean_control": "projected"}


def defaults() -> dict[str, Any]:
    """Every setting at its default (fresh copies of mutable defaults)."""
    return {s.name: (type(s.default)(s.default) if isinstance(s.default, (dict, list)) else s.default)
            for s in SETTINGS}


def default(name: str) -> Any:
    return BY_NAME[name].default


def settings_for(command: str) -> tuple[Setting, ...]:
    """The settings ``command`` (``run``, ``sweep``, ``resume``) offers as flags."""
    return tuple(s for s in SETTINGS if command in s.commands and s.flag_name)


_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
          "list[str]": "a list of strings", "table": "a table (key = value pairs)"}


def type_name(kind: str) -> str:
    return _NAMES[kind]


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list[str]":
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    if kind == "table":
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    raise ValueError(f"unknown setting kind {kind!r}")


def problem(name: str, value: Any, *, key: str | None = None) -> str | None:
    """Why ``value`` is not a valid value of setting ``name`` (None when it is).

    The one check of a setting's type and range: the command line, config files, the API
    and :class:`~kgprobe.engine.EngineConfig` all ask it, so all give the same message.
    ``key`` is the spelling to name (``seed-entities`` in a TOML file written with dashes).
    """
    spec = BY_NAME[name]
    key = key or name
    if value is None and spec.optional:
        return None
    if not _type_ok(spec.kind, value):
        hint = ""
        if spec.kind in ("int", "float") and isinstance(value, bool):
            hint = " (true/false is not a number)"
        elif spec.kind == "int" and isinstance(value, float) and value.is_integer():
            hint = f" (write {int(value)} without a decimal point)"
        elif spec.kind == "float" and isinstance(value, float):
            hint = " (nan and inf are not allowed)"
        return f"setting {key!r} must be {_NAMES[spec.kind]}, not {_describe(value)}{hint}"
    if spec.kind in ("int", "float"):
        too_low = spec.low is not None and (value <= spec.low if spec.low_open else value < spec.low)
        too_high = spec.high is not None and value > spec.high
        if too_low or too_high:
            return f"setting {key!r} must be {_NAMES[spec.kind]} {spec.describe_range()}, not {value!r}"
    if spec.choices and value not in spec.choices:
        return f"setting {key!r} must be one of {', '.join(spec.choices)}, not {value!r}"
    if spec.kind == "str" and "\x00" in value:
        return f"setting {key!r} contains a NUL character"
    return None


def check_value(name: str, value: Any, source: str = "") -> None:
    """:class:`InputError` when ``value`` is not a valid value of setting ``name``."""
    why = problem(name, value)
    if why is not None:
        raise InputError(f"{source}: {why}" if source else why)


def check_settings(mapping: Mapping[str, Any], source: str, *, known: Iterable[str] = ()) -> None:
    """Raise :class:`InputError` for the first wrong setting in ``mapping``.

    ``source`` names where the settings came from ("config file run.toml", "the command
    line") for the message. Keys may use ``-`` or ``_``; old names (:data:`TOML_ALIASES`)
    are accepted. ``known``: further accepted keys that the table does not describe.
    """
    if not isinstance(mapping, Mapping):
        raise InputError(f"{source}: the settings must be a table of key = value pairs")
    extra = {k.replace("-", "_") for k in known}
    accepted = set(BY_NAME) | set(TOML_ALIASES) | extra
    unknown = [k for k in mapping if isinstance(k, str) and k.replace("-", "_") not in accepted]
    if unknown:
        raise InputError(f"{source}: unknown setting(s) {', '.join(sorted(unknown))}; known settings: "
                         f"{', '.join(sorted(set(BY_NAME) | set(TOML_ALIASES) | extra))}")
    for raw_key, value in mapping.items():
        if not isinstance(raw_key, str):
            raise InputError(f"{source}: setting names must be strings, not {raw_key!r}")
        key = raw_key.replace("-", "_")
        name = TOML_ALIASES.get(key, key)
        if name not in BY_NAME:
            continue  # in ``extra``: the caller checks it
        why = problem(name, value, key=raw_key)
        if why is not None:
            raise InputError(f"{source}: {why}")


def api_doc() -> str:
    """The numpydoc ``Parameters`` entries of the :func:`kgprobe.probe` keywords that are
    run settings, from the table (indented for a function's docstring)."""
    import textwrap

    out = []
    for s in SETTINGS:
        if not s.api:
            continue
        text = s.api_doc or (s.help[0].upper() + s.help[1:] + ".")
        if s.api_doc is None and s.default is not None and s.default != {} and s.default != [] \
                and "default" not in text.lower():
            text = text[:-1] + f" (default {s.default!r})."
        out.append(f"    {s.name}:\n" + textwrap.fill(text, 88, initial_indent=" " * 8, subsequent_indent=" " * 8,
                                                        break_on_hyphens=False))
    return "\n".join(out)
