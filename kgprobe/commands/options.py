"""Command-line options shared by several commands (one definition, one help text)."""

from __future__ import annotations

import argparse
import sys

from kgprobe.errors import InputError
from kgprobe.models.devices import DEVICE_CHOICES, check_device_spec
from kgprobe.run_spec import Setting, settings_for, type_name


def _device_type(value: str) -> str:
    try:
        return check_device_spec(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_device_option(parser, *, default=argparse.SUPPRESS, help_default: str = "auto") -> None:
    """``--device auto|cpu|cuda[:N]`` for local model backends (transformers, vLLM).

    argparse rejects a bad value with a usage message and exit code 2.
    """
    parser.add_argument(
        "--device", type=_device_type, default=default, metavar="DEVICE",
        help=f"where a local model runs: {DEVICE_CHOICES} (default {help_default}: the GPU when "
             "there is one); API backends ignore it",
    )


class RenamedOption(argparse.Action):
    """An old option name kept as an alias: it works, and says what it is called now."""

    def __init__(self, option_strings, dest, new_name: str = "", **kwargs):
        self.new_name = new_name
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"kgprobe: warning: {option_string} is now {self.new_name}; the old name still works for now",
              file=sys.stderr)
        if self.type is None and self.nargs is None and isinstance(values, str) and self.const is not None:
            values = self.const
        setattr(namespace, self.dest, values)


def _typed(setting: Setting):
    """The argparse ``type`` of one flag value: a short error naming the flag and the type
    expected (``--budget: expected an integer, not 'ten'``), not a usage block."""
    if setting.name == "device":
        return _device_type
    convert = {"int": int, "float": float}.get(setting.kind if setting.cli == "value" else "")
    if convert is None:
        return None

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {type_name(setting.kind)}, not {text!r}") from None
        return value

    parse.__name__ = setting.kind  # argparse names the type in some messages
    return parse


def _help(setting: Setting, show_default: bool) -> str:
    text = setting.help
    shown = setting.default
    if show_default and "default" not in text and shown is not None and shown != {} and shown != [] \
            and setting.cli not in ("on", "off"):
        shown = f"{shown:g}" if isinstance(shown, float) else shown
        text = f"{text} (default {shown})"
    return text


def add_setting_arguments(parser, command: str, *, unset=argparse.SUPPRESS, groups: bool = True,
                          help: dict | None = None) -> dict:
    """The flags of the run settings ``command`` offers (:mod:`kgprobe.run_spec`).

    ``unset``: the value of a flag not given (SUPPRESS leaves it out, so a config file can
    supply it). ``help``: per-setting help text replacing the table's (resume's "raise the
    run's budget"). With ``groups`` the flags are in the table's ``--help`` sections;
    returns them by name, for a command's own flags.
    """
    sections: dict[str, object] = {}
    for setting in settings_for(command):
        target = parser
        if groups:
            if setting.group not in sections:
                sections[setting.group] = parser.add_argument_group(setting.group)
            target = sections[setting.group]
        text = (help or {}).get(setting.name)
        flag_default = setting.default if setting.cli in ("on", "off") and unset is not argparse.SUPPRESS else unset
        kwargs: dict = {"dest": setting.name, "default": flag_default,
                        "help": text if text is not None else _help(setting, unset is argparse.SUPPRESS)}
        if setting.cli == "on":
            kwargs["action"] = "store_true"
        elif setting.cli == "off":
            kwargs["action"] = "store_false"
        elif setting.cli == "pairs":
            kwargs.update(action="append")
        elif setting.cli == "list":
            kwargs.update(nargs="+")
        typed = _typed(setting)
        if typed is not None:
            kwargs["type"] = typed
        if setting.metavar:
            kwargs["metavar"] = setting.metavar
        if setting.choices:
            kwargs["choices"] = setting.choices
        target.add_argument(setting.flag_name, **kwargs)
        for alias in setting.aliases:
            alias_kwargs = {k: v for k, v in kwargs.items() if k not in ("help", "action", "metavar")}
            target.add_argument(alias, action=RenamedOption, new_name=setting.flag_name, **alias_kwargs)
    return sections
