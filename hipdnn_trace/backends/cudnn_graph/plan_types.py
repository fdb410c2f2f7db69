"""The plan as plain data: tensors, op calls, outputs (what ``backends.cudnn`` replays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hipdnn_trace.errors import UnsupportedError

#: hipDNN data type -> cudnn.data_type member.
DTYPES: dict[str, str] = {
    "float": "FLOAT", "half": "HALF", "bfloat16": "BFLOAT16", "double": "DOUBLE",
    "int8": "INT8", "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "boolean": "BOOLEAN",
    "fp8_e4m3": "FP8_E4M3", "fp8_e5m2": "FP8_E5M2", "fp8_e8m0": "FP8_E8M0",
    "fp4_e2m1": "FP4_E2M1",   # a type cuDNN has; its packing is refused in cudnn_graph/blockscale.py
}

CONV_TYPES = ("ConvolutionFwdAttributes", "ConvolutionBwdAttributes", "ConvolutionWrwAttributes")


@dataclass(frozen=True)
class EnumValue:
    """A cuDNN python enum member named by family and member (``reduction_mode.ADD``)."""

    family: str
    member: str


@dataclass(frozen=True)
class TensorDecl:
    """A tensor the caller provides: a device buffer, a by-value scalar, or a constant."""

    key: str
    uid: int                         # cuDNN uid (1, 2, ...): hipDNN uids may be 0 or negative
    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str                       # cudnn.data_type member
    hipdnn_uid: int | None = None    # bound from this hipDNN tensor
    by_value: float | int | None = None   # pass-by-value host scalar (graph constant)
    by_value_from_input: bool = False     # pass-by-value scalar read from the bound input
    fill: float | None = None        # a device constant the plan synthesizes (zero bias)
    cast: str | None = None          # hipDNN type the buffer holds when cuDNN takes another than the graph's
    ragged_offset: str | None = None  # key of this tensor's ragged offset tensor (packed attention rows)
    #: this is a ragged offset tensor computed from the seq_len_q input (hipdnn_uid) at bind time:
    #: (sequences per q row, q's Sq, token stride H * D); graph.attention.ragged_element_offsets
    offsets_of: tuple[int, int, int] | None = None
    #: a ragged offset tensor (RFC 0014) bound from hipDNN's offset tensor (hipdnn_uid): (its
    #: ragged_offset_multiplier, the token stride H * D and S_max of the tensor it offsets); the session
    #: uploads values x multiplier as int32 element offsets (cuDNN's own multiplier is 9.24+, unified only)
    ragged_elements: tuple[int, int, int] | None = None
    #: per-sequence lengths for cuDNN's padding mask, derived at bind from the offset tensor hipdnn_uid:
    #: (its multiplier, the token stride of the tensor it offsets, S_max)
    lengths_of: tuple[int, int, int] | None = None

    @property
    def is_scalar(self) -> bool:
        return self.by_value is not None or self.by_value_from_input


@dataclass(frozen=True)
class OutputDecl:
    """One op output: its cuDNN uid, geometry, and whether a buffer backs it."""

    key: str
    uid: int
    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    virtual: bool
    hipdnn_uid: int | None = None    # None: scratch output nobody fetches
    ragged_offset: str | None = None  # key of this output's ragged offset tensor (packed attention rows)


@dataclass(frozen=True)
class OpCall:
    """``getattr(pygraph, method)(**tensors, **attrs, name=..., compute_data_type=...)``."""

    method: str
    name: str
    tensors: Mapping[str, str | None]     # kwarg -> tensor key (None: not passed)
    attrs: Mapping[str, Any]
    outputs: tuple[str | None, ...]       # output keys in the method's return order
    output_kwargs: Mapping[str, str] = field(default_factory=dict)   # kwarg -> output key made before the
                                          # call and passed in (sdpa's score_max, sdpa_backward's dBias)
    compute: str | None = None
    node: str = ""


@dataclass
class Plan:
    io: str | None
    intermediate: str | None
    compute: str | None
    inputs: list[TensorDecl] = field(default_factory=list)
    ops: list[OpCall] = field(default_factory=list)
    outputs: list[OutputDecl] = field(default_factory=list)
    fp32_math: bool = False
    notes: list[str] = field(default_factory=list)

    def output(self, key: str) -> OutputDecl:
        return next(o for o in self.outputs if o.key == key)

    @property
    def buffers(self) -> list[TensorDecl | OutputDecl]:
        """Everything that needs a device buffer."""
        return [t for t in self.inputs if not t.is_scalar] + [o for o in self.outputs if not o.virtual]


def _dtype(name: str, what: str) -> str:
    if name not in DTYPES:
        raise UnsupportedError(f"{what}: data type {name} has no cuDNN equivalent")
    return DTYPES[name]


def _graph_dtype(name: str) -> str | None:
    return None if name in ("unset", "", None) else _dtype(name, "graph")
