"""tp.utils._pytree against torch.utils._pytree on the trees training code
builds: batches as dicts/tuples/namedtuples, optimizer-like states, registered
classes and dataclasses."""
import collections
import dataclasses

import numpy as np
import pytest
import torch.utils._pytree as tpt

import tensorplay as tp
import tensorplay.utils._pytree as pt

Point = collections.namedtuple("Point", "x y")


def _trees():
    return [
        1, None, "s", (), [], {},
        [1, (2, 3), {"b": 4, "a": [5, None]}],
        {"z": Point(1, [2, 3]), "y": collections.OrderedDict([("q", 4), ("p", 5)])},
        collections.deque([1, 2, (3,)], maxlen=5),
        (Point(x=(1, 2), y={"k": 3}),),
    ]


@pytest.mark.parametrize("tree", _trees(), ids=range(len(_trees())))
def test_flatten_and_unflatten_match_torch(tree):
    leaves, spec = pt.tree_flatten(tree)
    t_leaves, t_spec = tpt.tree_flatten(tree)
    assert leaves == t_leaves
    assert spec.num_leaves == t_spec.num_leaves and spec.num_nodes == t_spec.num_nodes
    back = pt.tree_unflatten(leaves, spec)
    assert back == tree and type(back) is type(tree)
    assert [(pt.keystr(p), v) for p, v in pt.tree_leaves_with_path(tree)] == \
        [(tpt.keystr(p), v) for p, v in tpt.tree_leaves_with_path(tree)]
    for p, v in pt.tree_leaves_with_path(tree):
        assert pt.key_get(tree, p) == v


def test_tree_map_over_a_batch_of_tensors():
    batch = {"x": tp.ones(2, 3), "meta": ("id", tp.zeros(2)), "n": 3}
    doubled = pt.tree_map_only(tp.Tensor, lambda t: t * 2, batch)
    np.testing.assert_array_equal(doubled["x"].numpy(), np.full((2, 3), 2.0, np.float32))
    assert doubled["meta"][0] == "id" and doubled["n"] == 3
    summed = pt.tree_map(lambda a, b: a + b, (1, [2, 3]), (10, [20, 30]))
    assert summed == (11, [22, 33])
    assert pt.tree_all(lambda v: v > 0, summed) and pt.tree_any(lambda v: v == 33, summed)
    assert pt.tree_any_only(tp.Tensor, lambda t: bool((t == 0).all()), batch)
    seen = []
    assert pt.tree_map_(seen.append, summed) is summed and seen == [11, 22, 33]


def test_a_second_tree_must_have_the_structure_and_may_be_deeper_at_leaves():
    with pytest.raises(ValueError, match="node type mismatch"):
        pt.tree_map(lambda a, b: a, (1, [2]), (1, (2,)))
    with pytest.raises(ValueError, match="arity"):
        pt.tree_map(lambda a, b: a, [1, 2], [1])
    with pytest.raises(ValueError, match="context"):
        pt.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})
    assert pt.tree_map(lambda a, b: (a, b), [1], [[2, 3]]) == [(1, [2, 3])]
    with pytest.raises(ValueError, match="3 leaves"):
        pt.tree_unflatten([1, 2], pt.tree_structure((1, 2, 3)))


def test_specs_compare_by_structure_and_is_leaf_stops_descent():
    assert pt.tree_structure({"a": [1, 2]}) == pt.tree_structure({"a": [5, 6]})
    assert pt.tree_structure({"a": [1, 2]}) != pt.tree_structure({"b": [1, 2]})
    assert pt.tree_structure((1, 2)) != pt.tree_structure([1, 2])
    assert pt.tree_structure(5).is_leaf() and pt.tree_structure(5) == pt.LeafSpec()
    leaves = pt.tree_leaves([(1, 2), [3]], is_leaf=lambda t: isinstance(t, tuple))
    assert leaves == [(1, 2), 3]
    assert len({pt.tree_structure((1, [2])), pt.tree_structure((3, [4]))}) == 1


def test_registered_class_and_dataclass():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pt.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
    out = pt.tree_map(lambda v: v + 1, [Pair(1, (2, 3))])
    assert isinstance(out[0], Pair) and out[0].a == 2 and out[0].b == (3, 4)
    with pytest.raises(ValueError, match="already registered"):
        pt.register_pytree_node(Pair, lambda p: ([], None), lambda c, _: Pair(0, 0))

    @dataclasses.dataclass
    class State:
        step: int
        params: dict
        name: str = "s"

    pt.register_dataclass(State, drop_field_names=["name"])
    s = State(1, {"w": 2})
    leaves, spec = pt.tree_flatten_with_path(s)
    assert [pt.keystr(p) for p, _ in leaves] == [".step", ".params['w']"]
    assert pt.tree_unflatten([5, 6], spec) == State(5, {"w": 6})
    with pytest.raises(TypeError, match="not a dataclass"):
        pt.register_dataclass(Pair)


def test_defaultdict_keeps_its_factory():
    d = collections.defaultdict(list, {"a": 1})
    back = pt.tree_map(lambda v: v * 3, d)
    assert type(back) is collections.defaultdict and back.default_factory is list and back == {"a": 3}


def test_leaves_of_torch_style_optimizer_state_round_trip():
    model = tp.nn.Linear(3, 2)
    opt = tp.optim.Adam(model.parameters())
    model(tp.ones(1, 3)).sum().backward()
    opt.step()
    sd = opt.state_dict()
    leaves, spec = pt.tree_flatten(sd)
    assert sum(isinstance(v, tp.Tensor) for v in leaves) == 6  # step, exp_avg and exp_avg_sq of 2 params
    rebuilt = pt.tree_unflatten(leaves, spec)
    assert rebuilt.keys() == sd.keys() and rebuilt["param_groups"] == sd["param_groups"]
