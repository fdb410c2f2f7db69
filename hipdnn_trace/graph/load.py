"""Load and check hipDNN graph JSON.

Accepts exactly what hipDNN's serializer writes, in every node layout seen in the
wild: ``inputs``/``outputs`` with options under ``parameters`` (older), under
``attributes`` (newer), inline in ``inputs`` (pointwise), or flat on the node
(reduction). Every problem raises one :class:`GraphError` naming the file, the JSON
path and what is wrong, before anything is allocated.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from math import prod
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph import dtypes, ops, semantics
from hipdnn_trace.graph.layout import is_valid_layout, storage_elements
from hipdnn_trace.graph.model import UID_SUFFIX, Graph, Node, Tensor
from hipdnn_trace.graph.opspec import DERIVED

#: Larger files are refused unread: no real graph comes close.
MAX_FILE_BYTES = read_gate.GRAPH.budget
#: A tensor with more elements than this cannot exist on any device (2^36 fp32 = 256 GiB).
MAX_ELEMENTS = 2**36
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: More dims than any DNN library takes (cuDNN: 8); beyond numpy's limit of 64 as well.
MAX_RANK = 16
#: JSON nested deeper than this is refused (hipDNN graphs nest 4 levels).
MAX_DEPTH = 32

_NODE_KEYS = {"name", "type", "compute_data_type", "inputs", "outputs", "parameters", "attributes"}
_TOP_KEYS = {"name", "compute_data_type", "io_data_type", "intermediate_data_type", "tensors", "nodes"}
#: The oldest hipDNN (sdk/ era) named the graph's types differently and gave nodes none.
_LEGACY_TYPE_KEYS = {"compute_data_type": "compute_type", "io_data_type": "io_type",
                     "intermediate_data_type": "intermediate_type"}
_TENSOR_KEYS = {"uid", "name", "data_type", "dims", "strides", "virtual", "value_type", "value"}
#: The newest schema's tensor fields (``flatbuffers_sdk/schemas/tensor_attributes.fbs`` @ 33f48644), kept in
#: ``Tensor.extra`` as read and written back; checked here only for the JSON type hipDNN's reader takes.
_TENSOR_SCHEMA_INTS = {"alignment": 0, "ragged_offset_multiplier": 1}   # key -> least value


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _depth(text: str) -> int:
    """Maximum bracket nesting, ignoring brackets inside strings (cheap, no recursion)."""
    depth = best = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def parse_json_bytes(data: bytes, source: str) -> Any:
    """Bytes -> JSON value with hipDNN-grade strictness (UTF-8, no NaN, no duplicate keys)."""
    if len(data) > MAX_FILE_BYTES:
        raise GraphError(source, "", f"file is {len(data)} bytes; graphs over {MAX_FILE_BYTES} are refused")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphError(source, "", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    if not text.strip():
        raise GraphError(source, "", "file is empty")
    if _depth(text) > MAX_DEPTH:
        raise GraphError(source, "", f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _Duplicate as exc:
        raise GraphError(source, "", f"duplicate key {exc.args[0]!r} in a JSON object") from None
    except json.JSONDecodeError as exc:
        raise GraphError(source, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise GraphError(source, "", f"invalid JSON: {exc}") from None


def load_bytes(data: bytes, source: str, *, allow_unknown: bool = False) -> Graph:
    return parse_graph(parse_json_bytes(data, source), source, allow_unknown=allow_unknown)


def read_graph_file(path: Path) -> bytes:
    """A graph file's bytes, or GraphError naming the file when it is too big, unreadable or
    not a regular file (the package's read gate, ``read_gate.py``: a device, FIFO or socket is
    refused by its type before it is opened, the open cannot block, the size is checked before a
    byte is read and the read stops one byte past the limit)."""
    try:
        return read_gate.read_bytes(path, read_gate.Kind(read_gate.GRAPH.what, MAX_FILE_BYTES))
    except read_gate.ReadRefused as exc:
        raise GraphError(exc.name, "", exc.problem) from None


def load_file(path: str | Path, *, allow_unknown: bool = False) -> Graph:
    path = Path(path)
    return load_bytes(read_graph_file(path), str(path), allow_unknown=allow_unknown)


# ------------------------------------------------------------------ parsing

class _Parser:
    def __init__(self, source: str, allow_unknown: bool = False) -> None:
        self.source = source
        self.allow_unknown = allow_unknown
        self.unknown: list[str] = []   # "<json path>: unknown field ..." for each key no spec knows

    def fail(self, path: str, problem: str) -> GraphError:
        return GraphError(self.source, path, problem)

    def obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, got {_kind(value)}")
        return value

    def field(self, obj: Mapping[str, Any], key: str, path: str) -> Any:
        if key not in obj:
            raise self.fail(path, f"missing required field {key!r}")
        return obj[key]

    def string(self, obj: Mapping[str, Any], key: str, path: str) -> str:
        value = self.field(obj, key, path)
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}", f"expected a string, got {_kind(value)}")
        return value

    def integer(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_kind(value)}")
        if not _INT64_MIN <= value <= _INT64_MAX:   # hipDNN stores uids, dims, strides as int64
            raise self.fail(path, f"{value} does not fit in a 64-bit integer")
        return value

    def dtype(self, obj: Mapping[str, Any], key: str, path: str, *, allow_unset: bool) -> str:
        name = self.string(obj, key, path)
        if name == dtypes.UNSET and allow_unset:
            return name
        name = dtypes.ALIASES.get(name, name)   # another repository's spelling of the same type
        if name not in dtypes.DTYPES:
            known = ", ".join(dtypes.DTYPES)
            raise self.fail(f"{path}.{key}", f"unknown data type {name!r} (hipDNN types: {known})")
        return name

    def int_list(self, obj: Mapping[str, Any], key: str, path: str) -> tuple[int, ...]:
        value = self.field(obj, key, path)
        if not isinstance(value, list):
            raise self.fail(f"{path}.{key}", f"expected a list of integers, got {_kind(value)}")
        return tuple(self.integer(v, f"{path}.{key}[{i}]") for i, v in enumerate(value))

    # -------------------------------------------------------------- tensors

    def tensor(self, raw: Any, path: str) -> Tensor:
        t = self.obj(raw, path)
        uid = self.integer(self.field(t, "uid", path), f"{path}.uid")
        name = self.string(t, "name", path)
        data_type = self.dtype(t, "data_type", path, allow_unset=False)
        dims = self.int_list(t, "dims", path)
        strides = self.int_list(t, "strides", path)
        virtual = self.field(t, "virtual", path)
        if not isinstance(virtual, bool):
            raise self.fail(f"{path}.virtual", f"expected true or false, got {_kind(virtual)}")
        if not dims:
            raise self.fail(f"{path}.dims", "a tensor needs at least one dim")
        if len(dims) > MAX_RANK:
            raise self.fail(f"{path}.dims", f"rank {len(dims)} is more than the {MAX_RANK} dims supported")
        if len(strides) != len(dims):
            raise self.fail(f"{path}.strides", f"rank {len(strides)} differs from dims' rank {len(dims)}")
        for i, d in enumerate(dims):
            if d < 1:
                raise self.fail(f"{path}.dims[{i}]", f"dim {d} must be >= 1")
        for i, s in enumerate(strides):
            if s < 0:
                raise self.fail(f"{path}.strides[{i}]", f"stride {s} must be >= 0")
        numel = prod(dims)
        if numel > MAX_ELEMENTS:
            raise self.fail(f"{path}.dims", f"{numel:.3g} elements is larger than any device can hold")
        if not is_valid_layout(dims, strides):
            raise self.fail(f"{path}.strides",
                            f"strides {list(strides)} overlap elements of dims {list(dims)}")
        span = storage_elements(dims, strides)
        if span > MAX_ELEMENTS:
            raise self.fail(f"{path}.strides", f"strides {list(strides)} span {span:.3g} elements, "
                            "larger than any device can hold")
        value_type = value = None
        if "value_type" in t:
            value_type = self.string(t, "value_type", path)
            if value_type not in dtypes.VALUE_TYPES:
                raise self.fail(f"{path}.value_type", f"unknown value type {value_type!r} "
                                f"(hipDNN: {', '.join(dtypes.VALUE_TYPES)})")
            value = self.field(t, "value", path)
            if value_type == "BoolValue":
                if not isinstance(value, bool):
                    raise self.fail(f"{path}.value", f"expected true or false, got {_kind(value)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.fail(f"{path}.value", f"expected a number, got {_kind(value)}")
            elif isinstance(value, float) and not math.isfinite(value):
                raise self.fail(f"{path}.value", f"{value} is not a finite number")
        elif "value" in t:
            raise self.fail(f"{path}.value", "a value needs a value_type")
        extra = {k: v for k, v in t.items() if k not in _TENSOR_KEYS}
        self.tensor_schema_fields(extra, path)
        return Tensor(uid, name, dims, strides, data_type, virtual, value_type, value, extra)

    def tensor_schema_fields(self, extra: Mapping[str, Any], path: str) -> None:
        """The newest schema's tensor fields, read as hipDNN's types (never refused when well typed):
        ``ragged_offset_tensor_uid`` a uid or null, ``alignment`` a byte count (>= 0),
        ``ragged_offset_multiplier`` an integer >= 1, ``is_runtime_pass_by_value`` a boolean."""
        if extra.get("ragged_offset_tensor_uid") is not None:
            self.integer(extra["ragged_offset_tensor_uid"], f"{path}.ragged_offset_tensor_uid")
        for key, least in _TENSOR_SCHEMA_INTS.items():
            if key in extra and self.integer(extra[key], f"{path}.{key}") < least:
                raise self.fail(f"{path}.{key}", f"{extra[key]} must be >= {least}")
        flag = extra.get("is_runtime_pass_by_value", False)
        if not isinstance(flag, bool):
            raise self.fail(f"{path}.is_runtime_pass_by_value", f"expected true or false, got {_kind(flag)}")

    # ---------------------------------------------------------------- nodes

    def port_value(self, value: Any, path: str, *, allow_list: bool) -> int | None | tuple[int, ...]:
        if value is None:
            return None
        if isinstance(value, list) and allow_list:
            return tuple(self.integer(v, f"{path}[{i}]") for i, v in enumerate(value))
        return self.integer(value, path)

    def node(self, raw: Any, path: str, *, legacy: bool) -> Node:
        n = self.obj(raw, path)
        name = self.string(n, "name", path)
        node_type = self.string(n, "type", path)
        spec = ops.spec(node_type)
        if spec is None and node_type not in ops.KNOWN_UNMODELLED:
            raise self.fail(f"{path}.type", f"unknown op type {node_type!r} (not a hipDNN node type)")
        if legacy and "compute_data_type" not in n:
            compute = dtypes.UNSET
        else:
            compute = self.dtype(n, "compute_data_type", path, allow_unset=True)
        inputs: dict[str, Any] = {}
        outputs: dict[str, Any] = {}
        params: dict[str, Any] = {}
        sections: dict[str, str] = {}
        list_ports = spec.list_inputs if spec else ()
        out_ports = spec.all_outputs if spec else ()
        not_ports = spec.uid_named_options if spec else ()

        def add_port(key: str, value: Any, where: str, kpath: str, is_output: bool) -> None:
            port = key.removesuffix(UID_SUFFIX)
            target = outputs if is_output else inputs
            target[port] = self.port_value(value, kpath, allow_list=port in list_ports and not is_output)
            sections[key] = where

        for section in ("inputs", "outputs"):
            if section not in n:
                continue
            block = self.obj(n[section], f"{path}.{section}")
            for key, value in block.items():
                kpath = f"{path}.{section}.{key}"
                if key.endswith(UID_SUFFIX) and key not in not_ports:
                    add_port(key, value, section, kpath, section == "outputs")
                else:
                    params[key] = value
                    sections[key] = section
        for section in ("parameters", "attributes"):
            if section in n:
                for key, value in self.obj(n[section], f"{path}.{section}").items():
                    params[key] = value
                    sections[key] = section
        for key, value in n.items():
            if key in _NODE_KEYS:
                continue
            if key.endswith(UID_SUFFIX) and key not in not_ports:
                port = key.removesuffix(UID_SUFFIX)
                add_port(key, value, "node", f"{path}.{key}", port in out_ports)
            else:
                params[key] = value
                sections[key] = "node"
        for key, prefix in (spec.uid_lists.items() if spec else ()):
            if key not in params:
                continue
            kpath = f"{path}.{key}" if sections.get(key) == "node" else f"{path}.{sections.get(key)}.{key}"
            if not isinstance(params[key], list):
                raise self.fail(kpath, f"expected a list of tensor uids, got {_kind(params[key])}")
            target = outputs if prefix == "output" else inputs
            for i, value in enumerate(params[key]):
                target[f"{prefix}_{i}"] = self.integer(value, f"{kpath}[{i}]")
                sections[f"{prefix}_{i}{UID_SUFFIX}"] = f"{DERIVED}{key}[{i}]"
        node = Node(name, node_type, compute, inputs, outputs, params, sections)
        if spec is not None:
            self.check_ports(node, spec, path)
            self.note_unknown(node, spec, path)
        return node

    def note_unknown(self, node: Node, spec: ops.OpSpec, path: str) -> None:
        """Keys no hipDNN writer puts on this node type: a misspelled option would otherwise be read
        as its default without a word (hipDNN's own reader would miss the real key and throw)."""
        ports = {p + UID_SUFFIX for p in (*spec.all_inputs, *spec.all_outputs)}
        known = ports | set(spec.options) | set(spec.uid_named_options) | set(spec.uid_lists)
        keys = [*(p + UID_SUFFIX for p in (*node.inputs, *node.outputs)), *node.params]
        for key in keys:
            where = node.param_sections.get(key, "")
            if key in known or where.startswith(DERIVED):
                continue
            guess = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean {guess[0]!r}?)" if guess else ""
            jpath = f"{path}.{key}" if where in ("node", "") else f"{path}.{where}.{key}"
            self.unknown.append(f"{jpath}: unknown field {key!r} for {node.op}{hint}")

    def check_ports(self, node: Node, spec: ops.OpSpec, path: str) -> None:
        for port in spec.inputs:
            if node.inputs.get(port) is None:
                raise self.fail(f"{path}.inputs", f"{node.op} needs input {port}{UID_SUFFIX}")
        for port in spec.outputs:
            if node.outputs.get(port) is None:
                raise self.fail(f"{path}.outputs", f"{node.op} needs output {port}{UID_SUFFIX}")
        for port in node.outputs:
            if port in spec.all_inputs:
                raise self.fail(f"{path}.outputs.{port}{UID_SUFFIX}", "is an input port of "
                                f"{node.op}, listed under outputs")

    # ---------------------------------------------------------------- graph

    def graph(self, raw: Any) -> Graph:
        g = self.obj(raw, "$")
        name = self.string(g, "name", "$")
        legacy = "compute_data_type" not in g and "compute_type" in g
        keys = {k: (old if legacy else k) for k, old in _LEGACY_TYPE_KEYS.items()}
        compute = self.dtype(g, keys["compute_data_type"], "$", allow_unset=True)
        io = self.dtype(g, keys["io_data_type"], "$", allow_unset=True)
        inter = self.dtype(g, keys["intermediate_data_type"], "$", allow_unset=True)
        raw_tensors = self.field(g, "tensors", "$")
        raw_nodes = self.field(g, "nodes", "$")
        if not isinstance(raw_tensors, list):
            raise self.fail("$.tensors", f"expected a list, got {_kind(raw_tensors)}")
        if not isinstance(raw_nodes, list):
            raise self.fail("$.nodes", f"expected a list, got {_kind(raw_nodes)}")
        if not raw_nodes:
            raise self.fail("$.nodes", "a graph needs at least one node")
        tensors = tuple(self.tensor(t, f"$.tensors[{i}]") for i, t in enumerate(raw_tensors))
        seen: dict[int, int] = {}
        for i, t in enumerate(tensors):
            if t.uid in seen:
                raise self.fail(f"$.tensors[{i}].uid", f"uid {t.uid} is also used by tensors[{seen[t.uid]}]")
            seen[t.uid] = i
        nodes = tuple(self.node(n, f"$.nodes[{i}]", legacy=legacy) for i, n in enumerate(raw_nodes))
        skip = _TOP_KEYS | (set(_LEGACY_TYPE_KEYS.values()) if legacy else set())
        extra = {k: v for k, v in g.items() if k not in skip}
        self.graph_schema_fields(extra)
        if self.unknown and not self.allow_unknown:
            where, problem = self.unknown[0].split(": ", 1)
            more = f" (and {len(self.unknown) - 1} more)" if len(self.unknown) > 1 else ""
            raise self.fail(where, f"{problem}{more}; --allow-unknown-fields reads past it "
                            "with a warning")
        graph = Graph(name, compute, io, inter, tensors, nodes, self.source, extra, legacy,
                      warnings=tuple(self.unknown))
        self.check_graph(graph)
        return graph

    def graph_schema_fields(self, extra: Mapping[str, Any]) -> None:
        """The newest graph-level fields, checked only where hipDNN's JSON reader checks them
        (``json/Graph.hpp`` @ 1e919aac): ``id`` must be a string ("Graph id must be a canonical UUID
        string"), ``is_override_shape_enabled`` a boolean. ``min_required_engine_api_version`` is kept
        as read in any form (that reader ignores it)."""
        if "id" in extra and not isinstance(extra["id"], str):
            raise self.fail("$.id", f"expected a UUID string, got {_kind(extra['id'])}")
        flag = extra.get("is_override_shape_enabled", False)
        if not isinstance(flag, bool):
            raise self.fail("$.is_override_shape_enabled", f"expected true or false, got {_kind(flag)}")

    def check_graph(self, graph: Graph) -> None:
        producer: dict[int, int] = {}
        for i, node in enumerate(graph.nodes):
            for key, where in _port_keys(node):
                uid = _port_uid(node, key)
                uids = uid if isinstance(uid, tuple) else (uid,)
                for u in uids:
                    if u is not None and u not in graph.by_uid:
                        raise self.fail(f"$.nodes[{i}].{where}", f"uid {u} is not a tensor of the graph")
            for port, uid in node.outputs.items():
                if uid is None:
                    continue
                if uid in producer:
                    raise self.fail(f"$.nodes[{i}].outputs.{port}{UID_SUFFIX}",
                                    f"tensor {uid} is already written by nodes[{producer[uid]}]")
                if graph.by_uid[uid].is_value:
                    raise self.fail(f"$.nodes[{i}].outputs.{port}{UID_SUFFIX}",
                                    f"tensor {uid} is a by-value scalar and cannot be an output")
                producer[uid] = i
        for i, node in enumerate(graph.nodes):
            for uid in node.input_uids():
                t = graph.by_uid[uid]
                if t.virtual and uid not in producer:
                    raise self.fail(f"$.nodes[{i}]", f"reads virtual tensor {uid} ({t.name!r}) that no node writes")
        execution_order(graph)   # raises on cycles
        for i, node in enumerate(graph.nodes):
            s = ops.spec(node.type)
            if s is None:
                continue
            node_path = f"$.nodes[{i}]"
            for where, problem in semantics.option_problems(node, s, node_path):
                raise self.fail(where, problem)
            for where, problem in (s.check(node, graph) if s.check is not None else ()):
                raise self.fail(node_path + (f".{where}" if where else ""), problem)
            for where, problem in semantics.compute_type_problems(node, graph, node_path):
                raise self.fail(where, problem)
        for where, problem in semantics.output_problems(graph):
            raise self.fail(where, problem)


