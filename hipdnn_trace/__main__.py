"""``python -m hipdnn_trace``."""

from hipdnn_trace.cli import run_and_exit

run_and_exit()
