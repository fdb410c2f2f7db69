"""A plan written out as a standalone cuDNN frontend program (torch for the buffers).

The plan is already plain data (every ``pygraph`` call with its arguments, every tensor's dims,
strides and type), so a library bug report needs only that data printed as the calls
``backends.cudnn`` makes when it replays it: the same tensors, ops, build sequence
(validate, operation graph, heuristics A then FALLBACK, the numerical notes the harness deselects,
support check, the first plan that builds or the engine the run used), then one execute.
benchmarks/repro_cudnn_sink.py is a hand-written program of the same shape.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue, OpCall, OutputDecl, Plan, TensorDecl
from hipdnn_trace.backends.repro_fill import FILL_SOURCE
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.attention import ragged_element_offsets

#: cudnn.data_type member -> the torch dtype of a buffer holding it (fp4: packed codes in bytes)
TORCH_OF = {"FLOAT": "torch.float32", "HALF": "torch.float16", "BFLOAT16": "torch.bfloat16",
            "DOUBLE": "torch.float64", "INT8": "torch.int8", "INT32": "torch.int32", "INT64": "torch.int64",
            "UINT8": "torch.uint8", "BOOLEAN": "torch.bool", "FP8_E4M3": "torch.float8_e4m3fn",
            "FP8_E5M2": "torch.float8_e5m2", "FP8_E8M0": "torch.float8_e8m0fnu", "FP4_E2M1": "torch.uint8"}


def _literal(value: Any, where: str) -> str:
    """An attribute's Python source: an enum member, or a literal that reads back the same."""
    if isinstance(value, EnumValue):
        return f"enum({value.family!r}, {value.member!r})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v, where) for v in value) + "]"
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise UnsupportedError(f"{where}: {type(value).__name__} value has no literal form") from None
    return text


def _var(key: str) -> str:
    return "t_" + "".join(ch if ch.isalnum() else "_" for ch in key)


def _tensor_line(t: TensorDecl | OutputDecl, *, by_value: bool = False) -> str:
    return (f"graph.tensor(name={t.name!r}, dim={list(t.dims)}, stride={list(t.strides)}, "
            f"data_type=cudnn.data_type.{t.dtype}, is_pass_by_value={by_value}, uid={t.uid})")


def _op_lines(plan: Plan, op: OpCall) -> list[str]:
    lines = []
    args = [f"name={op.name!r}"]
    args += [f"{k}={_var(v)}" for k, v in op.tensors.items() if v is not None]
    for kwarg, key in op.output_kwargs.items():
        decl = plan.output(key)
        lines.append(f"{_var(key)} = {_tensor_line(decl)}.set_output(True)")
        args.append(f"{kwarg}={_var(key)}")
    args += [f"{k}={_literal(v, f'{op.node} {k}')}" for k, v in op.attrs.items()]
    if op.compute:
        args.append(f"compute_data_type=cudnn.data_type.{op.compute}")
    lines.append(f"result = graph.{op.method}({', '.join(args)})   # node {op.node!r}")
    lines.append("results = list(result) if isinstance(result, (list, tuple)) else [result]")
    for i, key in enumerate(op.outputs):
        if key is None:
            continue
        decl = plan.output(key)
        lines.append(f"{_var(key)} = results[{i}]")
        lines.append(f"{_var(key)}.set_dim({list(decl.dims)}).set_stride({list(decl.strides)})"
                     f".set_data_type(cudnn.data_type.{decl.dtype})")
        if not decl.virtual:
            lines.append(f"{_var(key)}.set_output(True).set_uid({decl.uid})")
        if decl.ragged_offset:
            lines.append(f"{_var(key)}.set_ragged_offset({_var(decl.ragged_offset)})")
    return lines


