"""kgprobe: measure what a language model knows by probing it on a knowledge graph."""

__version__ = "0.1.0"

#: The public Python API (see :mod:`kgprobe.api`), imported on first use so that
#: ``import kgprobe`` stays cheap for the command line.
__all__ = ["probe", "resume", "open_run", "Run", "__version__"]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str):
    if name in ("probe", "resume", "open_run", "Run"):
        from kgprobe import api

        return getattr(api, name)
    raise AttributeError(f"module 'kgprobe' has no attribute {name!r}")
