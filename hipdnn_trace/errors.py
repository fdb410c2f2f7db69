"""Errors a user can act on.

Every failure a user can cause (bad file, bad flag, missing tool) is raised as a
:class:`UserError`; the CLI prints its one-line message and exits 1. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A one-line, actionable problem with the user's input or environment."""

    exit_code = 1

    def __str__(self) -> str:  # keep it one line whatever was passed in
        return " ".join(super().__str__().split())


class GraphError(UserError):
    """A graph file that cannot be loaded or fails a check.

    The message names the file, the JSON path inside it and the problem, e.g.
    ``conv.json: $.nodes[0].inputs.x_tensor_uid: uid 7 is not a tensor of the graph``.
    """

    def __init__(self, source: str, path: str, problem: str) -> None:
        self.source = source
        self.path = path
        self.problem = problem
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {problem}")


class UnsupportedError(UserError):
    """A backend cannot run a graph (unknown op, dtype or parameter)."""


class ToolMissingError(UserError):
    """An external tool (profiler, library) the user asked for is not installed."""


def describe(exc: BaseException) -> str:
    """One line for an error row or a status column: a user error's own message, anything
    else prefixed by its type (a bare ``KeyError: 'x'`` says nothing without it)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, UserError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ExecutionError(Exception):
    """A backend failed while running a graph it said it supports."""
