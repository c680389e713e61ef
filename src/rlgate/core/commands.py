"""External commands rlgate runs: every argv is built here, from validated tokens.

rlgate starts other programs (``sbatch`` through its script, ``squeue``, ``sacct``,
``scancel``, ``bash`` for the local wrapper, ``git``, the SWE-bench harness, ``pytest`` for the
demo's functional tier, PostgreSQL's tools in the test utilities). Their argv is a
:class:`Command`, and only :func:`command` makes one:

* the template is rlgate's own source text: the program and its options, one word per
  whitespace-separated word, with ``{name}`` fields for values (``scancel -- {ids}``,
  ``sacct --jobs={job}``);
* a value fills a field: ``str``, ``int`` or a path; a list or tuple only for a field that
  is a whole word, where it becomes one word per item. No value may hold a NUL byte, a
  line break or be empty, and a value that starts a word may not start with ``-``: the
  program would read ``--me`` or ``--wrap=...`` as an option where rlgate meant a job id
  or a path (``scancel 4242 --me`` cancels every job of the user). A value after a literal
  prefix (``--jobs={ids}``) is the option's argument and cannot become an option itself;
* options from a validated config (a site's extra ``sbatch`` arguments) are passed as
  :class:`Options`: each must be one long option, ``--name`` or ``--name=value``.

A refused value raises the caller's error class (exit 2: it came from an input). The
values' own forms (Slurm job ids, instance ids, run ids) are checked where they enter
(the run manifest, the predictions file); this is the last gate before a process starts.
Running the command stays with the caller (``subprocess.run(cmd.argv, ...)``): this
module starts nothing. ``tests/unit/test_commands.py`` checks that every subprocess call in
``src/rlgate`` takes a :class:`Command`'s argv.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rlgate.core.errors import RlgateError
from rlgate.core.text import one_line

__all__ = ["Command", "Options", "command"]

Scalar = str | int | os.PathLike[str]
_FIELD = re.compile(r"\{([^{}]*)\}")
_BAD = ("\x00", "\n", "\r")
_LONG_OPTION = re.compile(r"--[a-z][a-z0-9-]*(?:=[^\x00-\x1f\x7f]*)?")


class Options(tuple[str, ...]):
    """Option words from a validated config, each ``--name`` or ``--name=value``."""

    __slots__ = ()


Value = Scalar | Sequence[Scalar] | Options


@dataclass(frozen=True, slots=True)
class Command:
    """An argv built by :func:`command` (``subprocess.run(cmd.argv, ...)``)."""

    argv: tuple[str, ...]

    def __str__(self) -> str:
        """The command as one shell-quoted line, for messages and logs."""
        return shlex.join(self.argv)


def _text(value: Scalar, field: str, error: type[RlgateError]) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | os.PathLike):
        raise TypeError(f"command field {{{field}}}: cannot pass a {type(value).__name__}")
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if not text:
        raise error(f"{field} is empty, where a command expects a value")
    if any(bad in text for bad in _BAD):
        raise error(
            f"{field} {one_line(repr(text))[:120]} holds a NUL byte or a line break, which "
            "no command argument may carry"
        )
    return text


def command(
    template: str, /, *, error: type[RlgateError] = RlgateError, **values: Value
) -> Command:
    """The argv of ``template`` with its ``{name}`` fields filled by validated ``values``.

    Raises:
        error: a value is empty, holds a NUL byte or a line break, or starts a word with
            ``-`` (it would be read as an option).
        ValueError: the template is not one line of plain fields (a bug in rlgate).
    """
    if any(bad in template for bad in _BAD) or not template.strip():
        raise ValueError(f"a command template is one non-empty line: {template!r}")
    used: set[str] = set()
    argv: list[str] = []
    for word in template.split():
        fields = _FIELD.findall(word)
        if "{" in _FIELD.sub("", word) or "}" in _FIELD.sub("", word):
            raise ValueError(f"command template word {word!r} has a stray brace")
        for field in fields:
            if not field.isidentifier():
                raise ValueError(f"command template field {{{field}}} must be a plain name")
            if field not in values:
                raise ValueError(f"command template field {{{field}}} has no value")
            used.add(field)
        if not fields:
            argv.append(word)
            continue
        whole = word == f"{{{fields[0]}}}"
        if whole and isinstance(values[fields[0]], Options):
            for item in values[fields[0]]:  # type: ignore[union-attr]
                if not isinstance(item, str) or not _LONG_OPTION.fullmatch(item):
                    raise error(
                        f"{fields[0]} {one_line(repr(item))[:120]} is not one long option "
                        "(--name or --name=value)"
                    )
            argv.extend(values[fields[0]])  # type: ignore[arg-type]
            continue
        if whole and isinstance(values[fields[0]], list | tuple):
            items = [_text(v, fields[0], error) for v in values[fields[0]]]  # type: ignore[union-attr]
        else:
            text = word
            for field in fields:
                value = values[field]
                if isinstance(value, list | tuple):
                    raise TypeError(f"command field {{{field}}} inside a word takes one value")
                text = text.replace(f"{{{field}}}", _text(value, field, error), 1)
            items = [text]
        if word.startswith("{"):  # a value starts the word: it must not read as an option
            name = fields[0]
            for item in items:
                if item.startswith("-"):
                    raise error(
                        f"{name} {one_line(repr(item))[:120]} starts with '-': "
                        f"{argv[0] if argv else 'the program'} would read it as an option",
                        hint="a value that begins with '-' is refused (a path can be given "
                        "as ./-name or absolute)",
                    )
        argv.extend(items)
    if unused := set(values) - used:
        raise ValueError(f"values {sorted(unused)} are not in the template {template!r}")
    return Command(tuple(argv))
