"""Every op family and where each of its pieces lives: one entry per family.

Data only. Modules are named by dotted path and never imported here, so this module sits
below every layer and each layer builds its own table from the entries of its layer:
``graph/ops.py`` the specs, the reference executor, ``torch_ops``, ``cudnn_graph`` and the
hipdnn backend their maps, ``bench/inputs.py`` the input rules. Adding a family is one entry
here plus the modules it names; tests/graph/test_family_registry.py checks every piece.

What each named module provides:

* ``spec`` (graph/): ``SPECS``, a tuple of :class:`~hipdnn_trace.graph.opspec.OpSpec` (ports,
  option sections, shape rule, FLOP count, notes); optionally ``refusal(node, backend)``, the
  line a backend the family is :class:`Absent` from gives for one of its nodes.
* ``builder`` (graph/, ``"module:Class"``): the ``GraphBuilder`` mixin with the family's methods.
* ``inputs`` (bench/): any of ``domain(node, port)`` (the value domain of an input port, or
  None), ``metadata_value(graph, tensor, rng_for)`` (an input with meaning: lengths, routing)
  and ``derived(graph, inputs, seed, device)`` (inputs computed from others: a backward's saved
  statistics).
* ``reference`` (backends/reference/nodes/): ``HANDLERS``, node type -> float64 handler;
  optionally ``check(node, graph)``, why the reference refuses a node, or None.
* ``torch`` (backends/torch_ops/): ``OPS``, node type -> eager function; optionally ``check``.
* ``cudnn`` (backends/cudnn_graph/): ``OPS``, node type -> plan handler (raises UnsupportedError).
* ``hipdnn`` (backends/): the module that hands the node to hipDNN as the graph's own JSON;
  its ``HIPDNN_NODE_TYPES`` holds the family's types.
* ``samples``: the folder of ``SMALL`` in graphs/generate.py holding its sample graphs.
* ``flops``: None when every spec carries a FLOP count (bytes are counted for every family
  alike by ``ops.graph_bytes``), else :class:`Absent` with the reason.

A piece a family does not have is :class:`Absent` with the reason, never left out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Absent", "FAMILIES", "Family", "Piece"]


@dataclass(frozen=True)
class Absent:
    """A piece a family does not have, and why (the line a backend refuses its nodes with)."""

    reason: str


Piece = str | Absent


@dataclass(frozen=True)
class Family:
    """One op family: the dotted path of each layer's piece (module docstring)."""

    name: str
    spec: str
    builder: Piece
    inputs: Piece
    reference: Piece
    torch: Piece
    cudnn: Piece
    hipdnn: Piece
    samples: Piece
    flops: Absent | None = None


_G = "hipdnn_trace.graph."
_B = "hipdnn_trace.bench."
_REF = "hipdnn_trace.backends.reference.nodes."
_TORCH = "hipdnn_trace.backends.torch_ops."
_CUDNN = "hipdnn_trace.backends.cudnn_graph."
_HIPDNN = "hipdnn_trace.backends.hipdnn"

_DRAWN = "every input is drawn from the seeded generator: any value is a valid operand, no port has a meaning"
_PLUGIN = "plugin-defined: only hipDNN with that plugin loaded can run it"

#: Every family, in the order their specs are collected (and their derived inputs made).
FAMILIES: tuple[Family, ...] = (
    Family("convolution", _G + "conv", _G + "build_conv:ConvBuilder", Absent(_DRAWN),
           _REF + "conv", _TORCH + "conv", _CUDNN + "conv", _HIPDNN, "conv"),
    Family("matmul", _G + "matmul", _G + "build_matmul:MatmulBuilder", Absent(_DRAWN),
           _REF + "matmul", _TORCH + "matmul", _CUDNN + "matmul", _HIPDNN, "matmul"),
    Family("pointwise", _G + "pointwise", _G + "build_pointwise:PointwiseBuilder", _B + "pointwise_inputs",
           _REF + "pointwise", _TORCH + "pointwise", _CUDNN + "pointwise", _HIPDNN, "pointwise"),
    Family("norms", _G + "norms", _G + "build_norms:NormBuilder", _B + "norm_inputs",
           _REF + "norms", _TORCH + "norms", _CUDNN + "norms", _HIPDNN, "norm"),
    Family("attention", _G + "attention", _G + "build_attention:AttentionBuilder", _B + "attention_inputs",
           _REF + "attention", _TORCH + "attention", _CUDNN + "attention", _HIPDNN, "attention"),
    Family("custom", _G + "custom",
           Absent("a CustomOp graph is written by hand for its plugin (tests/graph/test_custom_op.py)"),
           Absent("a plugin's ports have no meaning this project knows: every input is drawn"),
           Absent(_PLUGIN), Absent(_PLUGIN), Absent(_PLUGIN), _HIPDNN,
           Absent("no plugin ships with the samples, and without its plugin a CustomOp runs nowhere"),
           flops=Absent("a plugin's work is unknown: it counts 0, so graph_flops is a lower bound")),
    Family("moe", _G + "moe", _G + "build_moe:MoeBuilder", _B + "moe_inputs",
           _REF + "moe", _TORCH + "moe", _CUDNN + "moe", _HIPDNN, "moe"),
    Family("resample", _G + "resample", _G + "build_resample:ResampleBuilder", _B + "resample_inputs",
           _REF + "resample", _TORCH + "pooling",
           # dir(cudnn.pygraph) has no resample or pooling method (checked on the H100 device, docs/nvidia.md)
           Absent("cuDNN's resample (pooling) has no Python frontend binding (cudnn-frontend 1.32)"),
           _HIPDNN, "pool"),
    Family("blockscale", _G + "blockscale", _G + "build_blockscale:BlockScaleBuilder", _B + "blockscale_inputs",
           _REF + "blockscale", _TORCH + "blockscale", _CUDNN + "blockscale", _HIPDNN, "blockscale"),
    Family("reduction", _G + "reduction", _G + "build_reduction:ReductionBuilder", Absent(_DRAWN),
           _REF + "reduction", _TORCH + "reduction", _CUDNN + "reduction", _HIPDNN, "reduction"),
)