def _buffer_lines(plan: Plan, scalars: Mapping[int, float]) -> list[str]:
    """The variant pack: seeded device buffers, by-value host scalars, synthesized constants."""
    lines = []
    for t in plan.inputs:
        dtype = TORCH_OF[t.dtype]
        if t.is_scalar:
            value = t.by_value if t.by_value is not None else scalars.get(t.hipdnn_uid or 0, 1.0)
            lines.append(f"pack[{_var(t.key)}] = torch.full({list(t.dims)}, {value!r}, dtype={dtype})   # by value")
        elif t.offsets_of is not None:   # packed attention rows: every sequence at its longest
            per_row, seq_q, token = t.offsets_of
            offsets = ragged_element_offsets([seq_q // per_row] * (t.dims[0] - 1), per_row, seq_q, token)
            lines.append(f"pack[{_var(t.key)}] = torch.tensor({offsets}, dtype=torch.int32).reshape({list(t.dims)})"
                         "   # ragged offsets (elements)")
        elif t.ragged_elements is not None:   # RFC 0014 offsets: every sequence at S_max, packed
            _, token, s_max = t.ragged_elements
            offsets = [i * s_max * token for i in range(t.dims[0])]
            lines.append(f"pack[{_var(t.key)}] = torch.tensor({offsets}, dtype=torch.int32).reshape({list(t.dims)})"
                         "   # ragged offsets (elements)")
        elif t.lengths_of is not None:   # lengths from those offsets: S_max each
            lines.append(f"pack[{_var(t.key)}] = torch.full({list(t.dims)}, {t.lengths_of[2]}, dtype=torch.int32)")
        elif t.fill is not None:
            lines.append(f"pack[{_var(t.key)}] = torch.full_like(empty({list(t.dims)}, {list(t.strides)}, "
                         f"{dtype}), {t.fill!r})")
        else:
            lines.append(f"pack[{_var(t.key)}] = seeded({list(t.dims)}, {list(t.strides)}, {dtype})")
    for o in plan.outputs:
        if not o.virtual:
            lines.append(f"pack[{_var(o.key)}] = empty({list(o.dims)}, {list(o.strides)}, {TORCH_OF[o.dtype]})")
    return lines


def cudnn_script(plan: Plan, *, title: str, deselect: Sequence[str], engine: str | None,
                 scalars: Mapping[int, float], seed: int = 0) -> str:
    """The program: ``plan`` built on a ``cudnn.pygraph`` and executed once on GPU 0."""
    types = ", ".join(f"{k}=cudnn.data_type.{v}" for k, v in (("io_data_type", plan.io),
                                                               ("intermediate_data_type", plan.intermediate),
                                                               ("compute_data_type", plan.compute)) if v)
    body = [f"{_var(t.key)} = {_tensor_line(t, by_value=t.is_scalar)}" for t in plan.inputs]
    body += [f"{_var(t.key)}.set_ragged_offset({_var(t.ragged_offset)})" for t in plan.inputs if t.ragged_offset]
    for op in plan.ops:
        body += _op_lines(plan, op)
    return TEMPLATE.format(title=title, types=types, tf32=plan.fp32_math,
                           body="\n".join("    " + line for line in body),
                           buffers="\n".join("    " + line for line in _buffer_lines(plan, scalars)),
                           deselect=list(deselect), engine=engine, seed=seed, fill=FILL_SOURCE)


TEMPLATE = '''\
"""{title}

Standalone: imports the cuDNN frontend (nvidia-cudnn-frontend) and torch (device buffers) only. The
calls are those hipdnn-trace's cudnn backend made for this graph: the same tensors (dims, strides,
types, uids), ops and attributes, heuristics A then FALLBACK, the numerical notes it deselected, and
the engine the run used (else the first plan that builds). Inputs are seeded random values.

    python repro_cudnn.py
"""

import os
import sys

TF32_OFF = {tf32}   # fp32 graphs: hipDNN's tolerances allow no TF32 (the harness sets this too)
if TF32_OFF:
    os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")

import cudnn
import torch

SEED = {seed}
DESELECT = {deselect}   # cudnn.numerical_note members the harness deselected
ENGINE = {engine!r}   # the plan name the run used (None: the first plan that builds)


def enum(family, member):
    group = getattr(cudnn, family, None) or getattr(getattr(cudnn, "_pybind_module", None), family)
    return getattr(group, member)


def empty(dims, strides, dtype):
    return torch.empty_strided(dims, strides, dtype=dtype, device="cuda")


{fill}

def seeded(dims, strides, dtype, gen=torch.Generator().manual_seed(SEED)):
    return fill(empty(dims, strides, dtype), gen)


def pick_plan(graph):
    """The run's plan by name, else the first that builds; its index."""
    count = graph.get_execution_plan_count()
    order = [i for i in range(count) if ENGINE is None or str(graph.get_plan_name_at_index(i)) == ENGINE]
    errors = []
    for index in order or range(count):
        try:
            graph.build_plan_at_index(index)
            return index
        except Exception as exc:
            errors.append(f"{{index}}: {{exc}}")
    raise RuntimeError(f"none of {{count}} plans builds: {{errors}}")


def main():
    torch.cuda.set_device(0)
    handle = cudnn.create_handle()
    print("cudnn", cudnn.backend_version(), "frontend", getattr(cudnn, "__version__", "?"), flush=True)
    graph = cudnn.pygraph(handle=handle, {types})
{body}
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    if DESELECT:
        graph.deselect_numeric_notes([getattr(cudnn.numerical_note, n) for n in DESELECT])
    graph.check_support()
    index = pick_plan(graph)
    print("plan", index, graph.get_plan_name_at_index(index), flush=True)
    pack = {{}}
{buffers}
    workspace = torch.empty(max(graph.get_workspace_size_plan_at_index(index), 1), dtype=torch.uint8, device="cuda")
    graph.execute(pack, workspace, handle=handle)
    torch.cuda.synchronize()
    print("executed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
