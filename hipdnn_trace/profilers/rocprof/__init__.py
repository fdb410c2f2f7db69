"""AMD profiler data: rocprofv3 (CSV and rocpd), legacy rocprof v1, rocprofv2 text.

Each parser turns one profiler file into polars frames with the project's
``kernels`` / ``counters`` schemas; :mod:`.markers_join` assigns kernels to the
harness's iterations; :mod:`.argv` builds the profiler command lines.
"""
