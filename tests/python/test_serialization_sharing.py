"""tp.save / tp.load keep storage sharing, offsets and strides as torch.save / torch.load do;
format 1 files still load."""
import io
import pickle

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn


def roundtrip(obj, lib=tp, **kw):
    buf = io.BytesIO()
    lib.save(obj, buf)
    buf.seek(0)
    return lib.load(buf, **kw)


def storage_key(t):
    if isinstance(t, torch.Tensor):
        return t.untyped_storage().data_ptr()
    return t.data_ptr() - t.storage_offset() * t.element_size()


def sharing_groups(d):
    """Which entries share a storage, as a set of frozensets of names."""
    groups = {}
    for k, v in d.items():
        groups.setdefault(storage_key(v), set()).add(k)
    return {frozenset(g) for g in groups.values()}


def make(lib):
    base = lib.arange(24, dtype=lib.float32).reshape(4, 6)
    other = lib.arange(5, dtype=lib.float64)
    p = lib.nn.Parameter(lib.ones(3, 4))
    return {
        "base": base, "row": base[2], "col": base[:, 3], "t": base.t(), "block": base[1:3, 2:5],
        "step": base[::2, 1::2], "expand": base[0:1].expand(3, 6), "flat_tail": base.reshape(-1)[7:],
        "other": other, "other_view": other[1:4], "p": p, "p_row": p[1], "alone": lib.zeros(2),
    }


@pytest.mark.parametrize("weights_only", [True, False])
def test_sharing_offsets_strides_match_torch(weights_only):
    a = roundtrip(make(tp), weights_only=weights_only)
    b = roundtrip(make(torch), lib=torch, weights_only=weights_only)
    assert sharing_groups(a) == sharing_groups(b)
    for k in b:
        assert tuple(a[k].shape) == tuple(b[k].shape), k
        assert a[k].stride() == b[k].stride(), k
        assert a[k].storage_offset() == b[k].storage_offset(), k
        assert a[k].requires_grad == b[k].requires_grad, k
        assert isinstance(a[k], nn.Parameter) == isinstance(b[k], torch.nn.Parameter), k
        np.testing.assert_array_equal(a[k].detach().numpy(), b[k].detach().numpy())


def test_write_through_one_is_seen_by_the_others():
    a = roundtrip(make(tp))
    with tp.no_grad():
        a["base"][2, 3] = -7.0
        a["p_row"].fill_(5.0)
    assert float(a["row"][3]) == -7.0 and float(a["col"][2]) == -7.0 and float(a["t"][3, 2]) == -7.0
    assert float(a["flat_tail"][15 - 7]) == -7.0
    assert a["p"][1].tolist() == [5.0] * 4 and a["p"][0].tolist() == [1.0] * 4
    assert a["alone"].tolist() == [0.0, 0.0]


def test_loaded_tensors_are_independent_leaves():
    p = nn.Parameter(tp.ones(4))
    a = roundtrip({"p": p, "v": p[1:3]})
    assert a["p"].is_leaf and a["v"].is_leaf and a["v"]._base is None
    (a["p"] * 2).sum().backward()
    assert a["p"].grad.tolist() == [2.0] * 4


def test_parameter_and_detached_alias_share():
    lin = nn.Linear(3, 2)
    a = roundtrip({"w": lin.weight, "alias": lin.weight.detach(), "sd": lin.state_dict()})
    assert storage_key(a["w"]) == storage_key(a["alias"]) == storage_key(a["sd"]["weight"])
    with tp.no_grad():
        a["alias"].zero_()
    assert a["w"].abs().sum().item() == 0 and isinstance(a["w"], nn.Parameter)


def test_tied_weights_stay_tied_in_a_state_dict():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.out = nn.Linear(3, 5, bias=False)
            self.out.weight = self.emb.weight

    sd = roundtrip(Tied().state_dict())
    assert storage_key(sd["emb.weight"]) == storage_key(sd["out.weight"])


def test_dtypes_and_views_of_narrow_types():
    for dt in (tp.bfloat16, tp.float16, tp.int8, tp.uint8, tp.bool, tp.int32):
        base = tp.arange(10).to(dt)
        a = roundtrip([base, base[3:7], base[::3]])
        assert storage_key(a[0]) == storage_key(a[1]) == storage_key(a[2])
        assert a[1].storage_offset() == 3 and a[2].stride() == (3,)
        assert a[1].tolist() == base[3:7].tolist() and a[2].tolist() == base[::3].tolist()


def test_views_under_other_dtype_are_saved_separately():
    x = tp.arange(4, dtype=tp.float32)
    v = x.view(tp.int32)
    a = roundtrip([x, v])
    assert a[0].tolist() == x.tolist() and a[1].tolist() == v.tolist()


def test_only_the_used_extent_of_a_storage_is_written():
    big = tp.zeros(100000)
    small = roundtrip(big[:10])
    buf = io.BytesIO()
    tp.save(big[:10], buf)
    assert len(buf.getvalue()) < 2000 and small.tolist() == [0.0] * 10


def _format1_bytes(obj):
    """A file as tensorplay wrote it before storage sharing (header version 1, per-tensor payloads)."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=4)
    p.dump(("tensorplay.save", 1))
    p.dump(obj)
    buf.seek(0)
    return buf


def test_format1_files_still_load():
    base = tp.arange(6.0).reshape(2, 3)
    p = nn.Parameter(tp.ones(2))
    old = tp.load(_format1_bytes({"b": base, "v": base[1], "p": p, "n": 3}))
    assert old["b"].tolist() == base.tolist() and old["v"].tolist() == base[1].tolist()
    assert isinstance(old["p"], nn.Parameter) and old["p"].requires_grad and old["n"] == 3


def test_newer_format_refused_and_damaged_table():
    buf = io.BytesIO()
    pickle.dump(("tensorplay.save", 99), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="newer"):
        tp.load(buf)
    from tensorplay import serialization
    for table in ({0: ("float32", b"\x00\x00")}, {0: ("float32", b"\x00" * 8)}, {0: "junk"}, {}):
        body = io.BytesIO()
        serialization._SharingPickler(body, 4).dump(tp.zeros(4))
        buf = io.BytesIO()
        p = pickle.Pickler(buf, protocol=4)
        p.dump(("tensorplay.save", 2))
        p.dump(table)
        buf.write(body.getvalue())
        buf.seek(0)
        with pytest.raises((RuntimeError, pickle.UnpicklingError), match="tp.load: .*damaged"):
            tp.load(buf)


class _Holder:
    def __init__(self, v):
        self.v = v

    def __reduce__(self):
        return (_Holder, (tp.full((3,), float(self.v) if not isinstance(self.v, tp.Tensor) else self.v[0].item()),))


def test_a_tensor_made_while_pickling_does_not_alias():
    """Tensors produced on the fly by __reduce__ are kept alive until the save ends, so a freed
    address cannot be reused by the next one and merge two unrelated storages."""
    loaded = roundtrip([_Holder(i) for i in range(20)], weights_only=False)
    assert [h.v.tolist() for h in loaded] == [[float(i)] * 3 for i in range(20)]
    assert len({storage_key(h.v) for h in loaded}) == 20


def test_pickle_and_deepcopy_still_copy():
    base = tp.arange(4.0)
    u = pickle.loads(pickle.dumps([base, base[1:]]))
    assert u[0].tolist() == [0.0, 1.0, 2.0, 3.0] and u[1].tolist() == [1.0, 2.0, 3.0]
