"""Printing the human-readable report: every figure comes with the code that
produced it, so a reader can re-run exactly that."""

from __future__ import annotations

import sys
import textwrap


class Report:
    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdout

    def _w(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def title(self, text: str) -> None:
        self._w()
        self._w(text)
        self._w("=" * len(text))

    def section(self, text: str) -> None:
        self._w()
        self._w(text)
        self._w("-" * len(text))

    def code(self, source: str) -> None:
        """The command context of the figures that follow."""
        for line in textwrap.dedent(source).strip("\n").splitlines():
            prompt = "..." if line[:1].isspace() or not line.strip() else ">>>"
            self._w(f"    {prompt} {line}".rstrip())

    def figure(self, label: str, value: str, note: str = "") -> None:
        line = f"  {label:<34} {value}"
        if note:
            line += f"   ({note})"
        self._w(line)

    def note(self, text: str) -> None:
        for line in textwrap.wrap(text, 96):
            self._w("  " + line)

    def error(self, where: str, exc: BaseException) -> None:
        self._w(f"  ERROR in {where}: {type(exc).__name__}: {exc}")


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else float("inf")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"
