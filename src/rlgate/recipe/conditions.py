"""NeMo RL's ``check_metrics`` condition language, parsed (never ``eval``'d) into typed records.

A recipe's ``rlgate.convergence.checks`` hold these conditions; they are validated when the
recipe is loaded, so a syntax error names the recipe, the condition and the column.
Evaluation over a run's series lives in :mod:`rlgate.checks.conditions`.

Condition grammar (what ``tests/check_metrics.py`` conditions use, parsed by a tokenizer and
a recursive-descent parser into a small AST; anything else is a parse error naming the
column)::

    condition := expr OP expr              (one comparison, reading at least one metric)
    expr      := term { ("+" | "-") term }
    term      := factor { ("*" | "/") factor }
    factor    := ("-" | "+") factor | number | value | "abs" "(" expr ")" | "(" expr ")"
    value     := CALL "(" series { "," arg } ")" | series "[" STRING "]"
    series    := "data" "[" STRING "]"
    arg       := number | NAME "=" number
    CALL      := "min" | "max" | "mean" | "median" | "ratio_above"
    OP        := "<" | "<=" | ">" | ">=" | "=="
    number    := digits ["." digits] [("e"|"E") ["-"|"+"] digits]
    STRING    := '"' text '"' | "'" text "'"

``value OP number`` (every condition but six in NeMo RL's suites) is a :class:`Condition`;
anything with arithmetic on either side (``mean(data["train/loss"], -5, -1) < 0.7 *
data["train/loss"]["1"]``, ``abs(median(data["train/loss"])) < 0.05``) a
:class:`Comparison` of two expression trees. The tree is the allow-list: numbers, the five
reducers, ``data[...][...]``, ``abs``, ``+ - * /`` and parentheses; nothing is ``eval``'d.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from rlgate.core.errors import RecipeError
from rlgate.core.results import Op  # the comparison every Result records

__all__ = [
    "Abs",
    "AnyCondition",
    "Arith",
    "Comparison",
    "Condition",
    "ConditionSyntaxError",
    "Expr",
    "Neg",
    "Number",
    "Op",
    "Reducer",
    "SeriesCall",
    "StepIndex",
    "Window",
    "expr_tags",
    "parse_condition",
]

#: A step window as check_metrics writes it: ``(range_start, range_end)``, ``range_end``
#: exclusive, ``0`` through the last step, negative values counted from the end.
Window = tuple[int, int]


class Reducer(Enum):
    """Closed registry of reducers (``last`` is rlgate's; the rest are check_metrics')."""

    MIN = "min"
    MAX = "max"
    MEAN = "mean"
    MEDIAN = "median"
    LAST = "last"
    RATIO_ABOVE = "ratio_above"


_WHOLE_SERIES = frozenset({Reducer.MIN, Reducer.MAX, Reducer.RATIO_ABOVE, Reducer.LAST})


@dataclass(frozen=True, slots=True)
class SeriesCall:
    """``reducer(data[tag], ...)`` with check_metrics' arguments."""

    reducer: Reducer
    tag: str
    range_start: int = 1
    range_end: int = 0
    ignore_top_p: float = 0.0
    above: float | None = None  # ratio_above's threshold

    @property
    def default_window(self) -> bool:
        """True when no step window was given (check_metrics' ``1, 0``)."""
        return (self.range_start, self.range_end) == (1, 0)

    @property
    def all_values(self) -> bool:
        """min/max/ratio_above/last without a window use every logged value (step 0 too)."""
        return self.default_window and self.reducer in _WHOLE_SERIES

    def describe(self) -> str:
        """Render back as a check_metrics-style expression."""
        args = [f'data["{self.tag}"]']
        if self.reducer is Reducer.RATIO_ABOVE:
            args.append(f"{self.above:g}")
        if (self.range_start, self.range_end) != (1, 0):
            args += [str(self.range_start), str(self.range_end)]
        if self.ignore_top_p:
            args.append(f"ignore_top_p={self.ignore_top_p:g}")
        return f"{self.reducer.value}({', '.join(args)})"


