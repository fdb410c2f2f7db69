"""``repro --shrink``: smaller shapes that keep a row's failure.

A failure in a graph of 4096-wide tensors is easier to read, attach and debug at 8 wide. The search
is greedy and generic: take a size that occurs in the graph's tensors (largest first), halve every
dim of that size at once (a size shared by several tensors is usually one logical dim: a batch, the
channels a convolution's input and filter share), and lay each tensor out again in its own axis
order. The graph loader's shape rules (each op family's) refuse what no longer fits together; a
candidate they accept is run again in this process with the run's own flags (``hipdnn-trace run``
on one graph, one iteration), and kept when its status is still the row's (failed or error). A
second pass halves single dims the first could not. The search stops at a step and a time budget;
every step is logged (what changed, and the loader's refusal or the verdict).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.write import dumps

#: flags appended to the rerun's: one quick measurement (the verdict is the point), no trace
QUICK = ["--warmup", "0", "--iters", "1", "--min-time-ms", "0", "--max-iters", "1", "--no-trace", "--quiet",
         "--format", "csv"]


@dataclass
class Shrunk:
    data: bytes                                   # the smallest graph that kept the failure
    steps: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = "every smaller shape tried lost the failure or broke a shape rule"

    @property
    def kept(self) -> int:
        return sum(1 for s in self.steps if s["result"].startswith("kept"))


def relaid(dims: Sequence[int], strides: Sequence[int]) -> list[int]:
    """Packed strides for ``dims`` in the axis order ``strides`` had (outermost = largest stride)."""
    order = sorted(range(len(dims)), key=lambda i: (strides[i], -i))   # innermost first
    out, step = [0] * len(dims), 1
    for axis in order:
        out[axis] = step
        step *= max(1, int(dims[axis]))
    return out


def _halved(data: dict[str, Any], pick: Callable[[int, int, int], bool]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``data`` whose dims chosen by ``pick(tensor_index, axis, size)`` are halved."""
    new = copy.deepcopy(data)
    touched = []
    for ti, tensor in enumerate(new.get("tensors") or []):
        dims = list(tensor.get("dims") or [])
        changed = [a for a, d in enumerate(dims) if isinstance(d, int) and d > 1 and pick(ti, a, d)]
        if changed:
            strides = list(tensor.get("strides") or [])
            for a in changed:
                dims[a] //= 2
            tensor["dims"] = dims
            if len(strides) == len(dims):
                tensor["strides"] = relaid(dims, strides)
            touched.append(str(tensor.get("name", tensor.get("uid"))))
    return new, touched


def candidates(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what changed, graph) to try: each shared size halved everywhere, then single dims."""
    tensors = data.get("tensors") or []
    sizes = sorted({d for t in tensors for d in t.get("dims") or [] if isinstance(d, int) and d > 1}, reverse=True)
    for size in sizes:
        new, names = _halved(data, lambda ti, a, d, size=size: d == size)
        yield f"every dim of {size} -> {size // 2} ({', '.join(names)})", new
    for ti, t in enumerate(tensors):
        for axis, d in enumerate(t.get("dims") or []):
            if isinstance(d, int) and d > 1:
                new, _ = _halved(data, lambda i, a, _d, ti=ti, axis=axis: (i, a) == (ti, axis))
                yield f"{t.get('name', t.get('uid'))} dim {axis}: {d} -> {d // 2}", new


def signature(status: Any, error: Any) -> str:
    """What must stay the same for a smaller graph to keep the failure: a FAIL stays a FAIL (its counts
    change with the shape); an error stays the same error: its stage and exception, e.g. ``error
    (execute: NotImplementedError)``, not any error (a smaller graph refused at build is another bug)."""
    if status != "error" or not error:
        return str(status)
    head = ": ".join(str(error).split(": ")[:2])
    return f"error ({re.sub(r'[0-9]+', 'N', head)[:80]})"


def verdict_of(flags: Sequence[str], config: str | None) -> Callable[[bytes], str]:
    """A function: graph bytes -> the status ``run`` gives them with ``flags`` (in this process)."""
    from hipdnn_trace.cli import main as cli_main
    from hipdnn_trace.results.rundir import load_run

    def verdict(data: bytes) -> str:
        with tempfile.TemporaryDirectory(prefix="hipdnn-trace-shrink-") as tmp:
            graph = Path(tmp) / "candidate.json"
            graph.write_bytes(data)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cli_main(["run", str(graph), *flags, *QUICK, "--out", tmp, "--run-id", "step"])
            try:
                summary = load_run(Path(tmp) / "step").summary
            except UserError:
                return "no run"
            rows = [r for r in summary.to_dicts() if config is None or r.get("config") == config]
            return signature(rows[0].get("status"), rows[0].get("error")) if rows else "no row"

    return verdict


def shrink(data: bytes, want: str, verdict: Callable[[bytes], str], *, max_steps: int,
           max_seconds: float) -> Shrunk:
    """The smallest graph the greedy search finds whose verdict stays ``want``."""
    best = Shrunk(data)
    current = json.loads(data)
    started = time.monotonic()
    progress = True
    while progress:
        progress = False
        for change, candidate in candidates(current):
            if len(best.steps) >= max_steps or time.monotonic() - started > max_seconds:
                best.stopped = f"budget spent ({len(best.steps)} steps, {time.monotonic() - started:.1f} s)"
                return best
            text = (json.dumps(candidate) + "\n").encode()
            try:
                graph = load_bytes(text, "candidate")
            except UserError as exc:
                best.steps.append({"change": change, "result": f"refused by the shape rules: {exc}"})
                continue
            got = verdict(text)
            best.steps.append({"change": change, "result": f"kept: still {got}" if got == want else
                               f"dropped: {got}"})
            if got == want:   # written as hipDNN's writer lays a graph out
                current, best.data, progress = candidate, dumps(graph).encode(), True
                break
    return best
