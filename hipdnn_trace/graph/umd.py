"""hipDNN's own FLOP and byte models: the ``umd_flops`` / ``umd_bytes`` expressions a node may carry.

hipDNN RFC 0019 (``projects/hipdnn/docs/rfcs/0019_UniversalHeuristicDescriptor.md`` §14.6, ROCm/rocm-libraries)
annotates an op with two JsonLogic expressions over its bound dims and per-tensor dtype sizes; its SDPA
example is ``{"*": [4, "$q.batch", "$q.num_heads", "$q.seqlen_q", "$k.seqlen_k", "$q.head_size"]}``.
hipDNN writes variables with a ``$`` sigil (``projects/hipdnn/docs/JsonExpression.md``: ``"$a.b"``
reads a path, ``"$$t"`` is the literal ``"$t"``); this module rewrites them to JsonLogic's ``var`` and
evaluates with panzi-json-logic (pure Python, the operator set of jsonlogic.com), adding the arithmetic
operators hipDNN's expression language has beyond it (``ceil_div``, ``abs``, ``pow``, ``log2``,
``rsqrt``, ``value_or_default``). We evaluate, and show beside our own model (graph/ops.py); a
difference over :data:`FLAG_SHARE` is flagged with both numbers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from json_logic import jsonLogic
from json_logic.builtins import BUILTINS, to_number

from hipdnn_trace.graph.dtypes import DTYPES

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

#: the node fields that carry hipDNN's models (RFC 0019 §14.6)
FIELDS = ("umd_flops", "umd_bytes")
#: hipDNN's and our number differ by more than this share of ours: flagged
FLAG_SHARE = 0.01
_LAZY = ("if", "?:", "and", "or", "filter", "reduce", "map", "all", "none", "some")


def _value_or_default(data: Any = None, value: Any = None, default: Any = None, *_: Any) -> Any:
    return default if value is None else value


OPERATIONS = {
    **BUILTINS,
    "ceil_div": lambda data=None, a=None, b=None, *_: -(-to_number(a) // to_number(b)),
    "abs": lambda data=None, a=None, *_: abs(to_number(a)),
    "pow": lambda data=None, a=None, b=None, *_: to_number(a) ** to_number(b),
    "log2": lambda data=None, a=None, *_: math.log2(to_number(a)),
    "rsqrt": lambda data=None, a=None, *_: 1.0 / math.sqrt(to_number(a)),
    "value_or_default": _value_or_default,
}
_KNOWN = frozenset(OPERATIONS) | frozenset(_LAZY)


class ExpressionError(ValueError):
    """A ``umd_*`` value that is not an expression hipDNN could compile."""


def parse(value: Any) -> Any:
    """The expression as JSON: hipDNN's ``.fbs`` attribute holds it as JSON text, a graph file may
    hold the object itself. Raises :class:`ExpressionError` naming what is wrong."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ExpressionError(f"not JSON text: {exc.msg} at character {exc.pos}") from None
    _check(value)
    return value


def _check(expr: Any) -> None:
    if isinstance(expr, list):
        for item in expr:
            _check(item)
    elif isinstance(expr, dict):
        if len(expr) != 1:
            raise ExpressionError(f"an operation is an object with one key, got {len(expr)} keys")
        op, args = next(iter(expr.items()))
        if op == "var":
            raise ExpressionError("'var' is not hipDNN's: variables are \"$name\" strings")
        if op not in _KNOWN:
            raise ExpressionError(f"unknown operator {op!r}")
        _check(args)
    elif isinstance(expr, str) and expr == "$":
        raise ExpressionError("a bare '$' names no variable")
    elif isinstance(expr, bool) or expr is None or isinstance(expr, (int, float, str)):
        return
    else:
        raise ExpressionError(f"unexpected value {expr!r}")


def expression_kind(value: Any) -> str | None:
    """An option kind (graph/option_types.py): None when ``value`` is a well-formed expression or null."""
    if value is None:
        return None
    try:
        parse(value)
    except ExpressionError as exc:
        return f"a JsonLogic expression (hipDNN RFC 0019): {exc}"
    return None


def _path(variable: str) -> str:
    """A ``$`` variable as a JsonLogic path: ``$a[0].b`` -> ``a.0.b``."""
    return re.sub(r"\[(\d+)\]", r".\1", variable[1:])


def to_jsonlogic(expr: Any) -> Any:
    """hipDNN's ``$`` sigils -> JsonLogic ``var`` (``$a[0].b`` -> ``a.0.b``; ``$$t`` -> ``"$t"``)."""
    if isinstance(expr, list):
        return [to_jsonlogic(e) for e in expr]
    if isinstance(expr, dict):
        return {op: to_jsonlogic(args) for op, args in expr.items()}
    if isinstance(expr, str) and expr.startswith("$"):
        if expr.startswith("$$"):
            return expr[1:]
        return {"var": _path(expr)}
    return expr


def evaluate(expr: Any, variables: Mapping[str, Any]) -> float | None:
    """The expression's number, or None where it reads a variable we do not bind or is not a number."""
    try:
        out = jsonLogic(to_jsonlogic(parse(expr)), dict(variables), OPERATIONS)
    except (ArithmeticError, TypeError, ValueError):
        return None
    if isinstance(out, bool) or not isinstance(out, (int, float)) or not math.isfinite(out):
        return None
    return float(out)


