"""A standalone torch program for one graph: the torch backend's own translation, traced.

A torch error is a torch bug only if it reproduces without this harness. Rather than keep a second
translation of every op family as code templates, the graph is run once through ``torch_ops`` (what
the torch backend executes) on fake tensors of the target device, traced with ``make_fx`` at the
pre-dispatch level (high-level aten ops such as ``scaled_dot_product_attention`` are kept, not
decomposed), and the traced module's Python source becomes the script's body. The script imports
torch alone; its inputs are seeded random values laid out with the graph's dims, strides and types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hipdnn_trace.backends.repro_fill import FILL_SOURCE
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph

#: torch's sdpa_kernel backend per --torch-sdpa-backend (torch_ops/attention.py's table)
SDPA_KERNEL = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH",
               "cudnn": "CUDNN_ATTENTION"}


def _runner(graph: Graph, device: Any, scalars: Mapping[int, float]) -> Any:
    """The torch backend's walk over the graph as one function of its input tensors."""
    import torch

    from hipdnn_trace.backends import torch_ops as ops

    inputs = list(graph.input_tensors)

    def run(*tensors: Any) -> tuple[Any, ...]:
        values = {t.uid: x for t, x in zip(inputs, tensors)}
        known = {t.uid: float(t.value) for t in graph.value_tensors if isinstance(t.value, (int, float))}
        ctx = ops.Ctx(graph, device, {**known, **scalars})
        for uid, value in known.items():
            values[uid] = torch.full(tuple(graph.by_uid[uid].dims), value, dtype=torch.float32, device=device)
        for index in execution_order(graph):
            node = graph.nodes[index]
            x = {p: values[u] for p, u in graph.reads(node).items()}
            for port, tensor in ops.OPS[node.type](node, graph, x, ctx).items():
                values[node.outputs[port]] = tensor
        return tuple(values[t.uid] for t in graph.output_tensors)

    return run


def traced_module_source(graph: Graph, device: str, scalars: Mapping[int, float]) -> str:
    """``class Repro(torch.nn.Module)`` calling the aten ops the torch backend runs for ``graph`` on
    ``device`` ("cpu" or "cuda": the translation differs, e.g. half widened on the CPU).
    UnsupportedError when torch cannot express or trace it (data-dependent shapes)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from hipdnn_trace.backends import torch_ops as ops

    reason = ops.check(graph)
    if reason:
        raise UnsupportedError(reason)
    ragged = [t.name for t in graph.tensors if t.ragged_offset_tensor_uid is not None]
    if ragged:   # the per-sequence loop's lengths are the offset tensors' values: nothing to trace on fakes
        raise UnsupportedError(f"ragged tensors ({', '.join(ragged)}: ragged_offset_tensor_uid) have lengths "
                               "that are data, which a traced torch program cannot take")
    dev = torch.device(device)
    with FakeTensorMode():
        fakes = [torch.empty_strided(tuple(t.dims), tuple(t.strides), dtype=ops.TORCH_DTYPES[t.data_type],
                                     device=dev) for t in graph.input_tensors]
    try:
        module = make_fx(_runner(graph, dev, scalars), pre_dispatch=True)(*fakes)
    except Exception as exc:   # noqa: BLE001 - any tracing failure means no script, said in one line
        raise UnsupportedError(f"torch tracing failed ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]})") from None
    constants = [n.target for n in module.graph.nodes if n.op == "get_attr"]
    if constants:
        raise UnsupportedError(f"the traced program holds tensor constants ({', '.join(map(str, constants))})")
    text = module.print_readable(print_output=False)
    text = re.sub(r"^class [^(]*\(", "class Repro(", text, count=1)
    return "\n".join(line for line in text.splitlines() if "No stacktrace found" not in line) + "\n"


def _dtype(graph_type: str) -> str:
    from hipdnn_trace.backends import torch_ops as ops

    return str(ops.TORCH_DTYPES[graph_type])   # "torch.float16"


def torch_script(graph: Graph, *, device: str, scalars: Mapping[int, float], title: str,
                 sdpa_backend: str = "default", seed: int = 0) -> str:
    """The whole script: the traced module, the graph's inputs and a main that runs it once."""
    module = traced_module_source(graph, device, scalars)
    inputs = ",\n".join(f"    ({t.name!r}, {list(t.dims)}, {list(t.strides)}, {_dtype(t.data_type)})"
                        for t in graph.input_tensors)
    outputs = [t.name for t in graph.output_tensors]
    kernel = SDPA_KERNEL.get(sdpa_backend)
    return TEMPLATE.format(title=title, module=module, inputs=inputs, outputs=outputs, device=device, seed=seed,
                           kernel=repr(kernel), fill=FILL_SOURCE)


TEMPLATE = '''\
"""{title}

Standalone: imports torch only. The module below is what hipdnn-trace's torch backend runs for this
graph (its translation traced with torch.fx's make_fx at the pre-dispatch level); inputs are seeded
random values with the graph's dims, strides and data types.

    python repro_torch.py
"""

import sys

import torch
from torch import device  # noqa: F401 - the traced code names devices

inf, nan = float("inf"), float("nan")

DEVICE = {device!r}
SEED = {seed}
SDPA_KERNEL = {kernel}   # torch.nn.attention.SDPBackend the run allowed (None: torch chooses)
#: (name, dims, strides, dtype) of each graph input, in the order forward() takes them
INPUTS = [
{inputs}
]
OUTPUTS = {outputs}


{module}

{fill}

def make(dims, strides, dtype, dev, gen):
    """A tensor laid out with the graph's strides, filled with seeded values of its type."""
    return fill(torch.empty_strided(dims, strides, dtype=dtype, device=dev), gen)


def main():
    dev = torch.device(DEVICE)
    if dev.type == "cuda":   # the harness's strict math: no TF32, no reduced-precision reductions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
            if hasattr(torch.backends.cuda.matmul, name):
                setattr(torch.backends.cuda.matmul, name, False)
    gen = torch.Generator().manual_seed(SEED)
    inputs = [make(dims, strides, dtype, dev, gen) for _, dims, strides, dtype in INPUTS]
    print("torch", torch.__version__, "on", dev, flush=True)
    if SDPA_KERNEL is not None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([getattr(SDPBackend, SDPA_KERNEL)]):
            outs = Repro()(*inputs)
    else:
        outs = Repro()(*inputs)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    for name, out in zip(OUTPUTS, outs):
        finite = bool(torch.isfinite(out.float()).all()) if out.is_floating_point() else True
        print(f"{{name}}: {{tuple(out.shape)}} {{out.dtype}} finite={{finite}}")
    print("executed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
