"""Options that the ``rlgate`` CLI and the pytest plugin share, each defined once.

An :class:`Option` holds ``argparse`` keyword arguments (type, help, metavar, shape,
default). argparse's ``add_argument`` and pytest's ``Parser.addoption`` take the same keywords,
so both consume :meth:`Option.kwargs`:

* the pytest plugin registers each option as ``--rlgate-<name>`` with the historic
  ``--<name>`` kept as an alias (:attr:`Option.pytest_flags`, destination
  :attr:`Option.dest`), and checks at parsing that a path option names an existing path
  (:func:`rlgate.core.validate.existing_path`): a typo is a usage error before collection;
* a CLI command registers it under :attr:`Option.cli_flag` (``swe compare`` says
  ``--alpha`` where the plugin, whose options share one namespace with every other
  plugin's, says ``--rlgate-swe-alpha``). Paths are read, and a missing one refused with
  one message, by the command's readers at its error boundary (exit 2).

Each option also says what it names for the output guard (:attr:`Option.role`, a
:class:`rlgate.core.io.Role`: an input path, a recipe with its ``defaults:`` chain, the
tokenizer root, an output): the plugin's guard (:mod:`rlgate.pytest_plugin.outputs`)
declares every option by it, and the CLI's table (:mod:`rlgate.cli.outputs`) must agree.

A command may change only what differs by command: whether the option is ``required``,
its ``default``, and a list shape (``action``/``nargs``, e.g. ``rlgate report --band-run
A B``); the type, validator, help and metavar are the table's.

Every option that takes a list accumulates over its occurrences: one value each time
(``action="append"``: ``--override a=1 --override b=2``) or several (:class:`Extend`:
``--junit A --junit B C`` is ``--junit A B C``; a default list is replaced by the values
given, not extended). ``tests/unit/test_cli_repeated_options.py`` walks every command's
parser to keep it so.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlgate.core.io import Role
from rlgate.core.validate import (
    existing_path,
    float_in,
    nonempty,
    positive_int,
)

__all__ = [
    "BAND_RUN",
    "BASELINE",
    "JSON",
    "MAX_STEPS",
    "PLUGIN_OPTIONS",
    "RECIPE",
    "ROLLOUTS",
    "RUN_DIR",
    "SWE_AFTER",
    "SWE_ALPHA",
    "SWE_BEFORE",
    "SWE_DATASET",
    "SWE_MARGIN_PP",
    "SWE_MAX_INFRA_ERROR_RATE",
    "SYNC_RUN",
    "TOKENIZERS",
    "WARNED",
    "Extend",
    "Option",
    "add_recipe_or_name",
    "add_renamed",
    "recipe_file",
]

#: Prefix of every option the pytest plugin registers (its historic names stay aliases).
PYTEST_PREFIX = "--rlgate-"
#: What a command may change about a shared option (everything else is the table's).
_SHAPE = frozenset({"required", "default", "action", "nargs"})


class Extend(argparse.Action):
    """A list option that keeps every value of every occurrence (``nargs`` ``+`` by default).

    ``--junit A --junit B C`` gives ``[A, B, C]``; the first occurrence replaces the default
    (``swe power --n 100`` is ``[100]``, not the default ``[500]`` plus 100).
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Append ``values`` to what earlier occurrences gave (not to the default)."""
        current = getattr(namespace, self.dest, None)
        kept = [] if current is None or current is self.default else list(current)
        kept += values if isinstance(values, list) else [values]
        setattr(namespace, self.dest, kept)


@dataclass(frozen=True, slots=True)
class Option:
    """One option, as argparse keyword arguments plus its names."""

    name: str  # the bare name: the plugin's --rlgate-<name> and --<name>
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    action: str | type[argparse.Action] | None = None
    nargs: str | None = None
    default: Any = None
    env: str | None = None  # default from this environment variable, read when registered
    path: bool = False  # names a file or directory that must exist (checked by the plugin)
    cli: str | None = None  # the CLI's flag when it is not --<name>
    alias: bool = True  # the plugin also accepts the historic --<name>
    role: Role = Role.NAME  # what it names for the output guard (an input, an output, no path)

    @property
    def dest(self) -> str:
        """The plugin's destination: ``config.getoption(dest)`` (``run-dir`` -> ``run_dir``).

        An option without the bare alias is ``rlgate_<name>`` (``--rlgate-json`` ->
        ``rlgate_json``): a bare ``json`` would share a namespace with other plugins.
        """
        name = self.name if self.alias else f"rlgate-{self.name}"
        return name.replace("-", "_")

    @property
    def pytest_flags(self) -> tuple[str, ...]:
        """``--rlgate-<name>`` and, unless ``alias`` is off, its alias ``--<name>``."""
        flags = (f"{PYTEST_PREFIX}{self.name}",)
        return (*flags, f"--{self.name}") if self.alias else flags

    @property
    def cli_flag(self) -> str:
        """The flag of the CLI command that has this option."""
        return self.cli or f"--{self.name}"

    def kwargs(self, *, check_paths: bool = False, **shape: Any) -> dict[str, Any]:
        """Keyword arguments for ``add_argument`` / ``addoption``.

        ``check_paths`` makes a path option's ``type`` also require an existing path (the
        plugin's parse-time check). ``shape`` may set only ``required``, ``default``,
        ``action`` and ``nargs``.
        """
        unknown = set(shape) - _SHAPE
        if unknown:
            raise ValueError(f"option {self.name}: a command may not change {sorted(unknown)}")
        default = self.default
        if self.env is not None:
            default = os.environ.get(self.env, default)
        kw: dict[str, Any] = {"help": self.help, "default": default}
        for key in ("metavar", "action", "nargs"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        kind = self.type
        if check_paths and self.path:
            kind = _existing(self.type)
        if kind is not None:
            kw["type"] = kind
        kw.update(shape)
        if kw["default"] is None and kw.get("action") in ("append", "extend", Extend):
            kw["default"] = []  # a fresh list: argparse appends to a copy of it
        return kw

    def add_to(self, parser: Any, **shape: Any) -> Any:
        """Add this option to an argparse parser (a CLI command) under :attr:`cli_flag`."""
        return parser.add_argument(self.cli_flag, **self.kwargs(**shape))


def _existing(kind: Callable[[str], Any] | None) -> Callable[[str], Any]:
    """``kind``'s check (if any), then :func:`existing_path`."""
    if kind is None:
        return existing_path

    def parse(text: str) -> Any:
        kind(text)
        return existing_path(text)

    parse.__name__ = "path"  # argparse names the type in "invalid <name> value"
    return parse


