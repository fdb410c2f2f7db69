"""Run-vs-run statistics (verdict per graph) and the HTML/Markdown report.

``compare_runs(a, b)`` is the library entry point; ``hipdnn-trace compare`` and
``hipdnn-trace report`` are thin wrappers around it. docs/compare.md has the rule.
"""

import sys
import types
from typing import Any

from hipdnn_trace.compare.comparison import Comparison, TimingMismatchError, compare_runs
from hipdnn_trace.compare.verdict import FASTER, INCONCLUSIVE, SAME, SLOWER, VERDICTS


class _CallableModule(types.ModuleType):
    """Lets ``hipdnn_trace.compare(a, b)`` work whatever was imported first.

    Importing this subpackage binds the attribute ``hipdnn_trace.compare`` to the
    module, which would shadow the library function of the same name; calling the
    module therefore calls :func:`compare_runs`.
    """

    def __call__(self, run_a: Any, run_b: Any, **options: Any) -> Comparison:
        return compare_runs(run_a, run_b, **options)


sys.modules[__name__].__class__ = _CallableModule

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