@dataclass(frozen=True, slots=True)
class StepIndex:
    """``data[tag]["N"]``; ``step=None`` is ``"$MAX_STEPS"`` (the target step)."""

    tag: str
    step: int | None

    def describe(self) -> str:
        """Render back as a check_metrics-style expression."""
        return f'data["{self.tag}"]["{"$MAX_STEPS" if self.step is None else self.step}"]'


@dataclass(frozen=True, slots=True)
class Condition:
    """``value op threshold``."""

    value: SeriesCall | StepIndex
    op: Op
    threshold: float
    text: str = field(default="", compare=False)

    @property
    def tag(self) -> str:
        """The metric the condition reads."""
        return self.value.tag

    @property
    def bound(self) -> str:
        """``op threshold`` as text."""
        return f"{self.op.value} {self.threshold:g}"


@dataclass(frozen=True, slots=True)
class Number:
    """A number in an expression."""

    value: float

    def describe(self) -> str:
        """As written back."""
        return f"{self.value:g}"


@dataclass(frozen=True, slots=True)
class Neg:
    """``-operand``."""

    operand: Expr

    def describe(self) -> str:
        """As written back."""
        return f"-{_wrapped(self.operand)}"


@dataclass(frozen=True, slots=True)
class Abs:
    """``abs(operand)``."""

    operand: Expr

    def describe(self) -> str:
        """As written back."""
        return f"abs({self.operand.describe()})"


@dataclass(frozen=True, slots=True)
class Arith:
    """``left op right`` with ``op`` one of ``+ - * /``."""

    op: str
    left: Expr
    right: Expr

    def describe(self) -> str:
        """As written back (parentheses around every nested operation)."""
        return f"{_wrapped(self.left)} {self.op} {_wrapped(self.right)}"


Expr = Number | Neg | Abs | Arith | SeriesCall | StepIndex


def _wrapped(expr: Expr) -> str:
    return f"({expr.describe()})" if isinstance(expr, Arith) else expr.describe()


def expr_tags(expr: Expr) -> list[str]:
    """The metrics an expression reads, in order, each once."""
    if isinstance(expr, SeriesCall | StepIndex):
        return [expr.tag]
    if isinstance(expr, Neg | Abs):
        return expr_tags(expr.operand)
    if isinstance(expr, Arith):
        return list(dict.fromkeys([*expr_tags(expr.left), *expr_tags(expr.right)]))
    return []


@dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right`` where a side is arithmetic (see the module docstring)."""

    left: Expr
    op: Op
    right: Expr
    text: str = field(default="", compare=False)

    @property
    def tags(self) -> list[str]:
        """Every metric the comparison reads."""
        return list(dict.fromkeys([*expr_tags(self.left), *expr_tags(self.right)]))

    @property
    def tag(self) -> str:
        """The first metric the comparison reads (the Result's metric)."""
        return self.tags[0]

    @property
    def bound(self) -> str:
        """``op right`` as text."""
        return f"{self.op.value} {self.right.describe()}"


AnyCondition = Condition | Comparison


class ConditionSyntaxError(RecipeError):
    """A condition outside the supported check_metrics grammar."""


_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<string>\"[^\"\\]*\"|'[^'\\]*')|(?P<op><=|>=|==|<|>)|(?P<punct>[()\[\],=+*/-]))"
)


_CALLS = {r.value: r for r in Reducer if r is not Reducer.LAST}


_KWARGS = {
    Reducer.MEAN: ("range_start", "range_end", "ignore_top_p"),
    Reducer.MEDIAN: ("range_start", "range_end"),
    Reducer.RATIO_ABOVE: ("threshold",),
    Reducer.MIN: (),
    Reducer.MAX: (),
}


_MAX_STEPS = re.compile(r"^\$(?:MAX_STEPS|\{MAX_STEPS\})$")


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    text: str
    col: int


