"""What every torch op module shares: value types, dtype map, the per-session context."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node

Values = Mapping[str, "torch.Tensor | None"]
OpFn = Callable[[Node, Graph, Values, "Ctx"], dict[str, torch.Tensor]]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64, "boolean": torch.bool,
}
for _name, _attr in (("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2"),
                     ("fp8_e4m3_fnuz", "float8_e4m3fnuz"), ("fp8_e5m2_fnuz", "float8_e5m2fnuz"),
                     ("fp8_e8m0", "float8_e8m0fnu")):
    if hasattr(torch, _attr):
        TORCH_DTYPES[_name] = getattr(torch, _attr)


#: torch has no fp4 arithmetic type: an fp4 tensor lives on the device as one e2m1 code per byte
#: (torch_ops/blockscale.py decodes and encodes it)
TORCH_DTYPES["fp4_e2m1"] = torch.uint8


class Ctx:
    """Per-session facts an op needs: device kind, output dtypes, scalar values."""

    def __init__(self, graph: Graph, device: torch.device, scalars: Mapping[int, float]) -> None:
        self.graph = graph
        self.device = device
        self.cpu = device.type == "cpu"
        self.scalars = dict(scalars)
        self.sdpa_backend = "default"   # --torch-sdpa-backend: which torch SDPA kernel family

    def out_dtype(self, node: Node, port: str) -> torch.dtype:
        return TORCH_DTYPES[self.graph.by_uid[node.outputs[port]].data_type]

    def out_dims(self, node: Node, port: str) -> tuple[int, ...]:
        return tuple(self.graph.by_uid[node.outputs[port]].dims)

    def scalar(self, node: Node, port: str, default: float | None = None) -> float:
        uid = node.inputs.get(port)
        if uid is None:
            if default is None:
                raise UnsupportedError(f"{node.op} {node.name!r}: {port} is required")
            return default
        return float(self.scalars[uid])

    def mma(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        """Operands of a conv/matmul in one type: theirs on a GPU, float32 on the CPU. Integer and
        boolean operands are multiplied in float32, hipDNN's compute type for them: torch's integer
        products wrap around where hipDNN saturates, and it has no boolean matmul on the CPU."""
        types = {t.dtype for t in tensors}
        if any(not t.is_floating_point() for t in tensors):
            return [t.float() for t in tensors]
        if self.cpu and types & {torch.float16, torch.bfloat16}:
            return [t.float() for t in tensors]
        if len(types) > 1:
            return [t.float() for t in tensors]
        return list(tensors)


def stored(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in the output's type: an integer output truncated and saturated to its range (hipDNN's
    conversion; torch's own wraps around), a boolean one true where ``t`` is not zero."""
    if dtype == torch.bool:
        return t != 0
    if not dtype.is_floating_point and t.is_floating_point():
        info = torch.iinfo(dtype)
        return t.trunc().clamp(info.min, info.max).to(dtype)
    return t.to(dtype)


def f32(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype in (torch.float32, torch.float64) else t.float()
