"""tp.utils._pytree: nested Python containers as trees of leaves, the API of
torch.utils._pytree that training code and libraries use (tree_map over a
batch, tree_flatten of a state, registering a container class).

A tree is a leaf or a node. Nodes are the registered container types: tuple,
list, dict, OrderedDict, defaultdict, deque, namedtuples and whatever
register_pytree_node / register_dataclass adds. Everything else (tensors,
numbers, None, strings) is a leaf. Dicts keep insertion order, so a spec
records the keys and unflatten gives them back in that order.
"""
import collections
import dataclasses
from typing import Any, Callable, NamedTuple

__all__ = [
    "TreeSpec", "LeafSpec", "register_pytree_node", "register_dataclass", "tree_flatten", "tree_unflatten",
    "tree_leaves", "tree_structure", "tree_iter", "tree_is_leaf", "tree_map", "tree_map_", "tree_map_only",
    "tree_map_only_", "tree_all", "tree_any", "tree_all_only", "tree_any_only", "tree_flatten_with_path",
    "tree_leaves_with_path", "tree_map_with_path", "keystr", "key_get", "SequenceKey", "MappingKey", "GetAttrKey",
    "is_namedtuple", "is_namedtuple_instance",
]


class _Node(NamedTuple):
    flatten: Callable       # node -> (children, context)
    unflatten: Callable     # (children, context) -> node
    with_keys: Callable     # node -> ([(key, child)], context)


SUPPORTED_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Make instances of `cls` nodes: flatten_fn(node) -> (children, context),
    unflatten_fn(children, context) -> node. The context must compare equal
    for trees of the same structure (it is part of the spec)."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"register_pytree_node: {cls} is already registered as a pytree node")
    if flatten_with_keys_fn is None:
        def flatten_with_keys_fn(node):
            children, ctx = flatten_fn(node)
            return [(SequenceKey(i), c) for i, c in enumerate(children)], ctx
    SUPPORTED_NODES[cls] = _Node(flatten_fn, unflatten_fn, flatten_with_keys_fn)


def register_dataclass(cls, *, field_names=None, drop_field_names=None):
    """A dataclass as a node whose children are its fields (all of them, or
    `field_names`; `drop_field_names` are left out and must have defaults)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_dataclass: {cls.__name__} is not a dataclass")
    names = tuple(field_names if field_names is not None else
                  (f.name for f in dataclasses.fields(cls) if f.name not in (drop_field_names or ())))

    register_pytree_node(cls, lambda o: ([getattr(o, n) for n in names], names),
                         lambda children, ctx: cls(**dict(zip(ctx, children))),
                         flatten_with_keys_fn=lambda o: ([(GetAttrKey(n), getattr(o, n)) for n in names], names))


# ---- key paths ----
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, seq):
        return seq[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


def keystr(kp):
    """A key path as the Python expression that reaches the leaf: ['b'][0]."""
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    for k in kp:
        obj = k.get(obj)
    return obj


# ---- the built-in nodes ----
def is_namedtuple_class(cls):
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def is_namedtuple(obj):
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_instance(obj):
    return is_namedtuple_class(type(obj))


def _seq_keys(node):
    return [(SequenceKey(i), c) for i, c in enumerate(node)]


def _dict_keys(node):
    return [(MappingKey(k), v) for k, v in node.items()]


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c),
                     flatten_with_keys_fn=lambda t: (_seq_keys(t), None))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c),
                     flatten_with_keys_fn=lambda t: (_seq_keys(t), None))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())), lambda c, k: dict(zip(k, c)),
                     flatten_with_keys_fn=lambda d: (_dict_keys(d), list(d.keys())))
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, k: collections.OrderedDict(zip(k, c)),
                     flatten_with_keys_fn=lambda d: (_dict_keys(d), list(d.keys())))
register_pytree_node(collections.defaultdict, lambda d: (list(d.values()), (d.default_factory, list(d.keys()))),
                     lambda c, ctx: collections.defaultdict(ctx[0], zip(ctx[1], c)),
                     flatten_with_keys_fn=lambda d: (_dict_keys(d), (d.default_factory, list(d.keys()))))
register_pytree_node(collections.deque, lambda d: (list(d), d.maxlen),
                     lambda c, maxlen: collections.deque(c, maxlen=maxlen),
                     flatten_with_keys_fn=lambda d: (_seq_keys(d), d.maxlen))


def _namedtuple_node():
    return _Node(lambda t: (list(t), type(t)), lambda c, cls: cls(*c),
                 lambda t: ([(GetAttrKey(f), v) for f, v in zip(t._fields, t)], type(t)))


_NAMEDTUPLE = _namedtuple_node()


def _node_of(tree):
    cls = type(tree)
    node = SUPPORTED_NODES.get(cls)
    if node is None and is_namedtuple_class(cls):
        node = _NAMEDTUPLE
    return cls, node


def tree_is_leaf(tree, is_leaf=None):
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_of(tree)[1] is None


# ---- specs ----
class TreeSpec:
    """The structure of a tree: the node type, its context (dict keys, the
    namedtuple class, ...) and the children's specs. A leaf's spec is LeafSpec()."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)

    @property
    def num_children(self):
        return len(self.children_specs)

    def is_leaf(self):
        return False

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        if not isinstance(other, TreeSpec) or self.is_leaf() != other.is_leaf():
            return False
        if self.is_leaf():
            return True
        return (self.type is other.type and self.context == other.context
                and self.children_specs == other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(hash(c) for c in self.children_specs)))

    def __repr__(self):
        name = self.type.__name__ if self.type is not None else "None"
        ctx = self.context.__name__ if isinstance(self.context, type) else repr(self.context)
        return f"TreeSpec({name}, {ctx}, [{', '.join(repr(c) for c in self.children_specs)}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves, self.num_nodes = 1, 1

    def is_leaf(self):
        return True

    def __repr__(self):
        return "*"


