"""``python -m hipdnn_trace``."""

from hipdnn_trace.cli import main

raise SystemExit(main())
