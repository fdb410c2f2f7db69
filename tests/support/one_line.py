"""Bad input gets one line on stderr, never a traceback: the check the CLI tests share."""

from __future__ import annotations

import pytest


def one_line_error(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """The captured stderr, checked to be one line without a traceback that holds every word."""
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err
