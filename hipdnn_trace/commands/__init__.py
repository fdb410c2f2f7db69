"""One module per subcommand (``add_parser(subparsers)`` and ``main(args)``), and
``argtypes``, the argparse converters they share."""

#: Each subcommand's one-line summary, in the order ``--help`` lists them. It lives here, not only in
#: the command's module, so the CLI can list every command while importing just the one that runs
#: (the modules load numpy and polars).
SUMMARIES: dict[str, str] = {
    "run": "time, validate and record graphs",
    "inspect": "shapes, FLOPs, bytes and which backends can run each graph",
    "calibrate": "measure this GPU's achievable GEMM and copy peaks into a peaks file (speed of light)",
    "ingest": "read rocprofv3/rocpd/rocprof output made elsewhere into kernels/counters frames",
    "compare": "significance-tested A/B of two runs (verdict per graph)",
    "report": "HTML + Markdown report of a run, or of run B against run A",
    "merge": "combine shard runs into one run directory",
    "repro": "a failed or errored row as a bundle: graph, run.sh, environment, library-only script",
    "slurm": "run a suite over a Slurm job array, then merge",
    "db": "the results store: import run folders into a DuckDB file or PostgreSQL",
    "history": "series per graph over the store's runs, their step changes, and a dashboard",
}
