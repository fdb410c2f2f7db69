"""The small arithmetic language of counter formulas in profiles/*.toml.

Profiles are data, so their formulas must not be Python: ``eval`` of a TOML string
would run anything. This grammar has numbers, counter names, ``$constants`` (GPU
facts such as ``$num_xcd``), ``+ - * /``, parentheses and ``min`` / ``max`` / ``abs``:

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := "-" unary | atom
    atom   := NUMBER | NAME | "$" NAME | FUNC "(" expr ("," expr)* ")" | "(" expr ")"

NAME is ``[A-Za-z_][A-Za-z0-9_.]*`` (dots for Nsight Compute names such as
``dram__bytes.sum``). Division by zero gives null, not inf: a kernel that never touched
L2 has no hit rate. A formula compiles to a polars expression over a wide frame whose
columns are counter names.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Union

import polars as pl

from hipdnn_trace.errors import UserError

FUNCTIONS = ("min", "max", "abs")

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<const>\$[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)"
    r"|(?P<op>[-+*/(),]))"
)


class ExprError(UserError):
    """A formula that does not parse; the message quotes it."""


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Const:
    name: str


@dataclass(frozen=True)
class Neg:
    arg: "Node"


@dataclass(frozen=True)
class Bin:
    op: str
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Node", ...]


Node = Union[Num, Name, Const, Neg, Bin, Call]


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"formula {text!r}: unexpected character {text[pos:].strip()[:1]!r} at {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def fail(self, why: str) -> ExprError:
        return ExprError(f"formula {' '.join(self.text.split())!r}: {why}")

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise self.fail("ends too early")
        if value is not None and tok[1] != value:
            raise self.fail(f"expected {value!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.toks:
            raise self.fail("empty")
        node = self.expr()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def expr(self) -> Node:
        return self._left_assoc("+-", self.term)

    def term(self) -> Node:
        return self._left_assoc("*/", self.unary)

    def _left_assoc(self, ops: str, operand: Callable[[], Node]) -> Node:
        """``operand (op operand)*`` for the one-character operators in ``ops``, left to right."""
        node = operand()
        while (tok := self.peek()) and tok[1] in ops and tok[0] == "op":
            self.take()
            node = Bin(tok[1], node, operand())
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok and tok == ("op", "-"):
            self.take()
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        kind, value = self.take()
        if kind == "num":
            return Num(float(value))
        if kind == "const":
            return Const(value[1:])
        if kind == "name":
            nxt = self.peek()
            if nxt == ("op", "("):
                if value not in FUNCTIONS:
                    raise self.fail(f"unknown function {value!r} (allowed: {', '.join(FUNCTIONS)})")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ("op", ","):
                    self.take()
                    args.append(self.expr())
                self.take(")")
                if value == "abs" and len(args) != 1:
                    raise self.fail("abs takes one argument")
                if value in ("min", "max") and len(args) < 2:
                    raise self.fail(f"{value} takes two or more arguments")
                return Call(value, tuple(args))
            return Name(value)
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        raise self.fail(f"unexpected {value!r}")


@dataclass(frozen=True)
class Expr:
    """A parsed formula: what it reads and how to compute it."""

    text: str
    node: Node

    @property
    def names(self) -> frozenset[str]:
        return frozenset(_walk(self.node, Name))

    @property
    def constants(self) -> frozenset[str]:
        return frozenset(_walk(self.node, Const))

    def to_polars(self, constants: Mapping[str, float] | None = None) -> pl.Expr:
        return _to_polars(self.node, dict(constants or {}), self.text)

    def evaluate(self, values: Mapping[str, float | None],
                 constants: Mapping[str, float] | None = None) -> float | None:
        """Scalar evaluation (same semantics as :meth:`to_polars`)."""
        return _eval(self.node, values, dict(constants or {}), self.text)


def parse(text: str) -> Expr:
    if not isinstance(text, str):
        raise ExprError(f"formula must be a string, not {type(text).__name__}")
    return Expr(text, _Parser(text).parse())


def _walk(node: Node, kind: type) -> list[str]:
    if isinstance(node, kind):
        return [node.name]  # type: ignore[union-attr]
    if isinstance(node, Neg):
        return _walk(node.arg, kind)
    if isinstance(node, Bin):
        return _walk(node.left, kind) + _walk(node.right, kind)
    if isinstance(node, Call):
        return [n for a in node.args for n in _walk(a, kind)]
    return []


def _constant(name: str, constants: dict[str, float], text: str) -> float:
    if name not in constants or constants[name] is None:
        raise ExprError(f"formula {' '.join(text.split())!r}: constant ${name} is not known for this GPU")
    return float(constants[name])


#: The operators both evaluators apply as they are; division has its null-on-zero rule.
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _to_polars(node: Node, constants: dict[str, float], text: str) -> pl.Expr:
    if isinstance(node, Num):
        return pl.lit(node.value, dtype=pl.Float64)
    if isinstance(node, Name):
        return pl.col(node.name).cast(pl.Float64)
    if isinstance(node, Const):
        return pl.lit(_constant(node.name, constants, text), dtype=pl.Float64)
    if isinstance(node, Neg):
        return -_to_polars(node.arg, constants, text)
    if isinstance(node, Bin):
        a, b = _to_polars(node.left, constants, text), _to_polars(node.right, constants, text)
        if node.op == "/":
            return pl.when(b != 0).then(a / b).otherwise(None)
        return _ARITHMETIC[node.op](a, b)
    assert isinstance(node, Call)
    args = [_to_polars(a, constants, text) for a in node.args]
    if node.func == "abs":
        return args[0].abs()
    return pl.min_horizontal(args) if node.func == "min" else pl.max_horizontal(args)


def _eval(node: Node, values: Mapping[str, float | None], constants: dict[str, float], text: str) -> float | None:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        v = values.get(node.name)
        return None if v is None else float(v)
    if isinstance(node, Const):
        return _constant(node.name, constants, text)
    if isinstance(node, Neg):
        v = _eval(node.arg, values, constants, text)
        return None if v is None else -v
    if isinstance(node, Bin):
        a = _eval(node.left, values, constants, text)
        b = _eval(node.right, values, constants, text)
        if a is None or b is None:
            return None
        if node.op == "/":
            return None if b == 0 else a / b
        return _ARITHMETIC[node.op](a, b)
    assert isinstance(node, Call)
    args = [_eval(a, values, constants, text) for a in node.args]
    if node.func == "abs":
        return None if args[0] is None else abs(args[0])
    present = [a for a in args if a is not None]  # like polars' min/max_horizontal
    if not present:
        return None
    return min(present) if node.func == "min" else max(present)