def variables_of(expr: Any) -> set[str]:
    """The ``$`` paths an expression reads (after :func:`parse`)."""
    if isinstance(expr, list):
        return set().union(*(variables_of(e) for e in expr)) if expr else set()
    if isinstance(expr, dict):
        return variables_of(next(iter(expr.values())))
    if isinstance(expr, str) and expr.startswith("$") and not expr.startswith("$$"):
        return {_path(expr)}
    return set()


def _resolves(path: str, variables: Mapping[str, Any]) -> bool:
    cur: Any = variables
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False
    return cur is not None


def _tensor_vars(port: str, dims: list[int], strides: list[int], data_type: str) -> dict[str, Any]:
    """A tensor's bindings: its shape facts, and for rank-4 attention ports (hipDNN's logical
    B, H, S, D order) the names RFC 0019's SDPA example reads."""
    dt = DTYPES.get(data_type)
    out: dict[str, Any] = {"dims": list(dims), "strides": list(strides), "rank": len(dims),
                           "element_count": math.prod(dims), "dtype_bytes": dt.itemsize if dt else None}
    if len(dims) == 4:
        seq = "seqlen_q" if port in ("q", "o", "dq", "do") else "seqlen_k"
        out.update(batch=dims[0], num_heads=dims[1], head_size=dims[3], seqlen=dims[2], **{seq: dims[2]})
    return out


def bindings(node: Node, graph: Graph) -> dict[str, Any]:
    """What a node's expressions may read: ``$<port>.<fact>`` for every connected port
    (``q``, ``k``, ``v``, ``o``, ...; facts: dims, strides, rank, element_count, dtype_bytes, and for
    rank-4 ports batch, num_heads, seqlen_q | seqlen_k, head_size), and ``$attributes.<option>``."""
    out: dict[str, Any] = {}
    for port, uid in (*node.inputs.items(), *node.outputs.items()):
        t = graph.by_uid.get(uid) if isinstance(uid, int) else None
        if t is not None:
            out[port] = _tensor_vars(port, list(t.dims), list(t.strides), t.data_type)
    out["attributes"] = {k: v for k, v in node.params.items() if k not in FIELDS}
    return out


def node_model(node: Node, graph: Graph) -> Model | None:
    """hipDNN's FLOPs and bytes for a node carrying ``umd_flops`` / ``umd_bytes``; None when it carries neither."""
    present = [f for f in FIELDS if node.params.get(f) is not None]
    if not present:
        return None
    env = bindings(node, graph)
    values: dict[str, float | None] = dict.fromkeys(FIELDS)
    notes = []
    for field in present:
        expr = parse(node.params[field])
        missing = sorted(p for p in variables_of(expr) if not _resolves(p, env))
        if missing and "value_or_default" not in json.dumps(expr):
            notes.append(f"{node.name} {field}: reads ${', $'.join(missing)}, which this tool does not bind")
            continue
        values[field] = evaluate(expr, env)
        if values[field] is None:
            notes.append(f"{node.name} {field}: does not evaluate to a finite number")
    return Model(values["umd_flops"], values["umd_bytes"], tuple(notes))


@dataclass(frozen=True)
class Model:
    """hipDNN's numbers for a node, or summed over a graph's nodes that carry them (None: absent or did
    not evaluate), why not, and how they compare with ours."""

    flops: float | None
    bytes: float | None
    notes: tuple[str, ...]

    def flags(self, our_flops: float, our_bytes: float) -> list[str]:
        """One line per number that differs from ours by more than :data:`FLAG_SHARE`."""
        out = []
        for what, theirs, ours in (("FLOPs", self.flops, our_flops), ("bytes", self.bytes, our_bytes)):
            if differs(theirs, ours):
                out.append(f"hipDNN's {what} {theirs:.6g} differ from ours {ours:.6g} "
                           f"by {abs(theirs - ours) / max(abs(ours), 1e-300):.1%}")   # type: ignore[operator]
        return out


def differs(theirs: float | None, ours: float | None) -> bool:
    """True when both are known and differ by more than FLAG_SHARE of ours (or ours is 0 and theirs is not)."""
    if theirs is None or ours is None:
        return False
    if ours == 0:
        return theirs != 0
    return abs(theirs - ours) > FLAG_SHARE * abs(ours)


def graph_model(graph: Graph) -> Model | None:
    """The sum over the graph's nodes that carry hipDNN's model; None when none does. A graph where only
    some nodes carry a field gets a note: the sum then covers those nodes only."""
    models = [(n, m) for n in graph.nodes if (m := node_model(n, graph)) is not None]
    if not models:
        return None
    notes = [note for _, m in models for note in m.notes]
    sums: dict[str, float | None] = {}
    for field, attr in zip(FIELDS, ("flops", "bytes")):
        got = [getattr(m, attr) for _, m in models if getattr(m, attr) is not None]
        sums[attr] = float(sum(got)) if got else None
        carrying = sum(1 for n in graph.nodes if n.params.get(field) is not None)
        if got and carrying < len(graph.nodes):
            notes.append(f"{field} is carried by {carrying} of {len(graph.nodes)} nodes: hipDNN's sum covers those")
    return Model(sums["flops"], sums["bytes"], tuple(notes))
