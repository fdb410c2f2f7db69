"""SHA-256 checksums of files reused as the truth (reference-cache entries, golden bundles).

A file the tool wrote and later takes as the expected answer can change under it: a bit flip
on disk, a copy cut short, someone's "quick fix" of a tensor, a write that ran out of space.
Its header (a ``.npy``'s dtype and shape, a ``.bin``'s length) may still look right, so only a
checksum of every byte tells. Manifests use ``sha256sum``'s text format (``<hex>  <name>`` per
line, names relative to the manifest's folder), so ``sha256sum -c`` checks them by hand too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from hipdnn_trace import read_gate

_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


def bytes_sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path, kind: read_gate.Kind) -> str:
    """A file's SHA-256, read through the read gate (a special file or one over budget is refused)."""
    with read_gate.open_file(path, kind) as fh:
        try:
            return hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as exc:
            raise read_gate.ReadRefused(str(path), f"cannot read: {exc.strerror or exc}") from None


def manifest_text(sums: Mapping[str, str]) -> str:
    """``sha256sum`` lines for ``{file name: hex digest}``."""
    for name in sums:
        if "\n" in name or "\r" in name or "/" in name:
            raise ValueError(f"{name!r}: a manifest names files of its own folder on one line each")
    return "".join(f"{digest}  {name}\n" for name, digest in sums.items())


def read_manifest(path: str | Path) -> dict[str, str]:
    """``{file name: hex digest}`` of a manifest; ReadRefused naming it and the line when malformed."""
    text = read_gate.read_text(path, read_gate.CHECKSUMS)
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line)
        if match is None or "/" in match.group(2):
            raise read_gate.ReadRefused(str(path), f"line {number}: not '<sha256>  <file name>'")
        out[match.group(2)] = match.group(1)
    return out