TOKENIZERS = Option(
    "tokenizers",
    help="tokenizer root: one subfolder per model, named by the Hugging Face id's last "
    "component lowercased (default: $RLGATE_TOKENIZERS, else the Hugging Face cache/hub)",
    metavar="DIR",
    env="RLGATE_TOKENIZERS",
    role=Role.ROOT,
)
RECIPE = Option(
    "recipe",
    help="rlgate recipe: a NeMo RL config YAML with an rlgate: block",
    metavar="RECIPE.yaml",
    path=True,
    role=Role.RECIPE,
)
RUN_DIR = Option(
    "run-dir",
    help="NeMo RL run to check: logger.log_dir, an event file, a metrics.json or an MLPerf log",
    metavar="RUN",
    path=True,
    role=Role.PATH,
)
BASELINE = Option(
    "baseline",
    help="baseline run of the same recipe and hardware (perf)",
    metavar="RUN",
    path=True,
    role=Role.PATH,
)
ROLLOUTS = Option(
    "rollouts",
    help="NeMo Gym rollouts JSONL (ng_collect_rollouts output)",
    metavar="ROLLOUTS.jsonl",
    path=True,
    role=Role.PATH,
)
BAND_RUN = Option(
    "band-run",
    help="an earlier good run of the recipe, for the reference band (repeatable, >= 5 "
    "runs; default: the recipe's rlgate.band.runs)",
    metavar="RUN",
    action="append",
    path=True,
    role=Role.PATH,
)
SYNC_RUN = Option(
    "sync-run",
    help="synchronous twin of an async run (async-vs-sync speed-up)",
    metavar="RUN",
    path=True,
    role=Role.PATH,
)
MAX_STEPS = Option(
    "max-steps",
    help="target step, >= 1 (default: the recipe's)",
    type=positive_int,
    metavar="N",
)
SWE_BEFORE = Option(
    "swe-before",
    help="SWE-bench results of the base model: one or more runs (seeds)",
    metavar="PATH",
    action=Extend,
    path=True,
    cli="--before",
    role=Role.PATH,
)
SWE_AFTER = Option(
    "swe-after",
    help="SWE-bench results of the trained model: one or more runs (seeds)",
    metavar="PATH",
    action=Extend,
    path=True,
    cli="--after",
    role=Role.PATH,
)
SWE_DATASET = Option(
    "swe-dataset",
    help="SWE-bench Verified: a parquet file or dataset directory (rlgate swe also takes a "
    "Hugging Face dataset name)",
    type=nonempty,
    metavar="DATASET",
    path=True,
    cli="--dataset",
    role=Role.PATH,
)
SWE_ALPHA = Option(
    "swe-alpha",
    help="SWE gate: significance level (two-sided), in (0, 1) (default 0.05)",
    type=float_in(0, 1, open_lo=True, open_hi=True),
    metavar="ALPHA",
    default=0.05,
    cli="--alpha",
)
SWE_MARGIN_PP = Option(
    "swe-margin-pp",
    help="SWE gate: non-inferiority margin, the tolerated drop in points (default 0)",
    type=float_in(0, 100),
    metavar="PP",
    default=0.0,
    cli="--margin-pp",
)
SWE_MAX_INFRA_ERROR_RATE = Option(
    "swe-max-infra-error-rate",
    help="SWE gate: above this share of infra errors and missing instances an arm is "
    "inconclusive (default 0.05)",
    type=float_in(0, 1),
    metavar="RATE",
    default=0.05,
    cli="--max-infra-error-rate",
)

