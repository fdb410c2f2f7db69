"""The JSON type of every option of every modelled node type, checked at load.

A string where hipDNN's reader wants a number (``"relu_upper_clip": "6"``) or a number where it
wants a flag would otherwise reach an op as a default or as a Python ``ValueError`` at run time,
with no JSON path. Values (enum names, ranges, list lengths) are each family's shape rule's job;
this table only says what JSON type each option is, so ``inspect`` and ``run`` refuse the same
files with the same words. Every option a spec declares has an entry here (a test holds that).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import attention, blockscale, custom, moe, resample
from hipdnn_trace.graph.opspec import option_path

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Node

#: value -> None when it is of the kind, else what was expected (for the message)
Kind = Callable[[Any], "str | None"]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _kind(test: Callable[[Any], bool], expected: str, *, nullable: bool = False) -> Kind:
    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        return None if test(value) else expected + (" or null" if nullable else "")
    return check


INT = _kind(_is_int, "an integer")
INT_OR_NULL = _kind(_is_int, "an integer", nullable=True)
NUMBER_OR_NULL = _kind(_is_number, "a finite number", nullable=True)
BOOL_OR_NULL = _kind(lambda v: isinstance(v, bool), "true or false", nullable=True)
STRING = _kind(lambda v: isinstance(v, str), "a string")
STRING_OR_NULL = _kind(lambda v: isinstance(v, str), "a string", nullable=True)
NAME_OR_NUMBER = _kind(lambda v: isinstance(v, str) or _is_int(v), "an enum name or number")
NAME_OR_NUMBER_OR_NULL = _kind(lambda v: isinstance(v, str) or _is_int(v), "an enum name or number", nullable=True)
INT_LIST = _kind(lambda v: isinstance(v, list) and all(_is_int(x) for x in v), "a list of integers")
INT_OR_INT_LIST = _kind(lambda v: _is_int(v) or (isinstance(v, list) and all(_is_int(x) for x in v)),
                        "an integer or a list of integers")
ANY: Kind = lambda value: None   # opaque to hipDNN too: a test-generation marker

_CONV = {"pre_padding": INT_LIST, "post_padding": INT_LIST, "stride": INT_LIST, "dilation": INT_LIST,
         "conv_mode": STRING}
_NORM_FWD = {"normalized_dim_count": INT_OR_NULL, "forward_phase": NAME_OR_NUMBER_OR_NULL}
_SDPA_COMMON = {
    **dict.fromkeys(("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right"), BOOL_OR_NULL),
    "dropout_probability": NUMBER_OR_NULL, "attn_scale_value": NUMBER_OR_NULL,
    "left_bound": INT_OR_NULL, "right_bound": INT_OR_NULL, "max_seq_len_kv": INT_OR_NULL,
    "diagonal_alignment": STRING_OR_NULL, "mma_core_mode": STRING_OR_NULL, "implementation": STRING_OR_NULL,
}
_RESAMPLE = {"pre_padding": INT_LIST, "post_padding": INT_LIST, "stride": INT_LIST, "window": INT_LIST,
             "resample_mode": STRING, "padding_mode": STRING_OR_NULL, "generate_index": BOOL_OR_NULL}

#: node type -> option -> kind
OPTION_KINDS: Mapping[str, Mapping[str, Kind]] = {
    "ConvolutionFwdAttributes": _CONV,
    "ConvolutionBwdAttributes": _CONV,
    "ConvolutionWrwAttributes": _CONV,
    "MatmulAttributes": {},
    "PointwiseAttributes": {
        "operation": STRING, "axis_tensor_uid": INT_OR_NULL,
        **dict.fromkeys(("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "swish_beta",
                         "elu_alpha", "softplus_beta"), NUMBER_OR_NULL),
    },
    "BatchnormInferenceAttributes": {},
    "BatchnormInferenceAttributesVarianceExt": {},
    "BatchnormAttributes": {},
    "BatchnormBackwardAttributes": {},
    "LayernormAttributes": _NORM_FWD,
    "RMSNormAttributes": _NORM_FWD,
    "LayernormBackwardAttributes": {"normalized_dim_count": INT_OR_NULL},
    "RMSNormBackwardAttributes": {},
    "ReductionAttributes": {"mode": STRING, "is_deterministic": BOOL_OR_NULL},
    attention.SDPA: {**_SDPA_COMMON, "generate_stats": BOOL_OR_NULL},
    attention.SDPA_BACKWARD: {**_SDPA_COMMON, "max_seq_len_q": INT_OR_NULL, "deterministic": BOOL_OR_NULL},
    resample.RESAMPLE_FWD: _RESAMPLE,
    resample.RESAMPLE_BWD: _RESAMPLE,
    blockscale.QUANTIZE: {"block_size": INT, "axis": INT_OR_NULL, "transpose": BOOL_OR_NULL},
    blockscale.DEQUANTIZE: {"block_size": INT_OR_INT_LIST, "is_negative_scale": BOOL_OR_NULL},
    moe.MOE: {"mode": NAME_OR_NUMBER, "top_k": INT},
    moe.MOE_BACKWARD: {},
    custom.CUSTOM_OP: {"custom_op_id": STRING, "input_tensor_uids": INT_LIST, "output_tensor_uids": INT_LIST,
                       "data": INT_LIST, "test_generation_marker": ANY},
}


def option_problems(node: Node, sections: Mapping[str, str]) -> list[tuple[str, str]]:
    """(JSON path inside the node, problem) for each option whose JSON type is wrong.

    ``sections`` is the spec's option -> default section, for options written where the file put them.
    """
    kinds = OPTION_KINDS.get(node.type, {})
    problems = []
    for key, value in node.params.items():
        kind = kinds.get(key)
        expected = kind(value) if kind is not None else None
        if expected is not None:
            shown = (repr(value) if not isinstance(value, (list, dict)) or len(repr(value)) < 40
                     else type(value).__name__)
            problems.append((option_path(node, key, sections.get(key, "attributes")),
                             f"{node.op} option {key} must be {expected}, got {shown}"))
    return problems
