"""``hipdnn-trace inspect GRAPH...``: what a graph is and who can run it, without running it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.bench import verdict as shared
from hipdnn_trace.commands import SUMMARIES, argtypes
from hipdnn_trace.console import escape, escape_strings
from hipdnn_trace.device.peaks import Peaks, resolve as resolve_peaks
from hipdnn_trace.errors import UserError, describe as describe_error
from hipdnn_trace.graph import ops, sources, umd
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.results.speed_of_light import speed_of_light
from hipdnn_trace.runs.request import REFERENCE_DEVICES

DESCRIPTION = """\
For each graph: name, graph_id, data types, ops, every tensor (uid, name, role, dtype,
dims, strides, layout), analytical FLOPs and minimum bytes moved (and, where a node carries
them, hipDNN's own umd_flops / umd_bytes beside ours: a difference over 1% is flagged), and for each backend
whether it is available here and whether it can run the graph (and why not).
GRAPH is a file, a folder (searched recursively), a glob or a tarball; mix them freely.
A graph that fails to load prints one line (file, JSON path, problem) on stderr and the
others still print; the exit code is then 1.
"""

EPILOG = """\
examples:
  hipdnn-trace inspect graphs/conv/conv_fwd_nchw_fp32.json
  hipdnn-trace inspect graphs/ --quiet            # one line per graph
  hipdnn-trace inspect 'graphs/**/*bf16.json' --json > graphs.json
  hipdnn-trace inspect suite.tar.gz other/        # archives are read in memory
  hipdnn-trace inspect integration_test_bundles/quick/   # bundles and sweeps: one entry per graph / case
  hipdnn-trace inspect graphs/perf/ --peaks h100-sxm   # speed of light on H100 SXM, before any run
  hipdnn-trace inspect g.json --json --peaks my-gpu.toml   # peaks measured by hipdnn-trace calibrate
  hipdnn-trace inspect sdpa_with_umd_flops.json  # "hipDNN ..." line: its umd_flops beside ours
  hipdnn-trace inspect big.json --max-reference-seconds 0   # as run with the same limit would judge
  hipdnn-trace inspect big.json --reference-device cpu --validate reference   # run's flags, run's verdict

"cannot run" is run's own verdict (bench/verdict.py): run refuses the same graph on the same backend,
before it makes an input, with the same line. The float64 reference's time is judged at this
machine's one kept float64 rate (measured once, then read from the user's cache folder; the
HIPDNN_TRACE_FLOAT64_GFLOPS variable sets it instead), so both commands judge a graph near
--max-reference-seconds alike (docs/reliability.md).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "inspect",
        help=SUMMARIES["inspect"],
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("graphs", nargs="+", metavar="GRAPH", help="graph file, folder, glob or tarball")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print one JSON array (machine-readable)")
    form.add_argument("-q", "--quiet", action="store_true", help="one line per graph")
    parser.add_argument("--allow-unknown-fields", action="store_true",
                        help="read past graph fields no hipDNN writer uses (listed as warnings) instead of "
                             "refusing the graph")
    parser.add_argument("--peaks", metavar="NAME|FILE",
                        help="GPU peaks for each graph's speed of light: a row of the peak table (h100-sxm, "
                             "h100-pcie, h200, b200, mi300x, mi325x, mi355x) or a peaks file; default: the row "
                             "of this machine's GPU (NVML), none without one (docs/speed-of-light.md)")
    parser.add_argument("--max-reference-seconds", type=argtypes.seconds, default=DEFAULT_MAX_REFERENCE_S,
                        metavar="S", help="judge the float64 reference's time as run with this limit would "
                        f"(default {DEFAULT_MAX_REFERENCE_S:g}, run's; 0: no limit)")
    parser.add_argument("--validate", choices=("reference", "none"), default="reference",
                        help="judge as run with this --validate would: none never evaluates the validating "
                             "float64 reference, so only the reference backend's own time is judged (default "
                             "reference, run's)")
    parser.add_argument("--reference-device", choices=REFERENCE_DEVICES, default="auto",
                        help="judge the validating reference's time where run would evaluate it: cpu, cuda "
                             "(torch float64 on the GPU), auto (default, run's) = cuda when torch sees a GPU")
    parser.set_defaults(main=main)
    return parser


# ------------------------------------------------------------------ facts

@dataclass(frozen=True)
class BackendVerdict:
    name: str
    available: bool
    available_reason: str
    supported: bool | None          # None: could not ask (backend did not load)
    supported_reason: str

    def text(self) -> str:
        if not self.available:
            return f"not available: {self.available_reason}"
        if self.supported:
            return "can run"
        return f"cannot run: {self.supported_reason}"