JSON = Option(
    "json",
    help="convergence/perf tiers: also write the checks' results as `rlgate check-run --json` "
    "writes them (one evaluation for JUnit and JSON)",
    metavar="FILE",
    alias=False,
    role=Role.FILE_OUT,
)

#: Every option of the pytest plugin, in ``pytest --help`` order.
PLUGIN_OPTIONS: tuple[Option, ...] = (
    TOKENIZERS,
    RECIPE,
    RUN_DIR,
    BASELINE,
    ROLLOUTS,
    BAND_RUN,
    SYNC_RUN,
    MAX_STEPS,
    JSON,
    SWE_BEFORE,
    SWE_AFTER,
    SWE_DATASET,
    SWE_ALPHA,
    SWE_MARGIN_PP,
    SWE_MAX_INFRA_ERROR_RATE,
)


# --- renamed options -------------------------------------------------------------------

#: The namespace's record of the deprecated spellings already warned about (one line each).
WARNED = "_rlgate_warned"


class _DeprecatedAlias(argparse.Action):
    """An old spelling of an option: warns once on stderr, then acts as the new one."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, target: argparse.Action, **kw: Any
    ) -> None:
        self.target = target
        super().__init__(
            option_strings,
            target.dest,
            nargs=target.nargs,
            type=target.type,
            choices=target.choices,
            metavar=target.metavar,
            default=argparse.SUPPRESS,  # the new option's default stands
            help=kw.get("help"),
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Warn (once per spelling and parse), then do what the new option does."""
        warned = vars(namespace).setdefault(WARNED, set())
        new = self.target.option_strings[0]
        if option_string not in warned:
            warned.add(option_string)
            print(f"rlgate: warning: {option_string} is deprecated; use {new}", file=sys.stderr)
        self.target(parser, namespace, values, new)


def add_renamed(parser: Any, flag: str, *old: str, **kwargs: Any) -> argparse.Action:
    """Add option ``flag`` (``add_argument`` keywords) with its deprecated spellings ``old``.

    Each old spelling parses exactly as ``flag`` (same destination, type, shape: given
    with ``flag`` it counts as a second occurrence) and prints ``rlgate: warning: OLD is
    deprecated; use FLAG`` once; ``--help`` lists it as deprecated.
    """
    action = parser.add_argument(flag, **kwargs)
    for spelling in old:
        parser.add_argument(
            spelling, action=_DeprecatedAlias, target=action, help=f"deprecated: use {flag}"
        )
    return action


def recipe_file(text: str) -> str:
    """``--recipe`` of the recording commands: a recipe YAML; a bare name still works, warned.

    A value that looks like a file (``.yaml``/``.yml`` or a path separator) but is none is
    refused: it would be recorded as a recipe name, silently.
    """
    from pathlib import Path

    if Path(text).is_file():
        return text
    if not text.strip() or text.endswith((".yaml", ".yml")) or "/" in text or os.sep in text:
        raise argparse.ArgumentTypeError(f"no such recipe file: {text!r}")
    print(
        "rlgate: warning: --recipe NAME is deprecated; use --recipe-name NAME "
        "(--recipe takes the recipe YAML)",
        file=sys.stderr,
    )
    return text


def add_recipe_or_name(parser: Any, *, what: str) -> None:
    """``--recipe RECIPE.yaml`` (its name and content hash) or ``--recipe-name NAME``.

    ``what`` says what the recipe is used for (e.g. "recorded with --db"); the two exclude
    each other.
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--recipe",
        type=recipe_file,
        metavar="RECIPE.yaml",
        help=f"the recipe file {what}: its name (file stem) and content hash (a bare name here "
        "is deprecated: use --recipe-name)",
    )
    group.add_argument(
        "--recipe-name",
        type=nonempty,
        metavar="NAME",
        help=f"the recipe's name {what}, when its file is not at hand (no content hash)",
    )
