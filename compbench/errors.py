"""The root of every error compbench raises on purpose: one `except CompbenchError` catches them all.

A leaf module (it imports nothing from compbench), so any module can derive its errors from it
without an import cycle. Each error keeps its builtin base as a second parent (as Hypothesis does),
so `except ValueError` written before the root existed still catches a `SuiteError`.
"""

from __future__ import annotations

__all__ = ["CompbenchError"]


class CompbenchError(Exception):
    """An error compbench raises on purpose; the command line prints `message()` and exits with `exit_code`."""

    # 2 is the documented exit code for bad input (docs/reference/commands.md, "Exit codes").
    exit_code: int = 2
    # What to do about it, when the message alone does not say; shown after the message.
    hint: str | None = None

    def message(self) -> str:
        """The line the command line prints on stderr: `compbench: <what is wrong>[; <hint>]`."""
        text = f"compbench: {self}"
        return f"{text}; {self.hint}" if self.hint else text
