"""Output checks: element-wise comparison, never-written (poisoned) outputs, tolerances."""