def _tokenize(text: str) -> list[_Tok]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].isspace():
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:  # reported when the parser reaches it
            col = pos + len(text[pos:]) - len(text[pos:].lstrip()) + 1
            tokens.append(_Tok("bad", text[col - 1], col))
            break
        kind = match.lastgroup or ""
        tokens.append(_Tok(kind, match.group(kind), match.start(kind) + 1))
        pos = match.end()
    tokens.append(_Tok("end", "", len(text) + 1))
    return tokens


def _syntax(text: str, col: int, what: str) -> ConditionSyntaxError:
    caret = " " * (col - 1) + "^"
    return ConditionSyntaxError(
        f"condition {text!r}: column {col}: {what}\n    {text}\n    {caret}",
        hint='supported: min/max/mean/median/ratio_above(data["tag"][, args]), '
        'data["tag"]["STEP"], numbers, abs(...), + - * / and parentheses, on both sides of '
        "one of < <= > >= ==",
    )


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, kind: str, text: str | None = None, what: str = "") -> _Tok:
        tok = self.peek()
        if tok.kind == "bad":
            raise _syntax(self.text, tok.col, f"unexpected character {tok.text!r}")
        if tok.kind != kind or (text is not None and tok.text != text):
            found = "end of condition" if tok.kind == "end" else repr(tok.text)
            raise _syntax(self.text, tok.col, f"expected {what or text or kind}, found {found}")
        self.i += 1
        return tok

    def condition(self) -> AnyCondition:
        left = self.expr()
        op = Op(self.take("op", what="a comparison (< <= > >= ==)").text)
        right = self.expr()
        if self.peek().kind == "bad":
            self.take("end")
        if self.peek().kind != "end":
            extra = self.peek()
            raise _syntax(
                self.text,
                extra.col,
                f"unexpected {extra.text!r} after the comparison "
                "(one comparison per condition; no and/or/chaining)",
            )
        if not (expr_tags(left) or expr_tags(right)):
            raise _syntax(self.text, 1, "the condition reads no metric (data[...])")
        if isinstance(left, SeriesCall | StepIndex) and isinstance(right, Number):
            return Condition(left, op, right.value, self.text)
        return Comparison(left, op, right, self.text)

    def expr(self) -> Expr:
        node = self.term()
        while self.peek().kind == "punct" and self.peek().text in ("+", "-"):
            op = self.take("punct").text
            node = Arith(op, node, self.term())
        return node

    def term(self) -> Expr:
        node = self.factor()
        while self.peek().kind == "punct" and self.peek().text in ("*", "/"):
            op = self.take("punct").text
            node = Arith(op, node, self.factor())
        return node

    def factor(self) -> Expr:
        tok = self.peek()
        if tok.kind == "punct" and tok.text in ("+", "-"):
            self.take("punct")
            inner = self.factor()
            if tok.text == "+":
                return inner
            return Number(-inner.value) if isinstance(inner, Number) else Neg(inner)
        if tok.kind == "number":
            return Number(float(self.take("number").text))
        if tok.kind == "punct" and tok.text == "(":
            self.take("punct")
            node = self.expr()
            self.take("punct", ")", what="')'")
            return node
        if tok.kind == "name" and tok.text == "abs":
            self.take("name")
            self.take("punct", "(", what="'(' after abs")
            node = self.expr()
            self.take("punct", ")", what="')'")
            return Abs(node)
        return self.value()

    def series(self) -> str:
        self.take("name", "data", what='data["<metric>"]')
        self.take("punct", "[")
        tag = self.string()
        self.take("punct", "]")
        return tag

    def string(self) -> str:
        return self.take("string", what="a quoted string").text[1:-1]

    def value(self) -> SeriesCall | StepIndex:
        tok = self.peek()
        if tok.kind == "name" and tok.text == "data":
            tag = self.series()
            self.take("punct", "[", what='a step index like ["10"]')
            step_tok = self.peek()
            if step_tok.kind == "number":
                raise _syntax(self.text, step_tok.col, "step index must be a quoted string")
            step = self.string()
            self.take("punct", "]")
            return StepIndex(tag, self._step(step, step_tok.col))
        if tok.kind == "name" and tok.text in _CALLS:
            return self.call()
        if tok.kind == "bad":
            raise _syntax(self.text, tok.col, f"unexpected character {tok.text!r}")
        if tok.kind == "name":
            raise _syntax(
                self.text,
                tok.col,
                "expected min/max/mean/median/ratio_above(...), abs(...) or data[...]",
            )
        found = "end of condition" if tok.kind == "end" else repr(tok.text)
        raise _syntax(
            self.text,
            tok.col,
            f"expected a number or a metric (data[...], mean(...)), found {found}",
        )

    def _step(self, step: str, col: int) -> int | None:
        if _MAX_STEPS.match(step):
            return None
        if step.startswith("$"):
            raise _syntax(self.text, col, f"unexpanded shell variable {step!r} (only $MAX_STEPS)")
        try:
            return int(step)
        except ValueError:
            raise _syntax(self.text, col, f"step {step!r} is not an integer") from None

    def call(self) -> SeriesCall:
        name_tok = self.take("name")
        reducer = _CALLS[name_tok.text]
        self.take("punct", "(")
        tag = self.series()
        args: list[tuple[_Tok, float]] = []
        kwargs: dict[str, tuple[_Tok, float]] = {}
        while self.peek().text == ",":
            self.take("punct", ",")
            tok = self.peek()
            if tok.kind == "name":
                self.take("name")
                self.take("punct", "=")
                if tok.text in kwargs:
                    raise _syntax(self.text, tok.col, f"argument {tok.text!r} given twice")
                kwargs[tok.text] = (tok, self.number())
            elif kwargs:
                raise _syntax(self.text, tok.col, "positional argument after keyword argument")
            else:
                args.append((tok, self.number()))
        self.take("punct", ")", what="')'")
        return self._bind(reducer, tag, name_tok, args, kwargs)

    def _bind(
        self,
        reducer: Reducer,
        tag: str,
        name_tok: _Tok,
        args: list[tuple[_Tok, float]],
        kwargs: dict[str, tuple[_Tok, float]],
    ) -> SeriesCall:
        params = _KWARGS[reducer]
        if len(args) > len(params):
            raise _syntax(
                self.text,
                args[len(params)][0].col,
                f"{reducer.value}() takes at most {len(params)} extra argument(s)",
            )
        bound = {params[i]: a for i, a in enumerate(args)}
        for key, item in kwargs.items():
            if key not in params:
                raise _syntax(self.text, item[0].col, f"{reducer.value}() has no argument {key!r}")
            if key in bound:
                raise _syntax(self.text, item[0].col, f"argument {key!r} given twice")
            bound[key] = item
        if reducer is Reducer.RATIO_ABOVE and "threshold" not in bound:
            raise _syntax(self.text, name_tok.col, "ratio_above() needs a threshold")
        for key in ("range_start", "range_end"):
            if key in bound and not float(bound[key][1]).is_integer():
                raise _syntax(self.text, bound[key][0].col, f"{key} must be an integer step")
        top_p = bound.get("ignore_top_p", (name_tok, 0.0))
        if not 0.0 <= top_p[1] <= 1.0:
            raise _syntax(self.text, top_p[0].col, "ignore_top_p must be between 0.0 and 1.0")
        return SeriesCall(
            reducer,
            tag,
            range_start=int(bound.get("range_start", (None, 1))[1]),
            range_end=int(bound.get("range_end", (None, 0))[1]),
            ignore_top_p=float(top_p[1]),
            above=bound["threshold"][1] if "threshold" in bound else None,
        )

    def number(self) -> float:
        sign = 1.0
        if self.peek().kind == "punct" and self.peek().text in "+-":
            sign = -1.0 if self.take("punct").text == "-" else 1.0
        return sign * float(self.take("number", what="a number").text)


def parse_condition(text: str) -> AnyCondition:
    """Parse one check_metrics condition (see the module docstring for the grammar)."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError(f"empty condition: {text!r}")
    return _Parser(text).condition()
