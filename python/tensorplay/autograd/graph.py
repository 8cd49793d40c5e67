"""Inspecting the backward graph: `t.grad_fn` is a Node with `.name()` and
`.next_functions` ((node or None, input_nr) per input)."""
from .. import _C

Node = _C._Node


def walk(fn):
    """Every node reachable from `fn` (a grad_fn), each once, parents first."""
    seen, order, stack = set(), [], [fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(child for child, _ in reversed(n.next_functions))
    return order
