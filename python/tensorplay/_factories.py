"""Random-state API and calling conventions the generated operator bindings
cannot express (imported by tensorplay/__init__.py).

- ``tp.Generator`` / ``tp.default_generator`` / ``tp.manual_seed`` / ``tp.seed``
  / ``tp.initial_seed`` / ``tp.get_rng_state`` / ``tp.set_rng_state`` come from
  the C++ generator table (python/src/generator_bind.cpp).
- ``tp.einsum`` takes its operands either as a list or as separate arguments,
  as PyTorch does; the schema has one ``Tensor[]`` parameter.
"""
from . import _C
from ._C import (  # noqa: F401  (re-exported API)
    Generator,
    default_generator,
    manual_seed,
    seed,
    initial_seed,
    get_rng_state,
    set_rng_state,
)

__all__ = [
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "einsum",
]

_einsum = _C._op_functions["einsum"]


def einsum(equation, *operands):
    """einsum("ij,jk->ik", a, b) or einsum("ij,jk->ik", [a, b])."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return _einsum(equation, list(operands))
