r"""NeMo RL test-suite scripts (``tests/test_suites/**/*.sh``), read as text, never run.

A suite script sets ``MAX_STEPS=N`` in its ``# ===== BEGIN CONFIG =====`` block, runs the
recipe, dumps the TensorBoard logs with ``tests/json_dump_tb_logs.py`` and, only when the
last ``train/loss`` step reached ``MAX_STEPS``, runs ``tests/check_metrics.py METRICS_JSON
'cond' ...``. :func:`read_suite` finds every ``check_metrics.py`` invocation and the
conditions as the shell would pass them: a single-quoted word is literal, a double-quoted
one has ``$NAME`` / ``${NAME}`` replaced by the script's own ``NAME=<integer>`` assignments
(``MAX_STEPS``) and its ``\"`` ``\$`` ``\\`` escapes undone; a word the script cannot
expand by itself (another variable, a command substitution) is kept with a note.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlgate.core.errors import RecipeError
from rlgate.core.io import read_text
from rlgate.recipe.conditions import ConditionSyntaxError, parse_condition

__all__ = ["Invocation", "SuiteScript", "gate_block", "read_suite", "render_recipe"]

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=([0-9]+)\s*(?:#.*)?$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_OPERATORS = {";", "&&", "||", "|", "&", ")", "(", "]]", "fi", "then", "do", "done"}


@dataclass(frozen=True, slots=True)
class Invocation:
    """One ``check_metrics.py`` call: its metrics-file word, conditions and line number."""

    line: int
    metrics: str
    conditions: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def on_suite_metrics(self) -> bool:
        """True when it reads the script's own ``$JSON_METRICS`` (the run's dump)."""
        return self.metrics.strip("\"'") in ("$JSON_METRICS", "${JSON_METRICS}")


@dataclass(frozen=True, slots=True)
class SuiteScript:
    """A suite script's name, ``MAX_STEPS`` and its ``check_metrics.py`` invocations."""

    path: Path
    max_steps: int | None
    invocations: tuple[Invocation, ...]

    @property
    def name(self) -> str:
        """The experiment name (the script's stem, as ``common.env``'s ``EXP_NAME``)."""
        return self.path.stem

    def conditions(self, *, suite_metrics_only: bool = False) -> list[str]:
        """Every condition, in order (only those on ``$JSON_METRICS`` when asked)."""
        return [
            c
            for inv in self.invocations
            if inv.on_suite_metrics or not suite_metrics_only
            for c in inv.conditions
        ]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` with backslash-newline continuations joined."""
    out: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            buffer += line[:-1] + " "
            continue
        out.append((start, buffer + line))
        buffer = ""
    if buffer:
        out.append((start, buffer))
    return out


_SPECIAL = set(";&|()<>")


def _words(line: str) -> list[list[tuple[str, str]]]:
    """Shell words of one logical line, as ``(quote, text)`` segments, escapes kept.

    ``quote`` is ``'``, ``"`` or ``""`` (unquoted); operators are words of their own; a
    comment ends the line.
    """
    words: list[list[tuple[str, str]]] = []
    word: list[tuple[str, str]] | None = None
    i, n = 0, len(line)

    def segment(quote: str, text: str) -> None:
        nonlocal word
        if word is None:
            word = []
            words.append(word)
        word.append((quote, text))

    while i < n:
        ch = line[i]
        if ch.isspace():
            word = None
            i += 1
        elif ch == "#" and word is None:
            break
        elif ch == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ValueError("unclosed single quote")
            segment("'", line[i + 1 : end])
            i = end + 1
        elif ch == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                raise ValueError("unclosed double quote")
            segment('"', line[i + 1 : j])
            i = j + 1
        elif ch in _SPECIAL:
            j = i
            while j < n and line[j] in _SPECIAL and j - i < 2:
                j += 1
            words.append([("", line[i:j])])
            word = None
            i = j
        else:
            j = i
            while (
                j < n and not line[j].isspace() and line[j] not in "'\"" and line[j] not in _SPECIAL
            ):
                j += 2 if line[j] == "\\" else 1
            segment("", line[i:j])
            i = j
    return words


def _expand(text: str, escapes: str, variables: dict[str, str], unknown: list[str]) -> str:
    """Undo backslash escapes of ``escapes``, then replace ``$NAME`` with known values."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and (not escapes or text[i + 1] in escapes):
            out.append("\0" if text[i + 1] == "$" else text[i + 1])
            i += 2
            continue
        out.append(text[i])
        i += 1

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in variables:
            return variables[name]
        unknown.append(name)
        return match.group(0)

    return _VAR.sub(value, "".join(out)).replace("\0", "$")


def _shell_word(word: list[tuple[str, str]], variables: dict[str, str]) -> tuple[str, str | None]:
    """The argument the shell passes for one word; a note when it cannot be known."""
    unknown: list[str] = []
    parts = []
    for quote, text in word:
        if quote == "'":
            parts.append(text)
        else:
            if "$(" in text or "`" in text:
                return text, f"{text[:60]}: a command substitution is not expanded"
            parts.append(_expand(text, '"$\\`' if quote == '"' else "", variables, unknown))
    note = f"${unknown[0]} is not set in the script" if unknown else None
    return "".join(parts), note


