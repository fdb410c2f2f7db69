"""dnn-providers' test names for its integration-test bundles and sweeps, so a row here and a GTest
there are found by the same string.

The harness names a test after the path below its data root, not after anything inside the files
(ROCm/rocm-libraries ``dnn-providers/integration-tests/docs/file-formats.md`` @ 6ed0dc19, "Discovery and
test names"): the suite is the bundle's or sweep's directory, its segments joined by ``_``; the test is
the graph file's stem or the sweep case's id; any character outside ``[A-Za-z0-9_]`` becomes ``_``
(``quick_BatchnormFwdInference_nchw_fp32_Small.Small``, ``quick_RMSNorm_Default.2_1_1_1_bfp16_nchw_fa8ec9``).
The data root is the folder holding the tier folders (``quick``, ``standard``, ``comprehensive``,
``full``), which is how it is found here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["TIERS", "sanitize", "suite_name"]

#: the tier folders every bundle lives under (file-formats.md; verify_golden_bundles.py ``ALLOWED_TIERS``)
TIERS = ("quick", "standard", "comprehensive", "full")

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def sanitize(text: str) -> str:
    """A GTest name segment: every character outside ``[A-Za-z0-9_]`` as ``_``."""
    return _NOT_NAME.sub("_", text)


def suite_name(folders: Sequence[str]) -> str | None:
    """The suite of a bundle or sweep in the folder ``folders`` (its path's segments, outermost first):
    the segments from the innermost tier folder on, joined by ``_``; None when no tier folder holds it."""
    tier = max((i for i, part in enumerate(folders) if part in TIERS), default=None)
    if tier is None:
        return None
    return sanitize("_".join(folders[tier:]))
