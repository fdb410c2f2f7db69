"""Block-scale quantize / dequantize in torch, with hipDNN's rules (graph/blockscale.py).

torch has fp8 (e4m3, e5m2) and e8m0 storage types but no fp4 arithmetic (``float4_e2m1fn_x2`` is
packed storage only), so fp4 tensors live on the device as one e2m1 code per byte (0..15): they
are decoded through a 16-entry table and encoded by round-to-nearest-even on the code grid.
e8m0 scales are decoded from their bits (2^(code - 127)). The math runs in float32, as hipDNN's
reference does with its default float compute type.
"""

from __future__ import annotations

import torch

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values
from hipdnn_trace.graph import blockscale
from hipdnn_trace.graph.model import Graph, Node

#: e2m1 magnitudes of codes 0..7 (OCP MX v1.0: 1 sign, 2 exponent, 1 mantissa bit, bias 1)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_TYPE_RANGE = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp4_e2m1": 6.0, "half": 65504.0,
               "bfloat16": 3.3895313892515355e38, "float": 3.4028234663852886e38, "int8": 127.0, "uint8": 255.0,
               "int32": 2147483647.0}
_LOWEST = {"uint8": 0.0, "int8": -128.0, "int32": -2147483648.0}


def decode(t: torch.Tensor, hipdnn_dtype: str) -> torch.Tensor:
    """A stored tensor's values in float32 (fp4 codes and e8m0 bits decoded)."""
    if hipdnn_dtype == "fp4_e2m1":
        table = torch.tensor(E2M1 + tuple(-v for v in E2M1), dtype=torch.float32, device=t.device)
        return table[t.to(torch.int64)]
    if hipdnn_dtype == "fp8_e8m0":
        code = t.view(torch.uint8).to(torch.float32)
        return torch.where(code == 255, torch.nan, torch.exp2(code - 127.0))
    return t.float()


def encode_e2m1(v: torch.Tensor) -> torch.Tensor:
    """float32 -> e2m1 codes, round to nearest even, saturating at 6 (ml_dtypes' rule)."""
    bounds = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=v.device)
    mag = v.abs()
    code = torch.bucketize(mag, bounds, right=False)           # ties land on the lower code ...
    tie = torch.isin(mag, bounds) & (code % 2 == 1)
    code = code + tie.to(code.dtype)                           # ... and move to the even one
    return (code + 8 * (v < 0).to(code.dtype)).to(torch.uint8)


def _round_up(v: torch.Tensor, hipdnn_dtype: str, torch_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(stored scale, its float32 value): ``v`` rounded up to the scale type (hipDNN's quantizeRoundUp)."""
    if hipdnn_dtype == "fp8_e8m0":
        mantissa, exponent = torch.frexp(v.clamp(min=2.0 ** -127))   # v = m 2^e, m in [0.5, 1): exact,
        exponent = exponent - (mantissa == 0.5).to(exponent.dtype)  # unlike ceil(log2(v)) on a GPU
        value = torch.exp2(exponent.double()).clamp(2.0 ** -127, 2.0 ** 127)
        code = (torch.log2(value) + 127).round().to(torch.uint8)
        return code.view(torch_dtype), value.float()
    top = _TYPE_RANGE["fp8_e4m3" if hipdnn_dtype == "fp8_e4m3" else hipdnn_dtype]
    v = v.clamp(max=top)
    near = v.float().to(torch_dtype)
    below = near.double() < v
    if below.any():
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[near.element_size()]
        raw = near.view(bits)
        near = torch.where(below, raw + 1, raw).view(torch_dtype)
    return near, near.float()


def block_quantize(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    y_type, scale_type = (graph.by_uid[node.outputs[p]].data_type for p in ("y", "scale"))
    block, axis = int(node.params["block_size"]), blockscale.quantize_axis(node, graph)
    xf = x["x"].float().movedim(axis, -1)
    length = xf.shape[-1]
    blocks = -(-length // block)
    padded = torch.nn.functional.pad(xf, (0, blocks * block - length)).unflatten(-1, (blocks, block))
    amax = padded.abs().amax(dim=-1)
    scale_dtype = ctx.out_dtype(node, "scale")
    stored, value = _round_up(amax.double() / _TYPE_RANGE[y_type], scale_type, scale_dtype)
    s = value[..., None]
    q = torch.where(s != 0, padded / torch.where(s != 0, s, 1.0), torch.zeros_like(padded))
    q = q.clamp(_LOWEST.get(y_type, -_TYPE_RANGE[y_type]), _TYPE_RANGE[y_type]).flatten(-2)[..., :length]
    if y_type == "fp4_e2m1":
        y = encode_e2m1(q)
    elif y_type in _LOWEST:
        y = torch.round(q).to(ctx.out_dtype(node, "y"))
    else:
        y = q.to(ctx.out_dtype(node, "y"))
    return {"y": y.movedim(-1, axis).contiguous(), "scale": stored.movedim(-1, axis).contiguous()}


def block_dequantize(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    x_type, scale_type = (graph.by_uid[node.inputs[p]].data_type for p in ("x", "scale"))
    values, scale = decode(x["x"], x_type), decode(x["scale"], scale_type)
    for axis, b in enumerate(blockscale.dequantize_blocks(node, graph)):
        if b > 1:
            scale = scale.repeat_interleave(b, dim=axis).narrow(axis, 0, values.shape[axis])
    factor = torch.exp2(-scale) if node.params.get("is_negative_scale") else scale
    return {"y": (values * factor).to(ctx.out_dtype(node, "y"))}


OPS: dict[str, OpFn] = {blockscale.QUANTIZE: block_quantize, blockscale.DEQUANTIZE: block_dequantize}
