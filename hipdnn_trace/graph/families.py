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


@dataclass(frozen=True, kw_only=True)
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
    Family(name="convolution", spec=_G + "conv", builder=_G + "build_conv:ConvBuilder", inputs=Absent(_DRAWN),
           reference=_REF + "conv", torch=_TORCH + "conv", cudnn=_CUDNN + "conv", hipdnn=_HIPDNN, samples="conv"),
    Family(name="matmul", spec=_G + "matmul", builder=_G + "build_matmul:MatmulBuilder", inputs=Absent(_DRAWN),
           reference=_REF + "matmul", torch=_TORCH + "matmul", cudnn=_CUDNN + "matmul", hipdnn=_HIPDNN,
           samples="matmul"),
    Family(name="pointwise", spec=_G + "pointwise", builder=_G + "build_pointwise:PointwiseBuilder",
           inputs=_B + "pointwise_inputs", reference=_REF + "pointwise", torch=_TORCH + "pointwise",
           cudnn=_CUDNN + "pointwise", hipdnn=_HIPDNN, samples="pointwise"),
    Family(name="norms", spec=_G + "norms", builder=_G + "build_norms:NormBuilder", inputs=_B + "norm_inputs",
           reference=_REF + "norms", torch=_TORCH + "norms", cudnn=_CUDNN + "norms", hipdnn=_HIPDNN, samples="norm"),
    Family(name="attention", spec=_G + "attention", builder=_G + "build_attention:AttentionBuilder",
           inputs=_B + "attention_inputs", reference=_REF + "attention", torch=_TORCH + "attention",
           cudnn=_CUDNN + "attention", hipdnn=_HIPDNN, samples="attention"),
    Family(name="custom", spec=_G + "custom",
           builder=Absent("a CustomOp node is its plugin's JSON (uid lists, opaque data bytes; "
                          "docs/hipdnn-format.md 2.11): graphs holding one are written as JSON for that plugin"),
           inputs=Absent("a plugin's ports have no meaning this project knows: every input is drawn"),
           reference=Absent(_PLUGIN), torch=Absent(_PLUGIN), cudnn=Absent(_PLUGIN), hipdnn=_HIPDNN,
           samples=Absent("no plugin ships with the samples, and without its plugin a CustomOp runs nowhere"),
           flops=Absent("a plugin's work is unknown: it counts 0, so graph_flops is a lower bound")),
    Family(name="moe", spec=_G + "moe", builder=_G + "build_moe:MoeBuilder", inputs=_B + "moe_inputs",
           reference=_REF + "moe", torch=_TORCH + "moe", cudnn=_CUDNN + "moe", hipdnn=_HIPDNN, samples="moe"),
    Family(name="resample", spec=_G + "resample", builder=_G + "build_resample:ResampleBuilder",
           inputs=_B + "resample_inputs", reference=_REF + "resample", torch=_TORCH + "pooling",
           # dir(cudnn.pygraph) has no resample or pooling method (checked on the H100 device, docs/nvidia.md)
           cudnn=Absent("cuDNN's resample (pooling) has no Python frontend binding (cudnn-frontend 1.32)"),
           hipdnn=_HIPDNN, samples="pool"),
    Family(name="blockscale", spec=_G + "blockscale", builder=_G + "build_blockscale:BlockScaleBuilder",
           inputs=_B + "blockscale_inputs", reference=_REF + "blockscale", torch=_TORCH + "blockscale",
           cudnn=_CUDNN + "blockscale", hipdnn=_HIPDNN, samples="blockscale"),
    Family(name="reduction", spec=_G + "reduction", builder=_G + "build_reduction:ReductionBuilder",
           inputs=Absent(_DRAWN), reference=_REF + "reduction", torch=_TORCH + "reduction",
           cudnn=_CUDNN + "reduction", hipdnn=_HIPDNN, samples="reduction"),
)
