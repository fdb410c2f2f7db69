"""The hipDNN graph as data: load, check, write, cost, build."""

from hipdnn_trace.graph.load import load_bytes, load_file, parse_graph
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.write import graph_id, graph_to_json

__all__ = ["Graph", "Node", "Tensor", "graph_id", "graph_to_json", "load_bytes", "load_file",
           "parse_graph"]
