"""hipdnn-trace: run, time, validate and profile hipDNN operation graphs.

Library use::

    import hipdnn_trace
    run = hipdnn_trace.run("graphs/", iters=50)      # frames of the run directory
    run.summary, run.iterations, run.validation
    cmp = hipdnn_trace.compare("runs/A", "runs/B")    # verdict table
"""

__version__ = "0.1.0"


def __getattr__(name: str):  # lazy: importing the package stays cheap for the CLI
    if name in ("run", "compare"):
        from hipdnn_trace import api

        return getattr(api, name)
    if name == "load_run":
        from hipdnn_trace.results.rundir import load_run

        return load_run
    raise AttributeError(name)


__all__ = ["__version__", "compare", "load_run", "run"]
