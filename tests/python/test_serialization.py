"""tp.save / tp.load: every dtype, views, requires_grad, Parameters, nested containers, files and safety."""
import copy
import io
import pathlib
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    tp.save(obj, buf)
    buf.seek(0)
    return tp.load(buf, **load_kw)


def as_np(t):
    return t.detach().numpy()


FLOAT_VALUES = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e-3, 65504.0]


def _dtype(name):
    return getattr(tp, name)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_float_dtypes_roundtrip_bit_exact(name):
    t = tp.tensor(FLOAT_VALUES, dtype=tp.float64).to(_dtype(name)).reshape([3, 3])
    u = roundtrip(t)
    assert u.dtype == t.dtype and u.shape == (3, 3)
    a, b = as_np(t.to(tp.float64)), as_np(u.to(tp.float64))
    np.testing.assert_array_equal(a, b)  # NaN == NaN for assert_array_equal
    assert np.signbit(b[0, 1])  # -0.0 keeps its sign


@pytest.mark.parametrize("name,lo,hi", [("int8", -128, 127), ("int16", -32768, 32767),
                                        ("int32", -2 ** 31, 2 ** 31 - 1), ("int64", -2 ** 63, 2 ** 63 - 1),
                                        ("uint8", 0, 255)])
def test_integer_dtypes_roundtrip_extremes(name, lo, hi):
    values = [lo, lo + 1, -1 if lo < 0 else 1, 0, hi - 1, hi]
    t = tp.tensor(np.array(values, dtype=np.int64)).to(_dtype(name))
    u = roundtrip(t)
    assert u.dtype == t.dtype
    assert u.to(tp.int64).tolist() == values


def test_bool_roundtrip():
    t = tp.tensor([[True, False], [False, True]])
    u = roundtrip(t)
    assert u.dtype == tp.bool and u.tolist() == [[True, False], [False, True]]


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,), (4, 5, 6)])
def test_shapes_including_scalars_and_empty(shape):
    n = int(np.prod(shape)) if shape else 1
    t = tp.tensor(np.arange(n, dtype=np.float32).reshape(shape))
    u = roundtrip(t)
    assert u.shape == shape
    np.testing.assert_array_equal(as_np(u), as_np(t))


def test_views_saved_together_share_after_loading():
    # (Format 1 saved each view as its own contiguous data; format 2 keeps the sharing, as PyTorch:
    # test_serialization_sharing.py compares the details with torch.)
    base = tp.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    views = {"t": base.t(), "slice": base[1:3, ::2], "row": base[2], "expand": base[0:1].expand(3, 6)}
    loaded = roundtrip(views)
    for k, v in views.items():
        np.testing.assert_array_equal(as_np(loaded[k]), as_np(v))
        assert loaded[k].stride() == v.stride() and loaded[k].storage_offset() == v.storage_offset()
    with tp.no_grad():
        loaded["row"].fill_(-1)
    assert as_np(loaded["t"])[:, 2].tolist() == [-1.0] * 6
    assert as_np(loaded["slice"])[1].tolist() == [-1.0] * 3


def test_requires_grad_is_preserved_for_leaves():
    a = tp.ones(2, requires_grad=True)
    b = tp.ones(2)
    la, lb = roundtrip([a, b])
    assert la.requires_grad and la.is_leaf and not lb.requires_grad


def test_parameter_stays_a_parameter():
    p = nn.Parameter(tp.tensor([1.0, 2.0]))
    frozen = nn.Parameter(tp.tensor([3.0]), requires_grad=False)
    lp, lf = roundtrip((p, frozen))
    assert isinstance(lp, nn.Parameter) and lp.requires_grad
    assert isinstance(lf, nn.Parameter) and not lf.requires_grad
    np.testing.assert_array_equal(as_np(lp), [1.0, 2.0])


def test_nested_containers_and_plain_values():
    obj = {"a": [tp.ones(1), (tp.zeros(2), 3, "x")], "b": OrderedDict(k=tp.tensor([7])), "n": None,
           "f": 1.5, "s": {1, 2}, "dtype": tp.float64, "bytes": b"\x00\x01"}
    out = roundtrip(obj)
    assert isinstance(out["b"], OrderedDict) and out["b"]["k"].tolist() == [7]
    assert isinstance(out["a"][1], tuple) and out["a"][1][1:] == (3, "x")
    assert out["n"] is None and out["f"] == 1.5 and out["s"] == {1, 2} and out["bytes"] == b"\x00\x01"
    assert out["dtype"] == tp.float64


