"""What a refused policy file reports: every problem at once, each with its path and line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One problem in a policy file.

    `path` names the place in the file the way a person reads it (`teams[1].quota.h100.gpus`; empty
    for the whole file), `message` is a plain sentence, `line` the 1-based line in the YAML text
    when one is known.
    """

    path: str
    message: str
    line: int | None = None

    def format(self, source: str) -> str:
        """`file:line: path: message`, the shape compilers use, so editors can jump to it."""
        where = source if self.line is None else f"{source}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class PolicyError(ValueError):
    """A policy file was refused. `issues` holds every problem found, in file order."""

    def __init__(self, issues: Sequence[PolicyIssue], source: str = "commons.yaml") -> None:
        self.issues: tuple[PolicyIssue, ...] = tuple(issues)
        self.source = source
        count = len(self.issues)
        if not count:  # raised by callers with only a message (e.g. "no policy stored yet")
            super().__init__(source)
            return
        lines = "\n".join(issue.format(source) for issue in self.issues)
        super().__init__(f"{source}: {count} problem{'s' if count != 1 else ''} in the policy\n{lines}")
