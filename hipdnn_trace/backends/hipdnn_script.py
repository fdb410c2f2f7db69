"""A standalone hipDNN frontend program for one graph: the calls ``backends.hipdnn`` makes.

hipDNN reads its own JSON, so the program embeds the JSON the backend hands to ``Graph.from_json``
(the graph with its unset compute types filled, ``hipdnn.hipdnn_json``) and repeats the build
sequence (plugin paths, handle, from_json, validate, build_operation_graph, the run's engine or
hipDNN's heuristics, check_support, build_plans), one device buffer per non-virtual tensor, and one
execute. It imports ``hipdnn_frontend`` alone: inputs are a constant byte pattern (0x3C: a small
finite value in every float type), enough to show a crash or an error status.
"""

from __future__ import annotations

from hipdnn_trace.graph.dtypes import numpy_dtype
from hipdnn_trace.graph.model import Graph


def _buffers(graph: Graph) -> list[tuple[int, str, int]]:
    """(uid, name, bytes) of every tensor the variant pack binds."""
    return [(t.uid, t.name, max(1, t.storage_elements * numpy_dtype(t.data_type).itemsize))
            for t in graph.tensors if not t.virtual and not t.is_value]


def hipdnn_script(graph: Graph, text: str, *, title: str, plugin_path: str | None,
                  engine_id: int | None) -> str:
    """The program for ``graph`` whose JSON, as hipDNN receives it, is ``text``."""
    inputs = {t.uid for t in graph.input_tensors}
    rows = ",\n".join(f"    ({uid}, {name!r}, {nbytes}, {uid in inputs})" for uid, name, nbytes in _buffers(graph))
    return TEMPLATE.format(title=title, text=text, rows=rows, plugin_path=plugin_path, engine_id=engine_id)


TEMPLATE = '''\
"""{title}

Standalone: imports hipDNN's Python frontend (hipdnn_frontend) only. The calls are those
hipdnn-trace's hipdnn backend made for this graph: the same JSON into Graph.from_json, the same
plugin path and engine, one device buffer per tensor (inputs filled with the byte 0x3C, outputs
with 0xFF), one execute.

    python repro_hipdnn.py
"""

import sys

import hipdnn_frontend as hd

PLUGIN_PATH = {plugin_path!r}   # the run's --APath/--BPath/@PLUGIN (None: hipDNN's default plugins)
ENGINE_ID = {engine_id!r}   # the engine the run forced (None: hipDNN's heuristics)
#: (uid, name, bytes, is_input) of every tensor bound to a device buffer
TENSORS = [
{rows}
]
GRAPH_JSON = {text!r}


def check(result, what):
    bad = getattr(result, "is_bad", None)
    if result is not None and callable(bad) and bad():
        getter = getattr(result, "get_message", None)
        raise RuntimeError(f"{{what}}: {{getter() if callable(getter) else result}}")


def main():
    if PLUGIN_PATH:
        hd.set_engine_plugin_paths([PLUGIN_PATH], hd.PluginLoadingMode.ABSOLUTE)
    handle = hd.Handle()
    graph = hd.Graph()
    check(graph.from_json(GRAPH_JSON), "Graph.from_json")
    if hasattr(graph, "validate"):
        check(graph.validate(), "Graph.validate")
    check(graph.build_operation_graph(handle), "build_operation_graph")
    if ENGINE_ID is not None:
        check(graph.create_execution_plan_ext(ENGINE_ID), "create_execution_plan_ext")
    else:
        check(graph.create_execution_plans(), "create_execution_plans")
    check(graph.check_support(), "check_support")
    check(graph.build_plans(), "build_plans")
    buffers, pack = {{}}, {{}}
    for uid, _name, nbytes, is_input in TENSORS:
        buffers[uid] = hd.DeviceBuffer(nbytes)
        buffers[uid].copy_from_host(bytes([0x3C if is_input else 0xFF]) * nbytes)
        pack[uid] = int(buffers[uid].ptr())
    size = int(graph.get_workspace_size())
    workspace = hd.DeviceBuffer(size) if size > 0 else None
    check(graph.execute(handle, pack, int(workspace.ptr()) if workspace else 0), "execute")
    if hasattr(hd, "hip_device_synchronize"):
        hd.hip_device_synchronize()
    print("executed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
