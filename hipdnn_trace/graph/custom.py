"""CustomOp: a plugin-defined node that only hipDNN, with that plugin loaded, can execute.

hipDNN's schema (``custom_op_attributes.fbs`` @ 0671485c) names the operation by
``custom_op_id`` (dotted, ``"<plugin>.<operation>"``), lists its tensors in
``input_tensor_uids`` / ``output_tensor_uids`` and carries opaque ``data`` bytes; its JSON
reader (flatbuffers_sdk ``json/CustomOpAttributes.hpp``) requires all four keys flat on the
node. The loader turns the uid lists into ports ``input_0..``, ``output_0..`` so the graph's
wiring (producers, outputs, execution order) works as for every other node, while the lists
themselves are kept as read, so the file is written back byte for byte. No backend but hipdnn
can say what the op computes: reference, torch and cuDNN refuse it naming its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import OpSpec, option_path
from hipdnn_trace.graph.option_types import ANY, INT_LIST, STRING

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

CUSTOM_OP = "CustomOpAttributes"
#: JSON list key -> the port name prefix its uids get (``input_tensor_uids[2]`` -> ``input_2``).
UID_LISTS = {"input_tensor_uids": "input", "output_tensor_uids": "output"}
_REQUIRED = ("custom_op_id", "input_tensor_uids", "output_tensor_uids", "data")


def custom_op_id(node: Node) -> str:
    return str(node.params.get("custom_op_id", ""))


def refusal(node: Node, backend: str) -> str:
    """The one-line reason a backend other than hipdnn gives for a CustomOp node."""
    return (f"CustomOp {node.name!r} is plugin-defined ({custom_op_id(node)!r}): only hipDNN with that "
            f"plugin loaded can run it, not {backend}")


def _check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    problems = [(key, "missing required field (hipDNN's reader needs it, even when empty)")
                for key in _REQUIRED if key not in node.params]
    op_id = node.params.get("custom_op_id")
    if "custom_op_id" in node.params and (not isinstance(op_id, str) or not op_id.strip()):
        problems.append((option_path(node, "custom_op_id", "node"),
                         f"must be a non-empty string like \"<plugin>.<operation>\", got {op_id!r}"))
    data = node.params.get("data")
    if "data" in node.params and not (isinstance(data, list) and all(
            isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in data)):
        problems.append((option_path(node, "data", "node"), "must be a list of byte values 0..255"))
    if not node.outputs:
        problems.append((option_path(node, "output_tensor_uids", "node"), "a custom op needs at least one output"))
    return problems


def _notes(node: Node, graph: Graph) -> list[str]:
    def names(ports: dict) -> str:
        return ", ".join(f"{graph.by_uid[u].name} [{'x'.join(map(str, graph.by_uid[u].dims))}]"
                         for u in ports.values() if isinstance(u, int) and u in graph.by_uid) or "none"

    data = node.params.get("data") or []
    return [f"custom_op_id {custom_op_id(node)!r}: plugin-defined, only the hipdnn backend can run it",
            f"inputs {names(dict(node.inputs))}; outputs {names(dict(node.outputs))}; data {len(data)} byte(s)"]


SPEC = OpSpec(
    CUSTOM_OP, (), (),
    options={key: "node" for key in (*_REQUIRED, "test_generation_marker")},
    option_kinds={"custom_op_id": STRING, "input_tensor_uids": INT_LIST, "output_tensor_uids": INT_LIST,
                  "data": INT_LIST, "test_generation_marker": ANY},
    layout="flat", uid_lists=UID_LISTS, check=_check, notes=_notes,
)

SPECS: tuple[OpSpec, ...] = (SPEC,)
