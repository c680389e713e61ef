r"""Shell text rlgate generates: built in one place, so no input can become code.

Every shell script rlgate writes or prints -- the Slurm submission (``launch/sbatch.sh``),
the local wrapper (``launch/local_wrapper.sh``) and the driver command (ray.sub's
``COMMAND``, ``launch/driver_command.sh``, the Ray job's entrypoint) -- is made of
:class:`Line`\ s, and only the constructors here make them:

* :func:`code`: a template from rlgate's own source, one line, in which every ``{name}``
  is replaced by the ``shlex.quote``\ d value (a :class:`Words` value becomes quoted words):
  whatever a path, name or argument holds (newline, ``;``, ``$(...)``, backticks, quotes),
  bash reads it as one word, never as code;
* :func:`comment`: ``# `` plus ``rlgate.core.text.one_line(text)``: every line break and control
  character is shown as an escape, so nothing can end the comment and start a command;
* :func:`export` and :func:`require_env`: the name must be a POSIX environment-variable name
  (``[A-Za-z_][A-Za-z0-9_]*``), the value is quoted;
* :func:`script` joins lines under a shebang and accepts nothing else.

A value holding a NUL byte, which no shell word can carry, is refused (``LaunchError``).
"""

from __future__ import annotations

import os
import shlex
import string
from collections.abc import Sequence
from dataclasses import dataclass

from rlgate.core.errors import LaunchError
from rlgate.core.text import one_line
from rlgate.core.validate import POSIX_NAME

__all__ = ["Line", "Words", "code", "comment", "export", "require_env", "script"]

SHEBANG = "#!/usr/bin/env bash"


class Line(str):
    """One line of generated shell text; made only by :func:`code`, :func:`comment`, ..."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Words:
    """Several values that become several quoted words (an argv)."""

    items: Sequence[str | os.PathLike[str] | int]
    wrap: bool = False  # one word per continued line (``\`` newline), for long commands


Value = str | os.PathLike[str] | int | Words


def _quote(value: str | os.PathLike[str] | int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | os.PathLike):
        raise TypeError(f"{what}: cannot put a {type(value).__name__} into a shell script")
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if "\x00" in text:
        raise LaunchError(
            f"{what} {one_line(text)!r} holds a NUL byte, which a shell script cannot carry"
        )
    return shlex.quote(text)


def _render(value: Value, what: str) -> str:
    if isinstance(value, Words):
        sep = " \\\n    " if value.wrap else " "
        return sep.join(_quote(item, what) for item in value.items)
    return _quote(value, what)


def code(template: str, /, **values: Value) -> Line:
    """``template`` with each ``{name}`` replaced by its quoted value (``{{``/``}}``: braces).

    The template is shell code written in rlgate's source, never text from an input; it is
    one line and its fields are plain names (no conversion or format spec).
    """
    if "\n" in template or "\r" in template:
        raise ValueError(f"a shell template is one line: {template!r}")
    used = set()
    for _, field, spec, conversion in string.Formatter().parse(template):
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ValueError(f"shell template field {{{field}}} must be a plain name")
        if field not in values:
            raise ValueError(f"shell template field {{{field}}} has no value")
        used.add(field)
    if unused := set(values) - used:
        raise ValueError(f"values {sorted(unused)} are not in the template {template!r}")
    return Line(template.format_map({k: _render(v, k) for k, v in values.items()}))


def comment(text: object) -> Line:
    """``# text`` on one line: line breaks and control characters are shown as escapes."""
    return Line(f"# {one_line(text)}".rstrip())


def _env_name(name: str) -> str:
    if not isinstance(name, str) or not POSIX_NAME.fullmatch(name):
        raise LaunchError(
            f"{one_line(repr(name))} is not an environment variable name",
            hint="names are letters, digits and _, not starting with a digit",
        )
    return name


def export(name: str, value: str | os.PathLike[str] | int) -> Line:
    """``export NAME=<quoted value>``."""
    return Line(f"export {_env_name(name)}={_quote(value, name)}")


def require_env(name: str, why: str = "site pass_env") -> Line:
    """Stop the script unless ``NAME`` is set in its environment, then export it.

    ``why`` is rlgate's own wording (it is not quoted: bash expands the text after ``:?``).
    """
    if not all(c.isalnum() or c in " _-()" for c in why):
        raise ValueError(f"require_env reason must be plain words: {why!r}")
    name = _env_name(name)
    return Line(f': "${{{name}:?{name} ({why}) must be set}}"; export {name}')


def script(*lines: Line) -> str:
    """The script: a shebang, then ``lines``; anything not built here is refused."""
    for line in lines:
        if not isinstance(line, Line):
            raise TypeError(f"not a generated shell line (use rlgate.launch.shell.code): {line!r}")
    return "\n".join([SHEBANG, *lines]) + "\n"
