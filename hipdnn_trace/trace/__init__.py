"""Perfetto trace of a run: host phases, GPU kernels, counters and flows on one timeline.

:class:`TraceWriter` appends native protobuf packets (``trace.pftrace``; open it
at https://ui.perfetto.dev); :func:`read_trace` decodes a trace back into
polars frames without Perfetto's trace_processor; :func:`repair` cuts a trace
from a killed run back to its last complete packet. See docs/trace.md.
What a run puts in it (host slices, and the GPU tracks ``add_kernels`` and
``add_counters`` build from profiler frames) is in ``results/timeline.py``:
it needs results' schemas, and this package knows nothing of runs.
"""

from hipdnn_trace.trace.reader import TraceContents, read_trace, repair
from hipdnn_trace.trace.writer import TraceWriter

__all__ = ["TraceContents", "TraceWriter", "read_trace", "repair"]
