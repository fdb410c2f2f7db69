"""Kernel names as people read them: the Itanium C++ ABI names CUDA and HIP compilers emit
(``_Z33convolve_common_engine_float_NHWCILi3ELi3EEvPKfS1_Pf``) demangled by the C++ runtime's own
``abi::__cxa_demangle`` (the ``cxxfilt`` package), as Nsight Compute, Nsight Systems and rocprofv3 show
them. Every kernels frame keeps the name as the profiler gave it in ``mangled_name`` (the key a
profiler's second pass is matched on); ``name`` (``kernel`` in counter frames) is the demangled one. A
name that is not mangled, or that the runtime cannot demangle, stays as it is. docs/frames.md."""

from __future__ import annotations

from functools import lru_cache

import polars as pl

MANGLED = "_Z"


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-mangled ``name``; ``name`` itself otherwise."""
    if not name.startswith(MANGLED):
        return name
    try:
        import cxxfilt

        return cxxfilt.demangle(name) or name
    except Exception:   # cxxfilt.InvalidName, a missing C++ runtime: the raw name is still a name
        return name


def with_demangled(frame: pl.DataFrame, column: str = "name") -> pl.DataFrame:
    """``frame`` with ``column`` demangled and the profiler's own spelling in ``mangled_name`` (kept when the
    frame has one already: a frame demangled twice keeps the first spelling)."""
    if column not in frame.columns:
        return frame
    raw = pl.col(column).cast(pl.String)
    if "mangled_name" in frame.columns:   # a null spelling (a frame conformed before) falls back to the name
        raw = pl.coalesce(pl.col("mangled_name").cast(pl.String), raw)
    names = frame.select(raw.alias("_raw"))["_raw"]
    table = {n: demangle(n) for n in names.drop_nulls().unique().to_list()}
    return frame.with_columns(raw.alias("mangled_name")).with_columns(
        pl.col("mangled_name").replace_strict(table, default=None, return_dtype=pl.String).alias(column))
