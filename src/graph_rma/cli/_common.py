"""What every ``graph-rma`` command shares: one parser class, argument types (:mod:`graph_rma.argtypes`'s, which the
example scripts use too, and the variant check) and the error handling.

The grammar, the same in every command:

* ``--variants SPEC [SPEC ...]`` wherever a command runs several variants (``cora``, ``text``); ``--variant SPEC``
  where one run folder holds exactly one model (``agenda``/``webnlg train``, and to find that folder in
  ``generate``/``evaluate``/``heads``).
* ``--seeds S [S ...]`` is always a list of seeds, each a number or an inclusive range ``A-B`` (``--seeds 0-9``);
  ``--seed N`` is one seed, where a command trains exactly one run.
* ``--out DIR`` is a folder (an existing file there, or a folder that cannot be written, is refused before anything
  runs; so is a default output folder that cannot be written).
* ``--device`` is ``cpu``, ``cuda`` or ``cuda:N`` (a CUDA device that does not exist is refused at once).

A user's mistake (a misspelt variant, a count below 1, missing data, an output folder that is a file, a run that
does not exist) prints one line and exits with 2 (1 for missing data or a missing optional extra) before any data is
loaded; any other exception is a bug and shows its traceback. Nothing here imports torch: ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from .._errors import UsageError, classify
from ..argtypes import (
    SeedsAction,
    add_threads_option,
    device,
    nonnegative_float,
    nonnegative_int,
    out_dir,
    out_file,
    positive_float,
    positive_int,
    probability,
    require_out_dir,
    seed,
    seed_list,
)

__all__ = [
    "HelpFormatter",
    "KIND_TYPES",
    "Parser",
    "SeedsAction",
    "UsageError",
    "add_config_options",
    "add_threads_option",
    "device",
    "format_preset",
    "nonnegative_float",
    "nonnegative_int",
    "out_dir",
    "out_file",
    "positive_float",
    "positive_int",
    "probability",
    "require_out_dir",
    "run_command",
    "seed",
    "seed_list",
    "strip_markup",
    "variant_spec",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and ``(default: X)`` after every option's help. Options whose default is ``None``
    say in their own help what happens without them; flags (default ``False``) need no default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or isinstance(action, (argparse._StoreTrueAction, argparse._VersionAction)):
            return action.help or ""
        if action.help and "(default:" in action.help:  # the help states its default itself
            return action.help
        if isinstance(action.default, (list, tuple)) and action.help and action.help is not argparse.SUPPRESS:
            shown = " ".join(str(v) for v in action.default).replace("%", "%%")
            return f"{action.help} (default: {shown})"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` with :class:`HelpFormatter` whose errors are one line (and exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------------------------------------------
# Argument types: each turns one command-line word into a value or raises ArgumentTypeError (argparse prints it);
# the plain ones are graph_rma.argtypes' (shared with the example scripts), the variant check is the CLI's own
# ---------------------------------------------------------------------------------------------------------------
def variant_spec(text: str) -> str:
    """A variant spec string checked by :func:`graph_rma.variants.parse_variant` (returned as given)."""
    from ..variants import parse_variant  # imported only when a command line is parsed, not for --help

    try:
        parse_variant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_seeds(parser: argparse.ArgumentParser, default_help: str) -> None:
    """``--seeds S [S ...]`` (a list; ranges ``A-B``)."""
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=seed_list,
        action=SeedsAction,
        default=None,
        metavar="S",
        help=f"the seeds, each a number or a range A-B, e.g. --seeds 0 1 2 or --seeds 0-9 (default: {default_help})",
    )


#: the argument type of a configuration field's option, by the field's kind (``metadata["kind"]``,
#: :data:`graph_rma.tasks.config_fields.KINDS`; choices and bools aside)
KIND_TYPES: Dict[str, Callable[[str], Any]] = {
    "positive_int": positive_int,
    "nonnegative_int": nonnegative_int,
    "optional_positive_int": positive_int,
    "probability": probability,
    "positive_float": positive_float,
    "nonnegative_float": nonnegative_float,
    "finite_float": float,
}


def add_config_options(group: argparse._ActionsContainer, config_fields: Iterable[Any], note: str = "") -> None:
    """One option per field of a configuration dataclass (:mod:`graph_rma.tasks.config_fields`), generated from its
    metadata: ``--<name with dashes>`` with the field's help (and ``note`` after it), its choices or the argument
    type of its kind (:data:`KIND_TYPES`); a bool field is the pair ``--x`` / ``--no-x``; a field whose metadata says
    ``option=False`` has none. Every default is ``None``: the configuration's value."""
    for f in config_fields:
        if not f.metadata.get("option", True):
            continue
        flag, kind = "--" + f.name.replace("_", "-"), f.metadata["kind"]
        text = f.metadata["help"] + (f" {note}" if note else "")
        if kind == "bool":
            pair = group.add_mutually_exclusive_group()
            pair.add_argument(flag, dest=f.name, action="store_const", const=True, default=None, help=text)
            pair.add_argument(
                "--no-" + flag[2:], dest=f.name, action="store_const", const=False, help=f"the opposite of {flag}"
            )
        elif kind == "choice":
            group.add_argument(flag, dest=f.name, choices=f.metadata["choices"], default=None, help=text)
        else:
            group.add_argument(flag, dest=f.name, type=KIND_TYPES[kind], default=None, help=text)


