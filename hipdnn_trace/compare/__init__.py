"""Run-vs-run statistics (verdict per graph) and the HTML/Markdown report.

``compare_runs(a, b)`` is the library entry point; ``hipdnn-trace compare`` and
``hipdnn-trace report`` are thin wrappers around it. docs/compare.md has the rule.
"""

from hipdnn_trace.compare.comparison import Comparison, TimingMismatchError, compare_runs
from hipdnn_trace.compare.verdict import FASTER, INCONCLUSIVE, SAME, SLOWER, VERDICTS

__all__ = [
    "Comparison",
    "TimingMismatchError",
    "compare_runs",
    "FASTER",
    "SLOWER",
    "SAME",
    "INCONCLUSIVE",
    "VERDICTS",
]
