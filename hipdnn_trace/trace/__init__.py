"""Perfetto trace of a run: host phases, GPU kernels, counters and flows on one timeline.

:class:`TraceWriter` appends native protobuf packets (``trace.pftrace``; open it
at https://ui.perfetto.dev); :func:`add_kernels` and :func:`add_counters` turn
profiler frames into GPU tracks; :func:`read_trace` decodes a trace back into
polars frames without Perfetto's trace_processor; :func:`repair` cuts a trace
from a killed run back to its last complete packet. See docs/trace.md.
"""

from hipdnn_trace.trace.gpu import add_counters, add_kernels
from hipdnn_trace.trace.reader import TraceContents, read_trace, repair
from hipdnn_trace.trace.writer import TraceWriter

__all__ = ["TraceContents", "TraceWriter", "add_counters", "add_kernels", "read_trace", "repair"]