def _port_keys(node: Node) -> list[tuple[str, str]]:
    """(JSON key, path inside the node) for every port."""
    keys = []
    for port in (*node.inputs, *node.outputs):
        key = port + UID_SUFFIX
        where = node.param_sections.get(key, "inputs")
        if where.startswith(DERIVED):
            keys.append((key, where.removeprefix(DERIVED)))
            continue
        keys.append((key, key if where == "node" else f"{where}.{key}"))
    return keys


def _port_uid(node: Node, key: str) -> Any:
    port = key.removesuffix(UID_SUFFIX)
    return node.inputs[port] if port in node.inputs else node.outputs[port]


def execution_order(graph: Graph) -> list[int]:
    """Node indices so every node runs after the producers of its inputs.

    Files list nodes in insertion order, which is already topological; a cycle (a
    node reading, through others, what it writes) is an error.
    """
    producer = {u: i for i, n in enumerate(graph.nodes) for u in n.output_uids()}
    deps = [
        {producer[u] for u in n.input_uids() if u in producer and producer[u] != i}
        for i, n in enumerate(graph.nodes)
    ]
    for i, n in enumerate(graph.nodes):
        if any(producer.get(u) == i for u in n.input_uids()):
            raise GraphError(graph.source, f"$.nodes[{i}]", f"node {n.name!r} reads a tensor it writes itself")
    order: list[int] = []
    state = [0] * len(graph.nodes)   # 0 new, 1 on stack, 2 done

    for root in range(len(graph.nodes)):
        if state[root]:
            continue
        stack = [(root, iter(sorted(deps[root])))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                state[node] = 2
                order.append(node)
            elif state[child] == 1:
                cycle = [graph.nodes[k].name for k, _ in stack] + [graph.nodes[child].name]
                start = cycle.index(graph.nodes[child].name)
                raise GraphError(graph.source, "$.nodes",
                                 "cycle through nodes " + " -> ".join(cycle[start:]))
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, iter(sorted(deps[child]))))
    return order


def parse_graph(raw: Any, source: str, *, allow_unknown: bool = False) -> Graph:
    """A parsed JSON value -> checked Graph. Unknown node fields are an error naming the JSON path with
    the closest known key; ``allow_unknown`` keeps them as ``graph.warnings`` instead."""
    return _Parser(source, allow_unknown).graph(raw)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
