"""The byte model of Section 1.1 / 13.2: count main-memory traffic operator by
operator, in elements, then multiply by the item size.

Every operator of eager execution reads its inputs from memory and writes its
output to memory; a fused compiled region reads the region's inputs and writes
its outputs once.  rho = b_e / b_c is the structural part of the speedup
(Proposition 13.3: S = rho * beta_c / beta_e).  Writes are counted once (write
allocate is deliberately not modelled: Section 13.1 says the model therefore
underestimates writes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List


@dataclass
class Access:
    op: str
    read: int  # elements read from memory
    write: int  # elements written to memory


@dataclass
class Traffic:
    """Memory traffic of one way of executing, as a list of per-operator accesses."""

    itemsize: int
    accesses: List[Access] = field(default_factory=list)

    def add(self, op: str, read: int, write: int) -> "Traffic":
        self.accesses.append(Access(op, int(read), int(write)))
        return self

    @property
    def elements(self) -> int:
        return sum(a.read + a.write for a in self.accesses)

    @property
    def bytes(self) -> int:
        return self.itemsize * self.elements

    def describe(self, n: int, rows: int) -> str:
        """'add(r 2N, w N) + ... + sum(r N, w R)': counts in units of N (elements of
        the input) and R (rows), for the report."""
        return " + ".join(f"{a.op}(r {_in_units(a.read, n, rows)}, w {_in_units(a.write, n, rows)})" for a in self.accesses)

    def to_dict(self) -> dict:
        return {
            "itemsize": self.itemsize,
            "bytes": self.bytes,
            "accesses": [{"op": a.op, "read": a.read, "write": a.write} for a in self.accesses],
        }


def _in_units(count: int, n: int, rows: int) -> str:
    """count as 'aN + bR' when it is such a combination, else the plain number."""
    for a in range(count // n if n else 0, -1, -1):
        rest = count - a * n
        if rows and rest % rows == 0:
            b = rest // rows
            terms = [t for t, k in ((f"{a}N" if a != 1 else "N", a), (f"{b}R" if b != 1 else "R", b)) if k]
            return " + ".join(terms) or "0"
    return str(count)
