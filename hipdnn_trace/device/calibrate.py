"""Achievable peaks of this machine's GPU, measured with torch: GEMM rate per data type and copy bandwidth.

A data sheet's peak is at the boost clock and power the part may never hold under a long GEMM; what a
library can reach on this machine is the fairer roof. Each rate is the best of several blocks of calls
timed with device events (the achievable peak, not a typical one); the copy moves a buffer well past the
last-level cache, counting its read and its write. The result is a :class:`Peaks` the table's loader reads
back (docs/speed-of-light.md).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any

from hipdnn_trace.device.peaks import Peaks
from hipdnn_trace.errors import UserError

#: the classes torch can time portably (fp6 / fp4 GEMMs have no portable torch call)
MEASURED = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _torch() -> Any:
    """torch with a GPU it can use, or the one-line reason there is none."""
    try:
        import torch
    except ImportError:
        raise UserError("no GPU: calibrate measures the GPU through torch, which is not installed") from None
    if not torch.cuda.is_available():
        raise UserError("no GPU: calibrate needs a CUDA or ROCm GPU and torch sees none on this machine")
    return torch


def _best_seconds(torch: Any, call: Callable[[], Any], calls: int, blocks: int) -> float:
    """Seconds per call of the fastest of ``blocks`` blocks of ``calls`` calls (after a warmup block)."""
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(blocks):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return best


def _gemm(torch: Any, cls: str, n: int, device: Any) -> Callable[[], Any] | None:
    """One n x n x n product of class ``cls`` (None: this torch / GPU has no such GEMM)."""
    floats = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
              "bf16": torch.bfloat16, "fp16": torch.float16}
    if cls in floats:
        a = torch.randn(n, n, device=device, dtype=floats[cls])
        b = torch.randn(n, n, device=device, dtype=floats[cls])
        return lambda: torch.mm(a, b)
    if cls == "int8" and hasattr(torch, "_int_mm"):
        a = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8)
        b = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8)
        return lambda: torch._int_mm(a, b)
    if cls == "fp8" and hasattr(torch, "_scaled_mm"):
        one = torch.ones((), device=device)
        for name in ("float8_e4m3fn", "float8_e4m3fnuz"):   # NVIDIA (OCP) or MI300 (fnuz)
            dtype = getattr(torch, name, None)
            if dtype is None:
                continue
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype).t()   # column-major second operand
            try:
                torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            except (RuntimeError, TypeError):
                continue
            return lambda a=a, b=b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return None


def _copy_tbs(torch: Any, nbytes: int, device: Any, blocks: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / _best_seconds(torch, lambda: dst.copy_(src), 5, blocks) / 1e12


def measure(device: int = 0, size: int = 8192, classes: Sequence[str] = MEASURED, copy_gib: float = 2.0,
            blocks: int = 5) -> tuple[Peaks, list[str]]:
    """The GPU's achievable peaks, and a note per class that could not be measured."""
    torch = _torch()
    dev = torch.device("cuda", device)
    gpu = torch.cuda.get_device_name(dev)
    tflops: dict[str, float] = {}
    notes: list[str] = []
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32
    try:
        with torch.cuda.device(dev):
            for cls in classes:
                matmul.allow_tf32 = cls == "tf32"
                call = _gemm(torch, cls, size, dev)
                if call is None:
                    notes.append(f"{cls}: no GEMM of this type in torch {torch.__version__} on {gpu}")
                    continue
                try:
                    tflops[cls] = 2.0 * size**3 / _best_seconds(torch, call, 10, blocks) / 1e12
                except RuntimeError as exc:   # a type the GPU lacks (int8 on some parts)
                    notes.append(f"{cls}: {' '.join(str(exc).split())[:120]}")
            matmul.allow_tf32 = saved
            hbm = _copy_tbs(torch, int(copy_gib * 2**30), dev, blocks)
    finally:
        matmul.allow_tf32 = saved
    if not tflops:
        raise UserError(f"calibrate: no GEMM could be timed on {gpu}: {'; '.join(notes)}")
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    source = (f"hipdnn-trace calibrate on {gpu} ({when}, torch {torch.__version__}): best of {blocks} blocks of "
              f"{size}x{size}x{size} torch GEMMs per type, device-to-device copy of {copy_gib:g} GiB "
              "(read + write)")
    name = "-".join(gpu.lower().split()) + "-calibrated"
    return Peaks(name=name, tflops=tflops, hbm_tbs=hbm, source=source, label=f"{gpu} (measured)",
                 match=(gpu,), origin=f"calibrated {when}"), notes
