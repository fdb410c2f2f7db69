"""Graph -> hipDNN JSON files.

The JSON form itself and the graph_id hash live in ``canonical.py`` (the model needs them too);
they are re-exported here for callers that write graphs.
"""

from __future__ import annotations

import json
from pathlib import Path

from hipdnn_trace.atomic import write_text_atomic
from hipdnn_trace.graph.canonical import canonical, graph_id, graph_to_json, node_to_json, tensor_to_json
from hipdnn_trace.graph.model import Graph

__all__ = ["canonical", "dumps", "graph_id", "graph_to_json", "node_to_json", "tensor_to_json", "write_file"]


def dumps(graph: Graph) -> str:
    """Pretty JSON as hipDNN's tools write it (4-space indent)."""
    return json.dumps(graph_to_json(graph), indent=4) + "\n"


def write_file(graph: Graph, path: str | Path) -> None:
    write_text_atomic(Path(path), dumps(graph))