def format_preset(name: str, values: Mapping[str, Any]) -> str:
    """``name: key=value, ...`` for a preset's help text."""
    return f"{name}: " + ", ".join(f"{k}={v}" for k, v in values.items())


# ---------------------------------------------------------------------------------------------------------------
# Running a command
# ---------------------------------------------------------------------------------------------------------------
def run_command(prog: str, fn: Callable[[], Optional[int]]) -> int:
    """Call ``fn()`` (parsing the command line and running the command) and return its exit code (argparse's own
    exits included, so ``main(argv)`` always returns); a user's mistake raised by the package becomes one line on
    stderr and exit code 2 (``GraphRMAError``, :class:`UsageError`, a refused checkpoint or resume) or 1 (missing data,
    a missing optional extra or tool, a file-system failure on a user's path). Any other exception propagates with
    its traceback: it is a bug. Ctrl-C that the command does not handle itself ends it with one line and exit code
    130. What is a user's mistake is decided in one place, shared with
    :func:`graph_rma.engine.one_line_errors` (``graph_rma._errors.classify``)."""
    try:
        return int(fn() or 0)
    except KeyboardInterrupt:  # Ctrl-C where the command has no save of its own to report (start-up, data loading)
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # argparse: --help (0) or a one-line usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:
        verdict = classify(exc)
        if verdict is None:
            raise
        print(f"{prog}: {verdict[1]}", file=sys.stderr)
        return verdict[0]


def check_trained_run(out: Path, checkpoint: Optional[Path], prog: str, train_hint: str) -> Path:
    """The checkpoint a ``generate``/``evaluate``/``heads`` command reads: ``--checkpoint`` or ``OUT/best.pt``;
    :class:`UsageError` naming the command that makes it when it does not exist."""
    if checkpoint is not None:
        if not Path(checkpoint).is_file():
            raise UsageError(f"--checkpoint: no such file {checkpoint}")
        return Path(checkpoint)
    if not (Path(out) / "best.pt").is_file():
        raise UsageError(f"no trained run in {out}: run `{train_hint}` first")
    return Path(out) / "best.pt"


def command_summary(doc: Optional[str]) -> str:
    """The first line of a command module's docstring without its reST markup: the line ``graph-rma`` lists."""
    line = (doc or "").strip().split("\n")[0]
    if line.startswith("``") and "``:" in line:
        line = line.split("``:", 1)[1]
    return strip_markup(line).strip()


def strip_markup(text: str) -> str:
    """``x`` -> x, :func:`a.b` -> a.b, ``**x**`` -> x: plain text for help output."""
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    text = re.sub(r"::$", ":", text, flags=re.M)
    return text.replace("``", "").replace("**", "")


def description(doc: Optional[str]) -> str:
    """A command module's docstring as its ``--help`` description (plain text)."""
    return strip_markup((doc or "").strip())
