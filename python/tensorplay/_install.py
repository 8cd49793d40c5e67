"""Putting Python-level functions on the tensorplay namespace and on Tensor,
without replacing what the binding (or an earlier module) already defines
there: the generated operator bindings stay authoritative."""


def add_missing(owner, functions, names=None):
    """setattr(owner, name, fn) for each function (named by `names`, else by its
    __name__) that `owner` does not have yet."""
    for i, fn in enumerate(functions):
        name = names[i] if names is not None else fn.__name__
        if not hasattr(owner, name):
            setattr(owner, name, fn)