def test_path_pathlib_and_file_object(tmp_path):
    t = tp.tensor([1.0, 2.0, 3.0])
    p = tmp_path / "t.tp"
    tp.save(t, str(p))
    assert tp.load(str(p)).tolist() == [1.0, 2.0, 3.0]
    tp.save({"x": t}, p)
    assert tp.load(pathlib.Path(p))["x"].tolist() == [1.0, 2.0, 3.0]
    with open(p, "wb") as f:
        tp.save([t, t], f)
    with open(p, "rb") as f:
        a, b = tp.load(f)
    assert a.tolist() == b.tolist() == [1.0, 2.0, 3.0]


def test_several_objects_in_one_stream():
    buf = io.BytesIO()
    tp.save(tp.ones(1), buf)
    tp.save(tp.zeros(2), buf)
    buf.seek(0)
    assert tp.load(buf).tolist() == [1.0]
    assert tp.load(buf).tolist() == [0.0, 0.0]


def test_model_state_dict_roundtrip(tmp_path):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    path = tmp_path / "model.tp"
    tp.save(m.state_dict(), path)
    sd = tp.load(path)
    assert list(sd) == list(m.state_dict())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    fresh.load_state_dict(sd)
    for (k, v), (_, w) in zip(m.state_dict().items(), fresh.state_dict().items()):
        np.testing.assert_array_equal(as_np(v), as_np(w))
    assert sd["1.num_batches_tracked"].dtype == tp.int64


def test_optimizer_state_dict_roundtrip():
    p = nn.Parameter(tp.tensor([1.0, -2.0]))
    opt = optim.Adam([p], lr=0.1, amsgrad=True)
    (p * p).sum().backward()
    opt.step()
    sd = roundtrip(opt.state_dict())
    assert sd["param_groups"] == opt.state_dict()["param_groups"]
    for k, v in opt.state_dict()["state"][0].items():
        np.testing.assert_array_equal(as_np(sd["state"][0][k]), as_np(v))
    opt2 = optim.Adam([nn.Parameter(tp.tensor([1.0, -2.0]))], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["amsgrad"]


def test_weights_only_refuses_arbitrary_objects():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    buf = io.BytesIO()
    tp.save({"x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        tp.load(buf)


def test_weights_only_false_loads_arbitrary_picklable_objects():
    buf = io.BytesIO()
    tp.save({"frac": __import__("fractions").Fraction(1, 3)}, buf)
    buf.seek(0)
    assert str(tp.load(buf, weights_only=False)["frac"]) == "1/3"


def test_not_a_checkpoint():
    with pytest.raises(RuntimeError, match="not a tensorplay checkpoint"):
        tp.load(io.BytesIO(b"garbage bytes"))
    buf = io.BytesIO()
    pickle.dump({"a": 1}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="not a tensorplay checkpoint"):
        tp.load(buf)


def test_map_location_cpu_only():
    t = roundtrip(tp.ones(1), map_location="cpu")
    assert t.tolist() == [1.0]
    with pytest.raises(ValueError, match="cpu"):
        roundtrip(tp.ones(1), map_location="cuda:0")


def test_pickle_and_deepcopy_of_tensors_and_modules():
    t = tp.tensor([[1.0, 2.0]], requires_grad=True)
    u = pickle.loads(pickle.dumps(t))
    assert u.detach().tolist() == [[1.0, 2.0]] and u.requires_grad
    m = nn.Linear(2, 2)
    m2 = copy.deepcopy(m)
    assert m2.weight is not m.weight and isinstance(m2.weight, nn.Parameter)
    np.testing.assert_array_equal(as_np(m2.weight), as_np(m.weight))
    with tp.no_grad():
        m2.weight.fill_(0)
    assert np.abs(as_np(m.weight)).sum() > 0


def test_torch_state_dict_through_numpy_loads_into_same_architecture():
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    sd = OrderedDict((k, tp.tensor(v.numpy())) for k, v in tm.state_dict().items())
    loaded = roundtrip(sd)
    m = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    m.load_state_dict(loaded)
    np.testing.assert_array_equal(as_np(m[0].weight), tm[0].weight.detach().numpy())
