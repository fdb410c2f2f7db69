"""Load-time rules beyond one family's shape rule: option types, compute types, a graph's outputs.

``load.py`` runs these for every node after the ports are wired, so a graph ``inspect`` accepts is
a graph ``run`` can start, and both refuse the rest with one line naming the file and the JSON
path (docs/graphs.md "What load checks"). Each function returns ``(JSON path, problem)`` pairs;
paths are absolute (``$.nodes[3].attributes.forward_phase``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hipdnn_trace.graph import dtypes, option_types
from hipdnn_trace.graph.ops import SPECS
from hipdnn_trace.graph.opspec import OpSpec

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

#: Node types whose math is floating point whatever their tensors hold: a non-float compute type
#: would be read past by every backend here (the float64 reference silently computes in float64).
FLOAT_COMPUTE_OPS = frozenset(SPECS) - {
    "PointwiseAttributes",   # integer compute types are legal (comparisons, logic, integer arithmetic)
    "CustomOpAttributes",    # opaque to this project: its plugin decides
}
#: int32 accumulation is how integer (int8/uint8) convolutions and GEMMs compute (cuDNN's INT8 rule)
_INTEGER_ACCUMULATING = frozenset({"ConvolutionFwdAttributes", "ConvolutionBwdAttributes",
                                   "ConvolutionWrwAttributes", "MatmulAttributes"})


def option_problems(node: Node, spec: OpSpec, node_path: str) -> list[tuple[str, str]]:
    """Every option's JSON type (the spec's ``option_kinds``)."""
    return [(f"{node_path}.{where}", problem)
            for where, problem in option_types.option_problems(node, spec)]


def compute_type_problems(node: Node, graph: Graph, node_path: str) -> list[tuple[str, str]]:
    """A floating op's compute type must be a floating type (or int32 over integer inputs of a
    conv / matmul); a node without its own takes the graph's."""
    if node.type not in FLOAT_COMPUTE_OPS:
        return []
    own = node.compute_data_type not in (dtypes.UNSET, "")
    compute = node.compute_data_type if own else graph.compute_data_type
    where = f"{node_path}.compute_data_type" if own else "$.compute_data_type"
    dt = dtypes.DTYPES.get(compute)
    if dt is None or dt.is_float:
        return []
    integer_inputs = all(not dtypes.DTYPES[graph.by_uid[u].data_type].is_float for u in node.input_uids()
                         if not graph.by_uid[u].is_value)
    if compute == "int32" and node.type in _INTEGER_ACCUMULATING and integer_inputs:
        return []
    allowed = " (int32 only to accumulate integer inputs)" if node.type in _INTEGER_ACCUMULATING else ""
    return [(where, f"compute type {compute} is not a floating type: {node.op} {node.name!r} computes in floating "
             f"point{allowed}; no backend here would honour it (the float64 reference would ignore it)")]


def output_problems(graph: Graph) -> list[tuple[str, str]]:
    """A graph must hand at least one tensor back: with every output virtual nothing can be
    timed against a result or validated."""
    if graph.output_tensors or not graph.produced_uids:
        return []
    index = {t.uid: i for i, t in enumerate(graph.tensors)}
    last = graph.nodes[-1].output_uids() or sorted(graph.produced_uids)
    uid = last[0]
    return [(f"$.tensors[{index[uid]}].virtual",
             f"every tensor the graph writes is virtual (here {graph.by_uid[uid].name!r}): nothing comes back to "
             "check; mark the final output(s) \"virtual\": false")]