_LEAF = LeafSpec()


def _flatten(tree, is_leaf, leaves, with_path, path):
    cls, node = _node_of(tree)
    if node is None or (is_leaf is not None and is_leaf(tree)):
        leaves.append((path, tree) if with_path else tree)
        return _LEAF
    if with_path:
        pairs, ctx = node.with_keys(tree)
        specs = [_flatten(c, is_leaf, leaves, True, path + (k,)) for k, c in pairs]
    else:
        children, ctx = node.flatten(tree)
        specs = [_flatten(c, is_leaf, leaves, False, path) for c in children]
    return TreeSpec(cls, ctx, specs)


def tree_flatten(tree, is_leaf=None):
    """(leaves, spec): the leaves left to right, and the structure that
    tree_unflatten(leaves, spec) rebuilds."""
    leaves = []
    spec = _flatten(tree, is_leaf, leaves, False, ())
    return leaves, spec


def tree_flatten_with_path(tree, is_leaf=None):
    """([(key path, leaf)], spec); keystr(path) spells the way to each leaf."""
    leaves = []
    spec = _flatten(tree, is_leaf, leaves, True, ())
    return leaves, spec


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten: expected a TreeSpec, got {type(treespec).__name__}")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"tree_unflatten: the spec has {treespec.num_leaves} leaves, got {len(leaves)}")
    it = iter(leaves)

    def build(spec):
        if spec.is_leaf():
            return next(it)
        children = [build(c) for c in spec.children_specs]
        node = _NAMEDTUPLE if is_namedtuple_class(spec.type) and spec.type not in SUPPORTED_NODES \
            else SUPPORTED_NODES[spec.type]
        return node.unflatten(children, spec.context)

    return build(treespec)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_leaves_with_path(tree, is_leaf=None):
    return tree_flatten_with_path(tree, is_leaf)[0]


def _flatten_up_to(spec, tree, is_leaf, where):
    """The subtrees of `tree` at the leaves of `spec` (tree must have spec's
    structure down to those leaves, which may be subtrees there)."""
    out = []

    def walk(s, t):
        if s.is_leaf():
            out.append(t)
            return
        cls, node = _node_of(t)
        if cls is not s.type:
            raise ValueError(f"{where}: node type mismatch; expected {s.type}, but got {cls}")
        children, ctx = node.flatten(t)
        if len(children) != s.num_children:
            raise ValueError(f"{where}: node arity mismatch; expected {s.num_children}, but got {len(children)}")
        if ctx != s.context:
            raise ValueError(f"{where}: node context mismatch; expected {s.context!r}, but got {ctx!r}")
        for cs, c in zip(s.children_specs, children):
            walk(cs, c)

    walk(spec, tree)
    return out


def tree_map(func, tree, *rests, is_leaf=None):
    """func applied leaf-wise; with more trees, to the matching leaves of each
    (they must have tree's structure, or be deeper where tree has a leaf)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf, "tree_map") for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func, tree, *rests, is_leaf=None):
    """func on every leaf for its side effect; returns tree itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf, "tree_map_") for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf, "tree_map_with_path") for r in rests]
    return tree_unflatten([func(p, x, *xs) for (p, x), *xs in zip(pairs, *others)], spec)


def _type_filter(type_or_types, func):
    def apply(x):
        return func(x) if isinstance(x, type_or_types) else x
    return apply


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """func on the leaves that are instances of type_or_types; other leaves kept."""
    return tree_map(_type_filter(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func, tree, is_leaf=None):
    return tree_map_(_type_filter(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_any(pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))