def read_suite(path: str | os.PathLike[str]) -> SuiteScript:
    """Read a NeMo RL suite script's ``MAX_STEPS`` and ``check_metrics.py`` conditions."""
    file = Path(path)
    text = read_text(file, what="test-suite script", error=RecipeError)
    variables: dict[str, str] = {}
    for line in text.splitlines():
        match = _ASSIGN.match(line)
        if match:
            variables[match.group(1)] = match.group(2)
    invocations = []
    for number, line in _logical_lines(text):
        if line.lstrip().startswith("#") or "check_metrics.py" not in line:
            continue
        try:
            words = _words(line)
        except ValueError as exc:
            raise RecipeError(
                f"{file}:{number}: cannot split the check_metrics line: {exc}"
            ) from None
        texts = ["".join(t for _, t in w) for w in words]
        at = next((i for i, w in enumerate(texts) if w.endswith("check_metrics.py")), None)
        if at is None:
            continue
        args = []
        for word, shown in zip(words[at + 1 :], texts[at + 1 :], strict=True):
            if word[0][0] == "" and (shown in _OPERATORS or shown[:1] in _SPECIAL):
                break
            args.append(word)
        if not args:
            continue
        conditions, notes = [], []
        skip = False
        for word in args[1:]:
            flag = "".join(t for _, t in word)
            if skip:
                skip = False
                continue
            if word[0][0] == "" and flag.startswith("--"):
                skip = "=" not in flag  # --table-width N
                continue
            condition, note = _shell_word(word, variables)
            conditions.append(condition)
            if note:
                notes.append(f"{condition[:60]}: {note}")
        metrics = "".join(t for _, t in args[0])
        invocations.append(Invocation(number, metrics, tuple(conditions), tuple(notes)))
    steps = variables.get("MAX_STEPS")
    return SuiteScript(file, int(steps) if steps is not None else None, tuple(invocations))


def gate_block(script: SuiteScript) -> tuple[dict[str, Any], list[str]]:
    """The ``rlgate:`` block a suite script's conditions and ``MAX_STEPS`` make; and notes.

    Imported: the conditions on the run's own ``$JSON_METRICS``, each parsed (a syntax
    error names the script and line), named ``suite_<i>``, its reason the script's line;
    ``target_step`` is ``MAX_STEPS``. Left out, and said in the notes: conditions on another
    file (an evaluation's JSON) and words the script cannot expand by itself.
    """
    if script.max_steps is None:
        raise RecipeError(
            f"{script.path}: no MAX_STEPS=<integer> in the script",
            hint="NeMo RL's suite scripts set it in their BEGIN CONFIG block",
        )
    checks: list[dict[str, str]] = []
    notes: list[str] = []
    for inv in script.invocations:
        where = f"{script.path.name}:{inv.line}"
        if not inv.on_suite_metrics:
            notes.append(
                f"{where}: {len(inv.conditions)} condition(s) on {inv.metrics} (not the run's "
                "$JSON_METRICS) left out"
            )
            continue
        if inv.notes:
            notes += [f"{where}: {n}: left out" for n in inv.notes]
            continue
        for condition in inv.conditions:
            try:
                parse_condition(condition)
            except ConditionSyntaxError as exc:
                raise RecipeError(f"{where}: {exc}", hint=exc.hint) from None
            name = f"suite_{len(checks) + 1}"
            checks.append({"condition": condition, "name": name, "reason": where})
    if not checks:
        raise RecipeError(
            f"{script.path}: no check_metrics.py condition on $JSON_METRICS to import",
            hint="; ".join(notes) or None,
        )
    block = {"tiers": ["convergence"], "convergence": {"target_step": script.max_steps}}
    block["convergence"]["checks"] = checks
    return block, notes


def render_recipe(script: SuiteScript, config: str | None) -> tuple[str, list[str]]:
    """A recipe YAML: ``defaults: config`` (when known) and the imported ``rlgate:`` block."""
    block, notes = gate_block(script)
    head = [
        f"# rlgate gate imported by `rlgate recipe import-suite` from {script.path.name}:",
        "# its check_metrics.py conditions, judged after completion (the run must reach",
        f"# MAX_STEPS={script.max_steps}; the script skips its checks when it does not).",
    ]
    doc: dict[str, Any] = {}
    if config is not None:
        doc["defaults"] = config
    doc["rlgate"] = block
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)
    return "\n".join(head) + "\n" + body, notes