class _Backends:
    """Each backend loaded and asked whether it is available once per command."""

    def __init__(self, limits: shared.Limits | None = None) -> None:
        self._state: dict[str, tuple[Any, bool, str]] = {}
        self.limits = limits or shared.Limits()

    def _load(self, name: str) -> tuple[Any, bool, str]:
        if name not in self._state:
            try:
                backend = backends.get(name)
            except Exception as exc:   # a GPU library that fails to import must not stop inspect
                self._state[name] = (None, False, describe_error(exc))
            else:
                try:
                    support = backend.available()
                    self._state[name] = (backend, bool(support), support.reason)
                except Exception as exc:
                    self._state[name] = (backend, False, describe_error(exc))
        return self._state[name]

    def verdicts(self, graph: Graph) -> list[BackendVerdict]:
        """Each backend's verdict: ``run``'s own (``bench/verdict.py``), with this machine's limits."""
        out = []
        for name in backends.names():
            backend, available, reason = self._load(name)
            supported: bool | None = None
            why = ""
            if backend is not None:
                try:
                    support = shared.verdict(graph, name, backend, self.limits)
                    supported, why = bool(support), support.reason
                except Exception as exc:
                    supported, why = False, describe_error(exc)
            out.append(BackendVerdict(name, available, reason, supported, why))
        return out


def op_label(node: Node) -> str:
    """``ConvolutionFwd``, ``Pointwise(relu_fwd)``, ``Reduction(add)``."""
    mode = node.params.get("operation") if node.type == "PointwiseAttributes" else (
        node.params.get("mode") if node.type == "ReductionAttributes" else None)
    return f"{node.op}({mode})" if isinstance(mode, str) else node.op


def tensor_role(graph: Graph, t: Tensor) -> str:
    if t.is_value:
        return "value"
    if t.uid in graph.produced_uids:
        return "virtual" if t.virtual else "out"
    if any(t.uid in n.input_uids() or t.uid in graph.reads(n).values() for n in graph.nodes):
        return "in"   # read through a port, or as a ragged offset tensor (Graph.reads)
    return "unused"


def describe(graph: Graph, source: str, verdicts: list[BackendVerdict],
             peaks: Peaks | None = None) -> dict[str, Any]:
    """Everything inspect shows about one graph, as plain data (the --json form)."""
    flops = ops.graph_flops(graph)
    nbytes = ops.graph_bytes(graph)
    sol = speed_of_light(graph, peaks, flops, nbytes) if peaks is not None else None
    return {
        "name": graph.label,
        "source": source,
        "graph_id": graph.graph_id,
        "compute_data_type": graph.compute_data_type,
        "io_data_type": graph.io_data_type,
        "intermediate_data_type": graph.intermediate_data_type,
        "ops": [op_label(n) for n in graph.nodes],
        "nodes": [{"name": n.name, "type": n.type, "op": op_label(n),
                   "flops": ops.node_flops(n, graph), "notes": ops.node_notes(n, graph)} for n in graph.nodes],
        "tensors": [
            {"uid": t.uid, "name": t.name, "role": tensor_role(graph, t), "data_type": t.data_type,
             "dims": list(t.dims), "strides": list(t.strides), "layout": t.layout,
             **({"value": t.value} if t.is_value else {})}
            for t in graph.tensors
        ],
        "notes": shared.graph_notes(graph),
        "flops": flops,
        "bytes": nbytes,
        "arithmetic_intensity": flops / nbytes if nbytes else None,
        "umd": _umd(graph, flops, nbytes),
        "backends": [
            {"name": v.name, "available": v.available, "available_reason": v.available_reason,
             "supported": v.supported, "supported_reason": v.supported_reason}
            for v in verdicts
        ],
        "speed_of_light": None if sol is None else {**sol.record(), "peaks": peaks.name if peaks else None},
    }


def _umd(graph: Graph, flops: float, nbytes: float) -> dict[str, Any] | None:
    """hipDNN's own model (umd_flops / umd_bytes, RFC 0019) where the graph carries it; None otherwise."""
    model = umd.graph_model(graph)
    if model is None:
        return None
    return {"flops": model.flops, "bytes": model.bytes, "flags": model.flags(flops, nbytes),
            "notes": list(model.notes)}


# ---------------------------------------------------------------- output

