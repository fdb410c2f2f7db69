"""``python -m hipdnn_trace``."""

import sys

try:   # Ctrl-C while the command line loads (its first milliseconds) is one line too
    from hipdnn_trace.cli import run_and_exit
except KeyboardInterrupt:
    sys.stderr.write("hipdnn-trace: interrupted by SIGINT\n")
    raise SystemExit(130) from None

run_and_exit()
