"""For a backend's error row: a program that calls only that library, ready for its bug tracker.

The program comes from the backend's own translation (torch: ``backends/torch_script.py`` traces
``torch_ops``; cuDNN: ``backends/cudnn_graph/script.py`` prints the frontend plan; hipDNN:
``backends/hipdnn_script.py`` embeds the JSON ``Graph.from_json`` received), so it makes the calls
the harness made, with the graph's shapes, strides and types. Values a graph reads as numbers
(single-element inputs such as epsilon) take the run's seeded values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hipdnn_trace.errors import UnsupportedError, UserError
from hipdnn_trace.graph.model import Graph

#: backends a standalone program exists for, and its file name
SCRIPT_NAMES = {"torch": "repro_torch.py", "cudnn": "repro_cudnn.py", "hipdnn": "repro_hipdnn.py"}


def seeded_scalars(graph: Graph, seed: int) -> dict[int, float]:
    """The run's values of the graph's single-element inputs (they become numbers in the program)."""
    import numpy as np

    from hipdnn_trace.bench.inputs import make_input

    return {t.uid: float(np.asarray(make_input(graph, t, seed), dtype=np.float64).reshape(-1)[0])
            for t in graph.input_tensors if t.numel == 1}


def _config(meta: Mapping[str, Any], row: Mapping[str, Any]) -> Mapping[str, Any]:
    configs = meta.get("configs") if isinstance(meta.get("configs"), list) else []   # an edited run.json: none
    return next((c for c in configs if isinstance(c, dict) and c.get("name") == row.get("config")), {})


def _torch(meta: Mapping[str, Any], row: Mapping[str, Any], graph: Graph, title: str, seed: int) -> str:
    from hipdnn_trace.backends.torch_script import torch_script
    from hipdnn_trace.commands.repro_flags import options_of

    sdpa = next((v for a, v, _ in options_of((meta.get("argv") or [])[2:]) if a.dest == "torch_sdpa_backend"),
                None) or "default"
    device = "cpu" if meta.get("gpu") is None else "cuda"
    return torch_script(graph, device=device, scalars=seeded_scalars(graph, seed), title=title,
                        sdpa_backend=str(sdpa), seed=seed)


def _cudnn(meta: Mapping[str, Any], row: Mapping[str, Any], graph: Graph, title: str, seed: int) -> str:
    from hipdnn_trace.backends.cudnn import notes_to_deselect
    from hipdnn_trace.backends.cudnn_graph import plan
    from hipdnn_trace.backends.cudnn_graph.script import cudnn_script

    p = plan(graph)
    return cudnn_script(p, title=title, deselect=notes_to_deselect(p), engine=row.get("engine") or None,
                        scalars=seeded_scalars(graph, seed), seed=seed)


def _hipdnn(meta: Mapping[str, Any], row: Mapping[str, Any], graph: Graph, title: str, seed: int) -> str:
    from hipdnn_trace.backends.hipdnn import hipdnn_json
    from hipdnn_trace.backends.hipdnn_api import FORCE, parse_engine
    from hipdnn_trace.backends.hipdnn_script import hipdnn_script

    config = _config(meta, row)
    engine_id = None
    if config.get("engine") not in (None, "", "all", "list"):
        try:
            request = parse_engine(str(config["engine"]))
            engine_id = request.engine_id if request.mode == FORCE else None
        except UserError:
            engine_id = None
    return hipdnn_script(graph, hipdnn_json(graph)[0], title=title, plugin_path=config.get("plugin_path"),
                         engine_id=engine_id)


WRITERS = {"torch": _torch, "cudnn": _cudnn, "hipdnn": _hipdnn}


def library_script(meta: Mapping[str, Any], row: Mapping[str, Any], graph: Graph | None,
                   title: str) -> tuple[str, str]:
    """(file name, program) for ``row``'s backend; UnsupportedError says why there is none."""
    backend = str(row.get("backend") or "")
    if backend not in WRITERS:
        raise UnsupportedError(f"no standalone program for backend {backend!r} (torch, cudnn and hipdnn have one)")
    if graph is None:
        raise UnsupportedError("the graph does not load, so there is no translation to write out")
    try:
        program = WRITERS[backend](meta, row, graph, title, int(meta.get("seed") or 0))
    except ImportError as exc:   # torch absent here (the row came from a machine that had it): no program
        raise UnsupportedError(f"writing the {backend} program needs {exc.name or 'a library'} installed here "
                               f"({type(exc).__name__})") from None
    return SCRIPT_NAMES[backend], program