def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def render_text(info: dict[str, Any]) -> str:
    ai = info["arithmetic_intensity"]
    lines = [
        info["name"],
        f"  source     {info['source']}",
        f"  graph_id   {info['graph_id']}",
        f"  types      io {info['io_data_type']}, compute {info['compute_data_type']}, "
        f"intermediate {info['intermediate_data_type']}",
        f"  ops        {', '.join(info['ops'])}",
        f"  cost       {_si(info['flops'], 'FLOP')}, {_si(info['bytes'], 'B')} moved (minimum), "
        f"{'n/a' if ai is None else f'{ai:.3g}'} FLOP/B",
    ]
    lines += _umd_lines(info.get("umd"))
    sol = info.get("speed_of_light")
    if sol:
        lines.append(f"  light      {sol['ms']:.3g} ms, {sol['bound']}-bound on {sol['peaks']} "
                     f"(compute {sol['compute_ms']:.3g} ms, memory {sol['memory_ms']:.3g} ms)")
    for node in info["nodes"]:
        lines += [f"  note       {note}" for note in node.get("notes", [])]
    lines += [f"  note       {note}" for note in info.get("notes", [])]
    lines += [
        "  tensors",
    ]
    rows = [["uid", "name", "role", "dtype", "dims", "strides", "layout"]]
    for t in info["tensors"]:
        role = f"value={t['value']}" if t["role"] == "value" else t["role"]
        rows.append([str(t["uid"]), t["name"], role, t["data_type"], str(t["dims"]),
                     str(t["strides"]), t["layout"]])
    lines += ["    " + r for r in _table(rows)]
    lines.append("  backends")
    width = max(len(b["name"]) for b in info["backends"]) if info["backends"] else 0
    for b in info["backends"]:
        verdict = BackendVerdict(b["name"], b["available"], b["available_reason"], b["supported"],
                                 b["supported_reason"])
        lines.append(f"    {b['name'].ljust(width)}  {verdict.text()}")
    return "\n".join(lines)


def _umd_lines(model: dict[str, Any] | None) -> list[str]:
    """hipDNN's numbers beside ours (the cost line above), then one flag per number over 1% apart."""
    if not model:
        return []
    shown = [_si(v, unit) for v, unit in ((model["flops"], "FLOP"), (model["bytes"], "B")) if v is not None]
    lines = [f"  hipDNN     {', '.join(shown) or 'n/a'} (its umd_flops / umd_bytes)"]
    lines += [f"  note       {note}" for note in model["notes"]]
    lines += [f"  DIFFERS    {flag}" for flag in model["flags"]]
    return lines


def render_quiet(info: dict[str, Any]) -> str:
    runnable = [b["name"] for b in info["backends"] if b["available"] and b["supported"]]
    sol = info.get("speed_of_light")
    light = f"light {sol['ms']:.3g} ms {sol['bound']}  " if sol else ""
    model = info.get("umd")
    hipdnn = (f"hipDNN {_si(model['flops'], 'FLOP')}{' DIFFERS' if model['flags'] else ''}  "
              if model and model["flops"] is not None else "")
    return (f"{info['name']}  {info['graph_id']}  {'+'.join(info['ops'])}  {_si(info['flops'], 'FLOP')}  "
            f"{_si(info['bytes'], 'B')}  {hipdnn}{light}runs on: {','.join(runnable) or '-'}  ({info['source']})")


def _peaks(asked: str | None) -> Peaks | None:
    """--peaks, or the table's row of this machine's GPU (NVML's name); an unknown GPU: a note, no peaks."""
    name = None
    if not asked:
        from hipdnn_trace.device.nvml import gpu_info

        name = (gpu_info(0) or {}).get("name")
        if not name:
            return None   # no GPU here and none asked: nothing to say
    found, note = resolve_peaks(asked, name)
    if found is None:
        print(f"hipdnn-trace inspect: note: {escape(note)}", file=sys.stderr)
    return found


def limits(args: argparse.Namespace) -> shared.Limits:
    """The limits run would judge with under the same flags; a flag run refuses (--reference-device
    cuda without a GPU, a bad HIPDNN_TRACE_FLOAT64_GFLOPS) is refused here in run's words."""
    from hipdnn_trace.backends.reference.rate import override

    override()
    validate = args.validate == "reference"
    return shared.Limits(validate=validate, max_reference_s=args.max_reference_seconds,
                         reference_device=shared.reference_device(validate, args.reference_device))


def main(args: argparse.Namespace) -> int:
    graph_sources = sources.expand(args.graphs)
    if not graph_sources:
        raise UserError(f"no graph files in {' '.join(args.graphs)}")
    checker = _Backends(limits(args))
    peaks = _peaks(args.peaks)
    failed = 0
    infos: list[dict[str, Any]] = []
    for n, src in enumerate(graph_sources):
        try:
            graph = load_bytes(src.read(), src.name, allow_unknown=args.allow_unknown_fields)
        except UserError as exc:   # unreadable, too big or not a valid graph
            print(f"hipdnn-trace inspect: error: {escape(exc)}", file=sys.stderr)
            failed += 1
            if args.json:
                infos.append({"source": src.name, "error": str(exc)})
            continue
        info = describe(graph, src.name, checker.verdicts(graph), peaks)
        for warning in graph.warnings:
            print(f"hipdnn-trace inspect: warning: {escape(warning)}", file=sys.stderr)
        if args.json:
            infos.append(info)
        elif args.quiet:
            print(render_quiet(escape_strings(info)))   # names are data: no control characters on the terminal
        else:
            print(("\n" if n else "") + render_text(escape_strings(info)))
    if args.json:
        json.dump(infos, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 1 if failed else 0
