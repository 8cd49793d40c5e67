"""tensorplay.nn: Module machinery, layers, initializers and functional ops.

Oracles: PyTorch (same weights copied in through state_dict, which also checks
that the keys are PyTorch's) and NumPy where PyTorch is not needed.
"""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def torch213(torch):
    # tensorplay.nn follows torch 2.13's module signatures and reprs (norm layers
    # take bias= and print it); older torch builds (the GPU machine has 2.11)
    # can neither build these modules nor print them the same way.
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13):
        pytest.skip(f"needs torch >= 2.13 module API, found {torch.__version__}")
    return torch


def arr(t):
    return t.detach().numpy()


def tp_from(tt):
    return tp.tensor(tt.detach().numpy())


def copy_from_torch(tp_module, torch_module):
    """Loads the torch module's state dict into the tp module (strict: the keys must match)."""
    sd = OrderedDict((k, tp_from(v)) for k, v in torch_module.state_dict().items())
    result = tp_module.load_state_dict(sd)
    assert not result.missing_keys and not result.unexpected_keys
    return tp_module


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- Parameter
class TestParameter:
    def test_is_a_tensor_leaf_requiring_grad(self):
        data = tp.ones(2, 3)
        p = nn.Parameter(data)
        assert isinstance(p, nn.Parameter) and isinstance(p, tp.Tensor)
        assert p.requires_grad and p.is_leaf
        assert not data.requires_grad
        assert p.shape == (2, 3)

    def test_shares_storage_with_data(self):
        data = tp.zeros(3)
        p = nn.Parameter(data)
        with tp.no_grad():
            p.add_(2)
        close(arr(data), [2, 2, 2])

    def test_requires_grad_false_and_default_data(self):
        assert not nn.Parameter(tp.ones(1), requires_grad=False).requires_grad
        assert nn.Parameter().numel() == 0

    def test_repr(self):
        assert repr(nn.Parameter(tp.ones(2))).startswith("Parameter containing:\ntensor([1., 1.]")

    def test_non_tensor_data_raises(self):
        with pytest.raises(TypeError, match="Parameter"):
            nn.Parameter([1.0, 2.0])

    def test_gradient_flows(self):
        p = nn.Parameter(tp.tensor([1.0, 2.0]))
        (p * p).sum().backward()
        close(arr(p.grad), [2.0, 4.0])

    def test_operators_return_plain_tensors(self):
        p = nn.Parameter(tp.ones(2))
        assert type(p * 2) is tp.Tensor
        assert type(p.detach()) is tp.Tensor


# ---------------------------------------------------------------- Module machinery
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 2, bias=False)
        self.register_buffer("scale", tp.ones(2))
        self.register_buffer("cache", tp.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


class TestModuleRegistration:
    def test_setattr_routes_into_registries(self):
        m = Net()
        assert list(m._parameters) == []
        assert list(m._modules) == ["fc1", "act", "fc2"]
        assert list(m._buffers) == ["scale", "cache"]
        assert isinstance(m.fc1.weight, nn.Parameter)

    def test_named_parameters_order_and_names(self):
        names = [n for n, _ in Net().named_parameters()]
        assert names == ["fc1.weight", "fc1.bias", "fc2.weight"]

    def test_named_buffers_and_modules(self):
        m = Net()
        assert [n for n, _ in m.named_buffers()] == ["scale", "cache"]
        assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
        assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
        assert len(list(m.modules())) == 4
        assert len(list(m.parameters(recurse=False))) == 0

    def test_state_dict_excludes_non_persistent_buffers(self):
        # A module's own parameters and buffers come before its children's (PyTorch's order).
        assert list(Net().state_dict()) == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]

    def test_state_dict_values_are_detached_unless_keep_vars(self):
        m = Net()
        assert not m.state_dict()["fc1.weight"].requires_grad
        assert m.state_dict(keep_vars=True)["fc1.weight"].requires_grad

    def test_shared_parameter_is_deduplicated(self):
        m = nn.Module()
        m.a = nn.Linear(3, 3)
        m.b = nn.Linear(3, 3)
        m.b.weight = m.a.weight
        assert len(list(m.parameters())) == 3
        assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == ["a.weight", "a.bias", "b.weight", "b.bias"]
        assert "b.weight" in m.state_dict()

    def test_assigning_tensor_to_parameter_name_raises(self):
        m = nn.Linear(2, 2)
        with pytest.raises(TypeError, match="weight"):
            m.weight = tp.ones(2, 2)
        m.weight = None
        assert "weight" not in m.state_dict()

    def test_buffer_reassignment_and_type_check(self):
        m = Net()
        m.scale = tp.full([2], 3.0)
        close(arr(m.state_dict()["scale"]), [3, 3])
        with pytest.raises(TypeError, match="scale"):
            m.scale = 3

    def test_registration_before_init_raises(self):
        class Bad(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(tp.ones(1))

        with pytest.raises(AttributeError, match="before Module.__init__"):
            Bad()

    def test_bad_names(self):
        m = nn.Module()
        with pytest.raises(KeyError, match=r"\."):
            m.register_buffer("a.b", tp.ones(1))
        with pytest.raises(KeyError, match="empty"):
            m.register_parameter("", None)
        m.x = 1
        with pytest.raises(KeyError, match="already exists"):
            m.register_buffer("x", tp.ones(1))
        with pytest.raises(TypeError):
            m.add_module("c", 3)

    def test_getattr_error_message(self):
        with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
            Net().nope

    def test_delattr(self):
        m = Net()
        del m.fc2
        del m.scale
        assert "fc2" not in dict(m.named_children())
        assert list(m.state_dict()) == ["fc1.weight", "fc1.bias"]

    def test_get_submodule_and_parameter(self):
        m = nn.Sequential(Net())
        assert m.get_submodule("0.fc1") is m[0].fc1
        assert m.get_parameter("0.fc1.bias") is m[0].fc1.bias
        assert m.get_buffer("0.scale") is m[0].scale
        with pytest.raises(AttributeError):
            m.get_submodule("0.nope")


class TestModuleModes:
    def test_train_eval_propagate(self):
        m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout()))
        assert m.training and m[1][0].training
        assert m.eval() is m
        assert not any(x.training for x in m.modules())
        m.train()
        assert all(x.training for x in m.modules())
        with pytest.raises(ValueError):
            m.train("yes")

    def test_zero_grad(self):
        m = nn.Linear(3, 2)
        m(tp.ones(4, 3)).sum().backward()
        assert m.weight.grad is not None
        m.zero_grad(set_to_none=False)
        close(arr(m.weight.grad), np.zeros((2, 3)))
        m.zero_grad()
        assert m.weight.grad is None and m.bias.grad is None

    def test_requires_grad_(self):
        m = Net().requires_grad_(False)
        assert not any(p.requires_grad for p in m.parameters())

    def test_apply_visits_children_first(self):
        seen = []
        m = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
        m.apply(lambda mod: seen.append(type(mod).__name__))
        assert seen == ["Linear", "ReLU", "Sequential"]

    def test_apply_can_initialize(self):
        m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))

        def init_fn(mod):
            if isinstance(mod, nn.Linear):
                nn.init.constant_(mod.weight, 0.5)

        m.apply(init_fn)
        close(arr(m[1].weight), np.full((3, 3), 0.5))

    def test_forward_hooks(self):
        m = nn.Identity()
        h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        h2 = m.register_forward_hook(lambda mod, args, out: out + 1)
        close(arr(m(tp.ones(2))), [3, 3])
        h1.remove()
        h2.remove()
        close(arr(m(tp.ones(2))), [1, 1])

    def test_missing_forward(self):
        with pytest.raises(NotImplementedError, match="forward"):
            nn.Module()(tp.ones(1))

    def test_to_double_converts_parameters_and_buffers(self):
        m = Net().double()
        assert all(p.dtype == tp.float64 for p in m.parameters())
        assert m.scale.dtype == tp.float64
        assert isinstance(m.fc1.weight, nn.Parameter)


class TestStateDict:
    def test_load_copies_values_in_place(self):
        src, dst = Net(), Net()
        w_before = dst.fc1.weight
        dst.load_state_dict(src.state_dict())
        assert dst.fc1.weight is w_before
        close(arr(dst.fc1.weight), arr(src.fc1.weight))

    def test_strict_reports_missing_and_unexpected(self):
        sd = Net().state_dict()
        del sd["fc1.bias"]
        sd["extra"] = tp.ones(1)
        with pytest.raises(RuntimeError) as e:
            Net().load_state_dict(sd)
        msg = str(e.value)
        assert 'Missing key(s) in state_dict: "fc1.bias"' in msg
        assert 'Unexpected key(s) in state_dict: "extra"' in msg
        result = Net().load_state_dict(sd, strict=False)
        assert result.missing_keys == ["fc1.bias"] and result.unexpected_keys == ["extra"]

    def test_size_mismatch(self):
        sd = Net().state_dict()
        sd["fc2.weight"] = tp.ones(3, 8)
        with pytest.raises(RuntimeError, match=r"size mismatch for fc2.weight: copying a param with shape \(3, 8\)"):
            Net().load_state_dict(sd)

    def test_all_keys_matched_repr(self):
        assert repr(Net().load_state_dict(Net().state_dict())) == "<All keys matched successfully>"

    def test_assign_replaces_parameters(self):
        m = nn.Linear(2, 2)
        sd = {"weight": tp.ones(2, 2), "bias": tp.zeros(2)}
        m.load_state_dict(sd, assign=True)
        assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
        close(arr(m.weight), np.ones((2, 2)))

    @pytest.mark.parametrize("name", ["mlp", "convnet", "mha", "mha_kdim", "mha_bias_kv", "transformerish",
                                      "containers", "norms", "losses"])
    def test_keys_and_shapes_match_pytorch(self, torch213, name):
        torch = torch213
        tpm, tm = _architectures(torch)[name]
        tsd = tm.state_dict()
        sd = tpm.state_dict()
        assert list(sd) == list(tsd)
        for k in sd:
            assert tuple(sd[k].shape) == tuple(tsd[k].shape), k
        copy_from_torch(tpm, tm)
        for k, v in tpm.state_dict().items():
            close(arr(v), tsd[k].numpy())


def _architectures(torch):
    tnn = torch.nn

    def pair(build):
        return build(nn), build(tnn)

    def mlp(m):
        return m.Sequential(m.Linear(4, 8), m.GELU(), m.Dropout(0.1), m.Linear(8, 3))

    def convnet(m):
        return m.Sequential(m.Conv2d(3, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                            m.Conv2d(4, 4, 3, groups=2, bias=False), m.AdaptiveAvgPool2d(1), m.Flatten(),
                            m.Linear(4, 2), m.BatchNorm1d(2), m.Conv1d(1, 2, 3))

    def mha(m):
        return m.MultiheadAttention(8, 2, batch_first=True)

    def mha_kdim(m):
        return m.MultiheadAttention(8, 4, kdim=6, vdim=5, bias=False)

    def mha_bias_kv(m):
        return m.MultiheadAttention(8, 2, add_bias_kv=True)

    def transformerish(m):
        class Block(m.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = m.LayerNorm(8)
                self.attn = m.MultiheadAttention(8, 2, batch_first=True)
                self.ln2 = m.LayerNorm(8, bias=False)
                self.mlp = m.Sequential(m.Linear(8, 16), m.SiLU(), m.Linear(16, 8))
                self.emb = m.Embedding(10, 8, padding_idx=0)
        return Block()

    def containers(m):
        d = m.ModuleDict({"a": m.Linear(2, 2), "b": m.ModuleList([m.Linear(2, 3), m.ReLU(), m.Linear(3, 1)])})
        return m.Sequential(OrderedDict([("first", d), ("second", m.Identity())]))

    def norms(m):
        return m.ModuleList([m.LayerNorm([3, 4]), m.RMSNorm(4), m.RMSNorm(4, elementwise_affine=False),
                             m.BatchNorm2d(3, bias=False),
                             m.BatchNorm1d(3, affine=False), m.BatchNorm2d(2, track_running_stats=False),
                             m.LayerNorm(4, elementwise_affine=False)])

    def losses(m):
        return m.ModuleList([m.CrossEntropyLoss(weight=_w(m, 3)), m.NLLLoss(), m.BCEWithLogitsLoss(pos_weight=_w(m, 3)),
                             m.MSELoss()])

    def _w(m, n):
        return (tp.ones(n) if m is nn else torch.ones(n)) * 0.5

    builders = dict(mlp=mlp, convnet=convnet, mha=mha, mha_kdim=mha_kdim, mha_bias_kv=mha_bias_kv,
                    transformerish=transformerish, containers=containers, norms=norms, losses=losses)
    return {k: pair(b) for k, b in builders.items()}


# ---------------------------------------------------------------- reprs
@pytest.mark.parametrize("build", [
    lambda m: m.Linear(3, 4),
    lambda m: m.Linear(3, 4, bias=False),
    lambda m: m.Conv2d(3, 8, 3, stride=2, padding=1),
    lambda m: m.Conv2d(4, 8, (3, 5), dilation=2, groups=2, bias=False),
    lambda m: m.Conv1d(2, 4, 5, padding="same"),
    lambda m: m.LayerNorm(8),
    lambda m: m.RMSNorm([2, 3], eps=1e-6),
    lambda m: m.BatchNorm2d(4, momentum=None),
    lambda m: m.BatchNorm1d(4, affine=False),
    lambda m: m.Embedding(10, 3, padding_idx=0),
    lambda m: m.Dropout(0.2),
    lambda m: m.Flatten(),
    lambda m: m.ReLU(inplace=True),
    lambda m: m.GELU(approximate="tanh"),
    lambda m: m.Softplus(beta=2.0),
    lambda m: m.ELU(alpha=0.5),
    lambda m: m.LeakyReLU(0.2, inplace=True),
    lambda m: m.Hardtanh(-2.0, 2.0),
    lambda m: m.Softmax(dim=-1),
    lambda m: m.LogSoftmax(dim=1),
    lambda m: m.MaxPool2d(2),
    lambda m: m.Sequential(m.Linear(2, 3), m.Sequential(m.Tanh(), m.Sigmoid()), m.Identity()),
    lambda m: m.ModuleList([m.Linear(2, 2) for _ in range(3)] + [m.ReLU()]),
    lambda m: m.ModuleDict({"x": m.SiLU(), "y": m.Mish()}),
    lambda m: m.MultiheadAttention(8, 2),
    lambda m: m.CrossEntropyLoss(),
])
def test_repr_matches_pytorch(torch213, build):
    torch = torch213
    assert repr(build(nn)) == repr(build(torch.nn))


# ---------------------------------------------------------------- containers
class TestContainers:
    def test_sequential_indexing(self):
        a, b, c = nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 1)
        s = nn.Sequential(a, b, c)
        assert len(s) == 3 and s[0] is a and s[-1] is c
        assert list(s) == [a, b, c]
        sub = s[1:]
        assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
        s.append(nn.Tanh())
        assert len(s) == 4
        del s[1]
        assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
        s[0] = nn.Identity()
        assert isinstance(s[0], nn.Identity)
        with pytest.raises(IndexError):
            s[10]

    def test_sequential_ordered_dict_names(self):
        s = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
        assert list(s.state_dict()) == ["enc.weight", "enc.bias"]
        assert s.enc is s[0]

    def test_sequential_forward(self):
        s = nn.Sequential(nn.Identity(), nn.ReLU())
        close(arr(s(tp.tensor([-1.0, 2.0]))), [0.0, 2.0])

    def test_module_list(self):
        ml = nn.ModuleList([nn.Linear(1, 1)])
        ml.append(nn.ReLU())
        ml.extend([nn.Tanh()])
        ml.insert(0, nn.Identity())
        assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "ReLU", "Tanh"]
        assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"]
        assert len(ml[1:]) == 3
        del ml[0]
        assert type(ml[0]).__name__ == "Linear"
        assert len(list(ml.parameters())) == 2

    def test_module_dict(self):
        md = nn.ModuleDict({"a": nn.Linear(1, 1)})
        md["b"] = nn.ReLU()
        assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
        assert md.pop("a") is not None
        assert list(md) == ["b"]


# ---------------------------------------------------------------- layers vs PyTorch
def _fwd(tpm, tm, torch, *inputs, rtol=1e-5, atol=1e-5):
    outs_tp = tpm(*[tp.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs])
    outs_t = tm(*[torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in inputs])
    close(arr(outs_tp), outs_t.detach().numpy(), rtol, atol)
    return outs_tp, outs_t


class TestLayersVsTorch:
    def test_linear_forward_and_grads(self, torch):
        tm = torch.nn.Linear(5, 3)
        m = copy_from_torch(nn.Linear(5, 3), tm)
        x = rand(4, 5)
        out, tout = _fwd(m, tm, torch, x)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        close(arr(m.weight.grad), tm.weight.grad.numpy(), 1e-4, 1e-4)
        close(arr(m.bias.grad), tm.bias.grad.numpy(), 1e-4, 1e-4)

    def test_linear_batched_and_no_bias(self, torch):
        tm = torch.nn.Linear(5, 3, bias=False)
        m = copy_from_torch(nn.Linear(5, 3, bias=False), tm)
        _fwd(m, tm, torch, rand(2, 3, 5))

    @pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2),
                                    dict(groups=2), dict(padding="same"), dict(padding="valid", bias=False)])
    def test_conv1d(self, torch, kw):
        tm = torch.nn.Conv1d(4, 6, 3, **kw)
        m = copy_from_torch(nn.Conv1d(4, 6, 3, **kw), tm)
        _fwd(m, tm, torch, rand(2, 4, 11), rtol=1e-4, atol=1e-4)

    @pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(stride=(1, 2), padding=(0, 1)),
                                    dict(dilation=2), dict(groups=2), dict(padding="same", kernel_size=4)])
    def test_conv2d(self, torch, kw):
        kw = dict(kw)
        k = kw.pop("kernel_size", 3)
        tm = torch.nn.Conv2d(4, 6, k, **kw)
        m = copy_from_torch(nn.Conv2d(4, 6, k, **kw), tm)
        _fwd(m, tm, torch, rand(2, 4, 9, 8), rtol=1e-4, atol=1e-4)

    def test_conv2d_grads(self, torch):
        tm = torch.nn.Conv2d(2, 3, 3, padding=1)
        m = copy_from_torch(nn.Conv2d(2, 3, 3, padding=1), tm)
        out, tout = _fwd(m, tm, torch, rand(2, 2, 5, 5), rtol=1e-4, atol=1e-4)
        out.sum().backward()
        tout.sum().backward()
        close(arr(m.weight.grad), tm.weight.grad.numpy(), 1e-4, 1e-4)

    @pytest.mark.parametrize("shape,norm", [((4, 6), 6), ((2, 3, 4), (3, 4))])
    def test_layer_norm(self, torch, shape, norm):
        tm = torch.nn.LayerNorm(norm)
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            tm.bias.uniform_(-0.5, 0.5)
        m = copy_from_torch(nn.LayerNorm(norm), tm)
        out, tout = _fwd(m, tm, torch, rand(*shape))
        out.sum().backward()
        (tout.sum()).backward()
        close(arr(m.weight.grad), tm.weight.grad.numpy(), 1e-4, 1e-4)

    def test_rms_norm(self, torch):
        tm = torch.nn.RMSNorm(6, eps=1e-6)
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
        m = copy_from_torch(nn.RMSNorm(6, eps=1e-6), tm)
        _fwd(m, tm, torch, rand(3, 6))
        tm2, m2 = torch.nn.RMSNorm(6, elementwise_affine=False), nn.RMSNorm(6, elementwise_affine=False)
        _fwd(m2, tm2, torch, rand(3, 6))

    @pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)),
                                           ("BatchNorm2d", (4, 3, 2, 2))])
    @pytest.mark.parametrize("momentum", [0.1, None])
    def test_batch_norm_train_then_eval(self, torch, cls, shape, momentum):
        tm = getattr(torch.nn, cls)(3, momentum=momentum)
        m = getattr(nn, cls)(3, momentum=momentum)
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            tm.bias.uniform_(-0.5, 0.5)
        copy_from_torch(m, tm)
        for seed in range(3):
            _fwd(m, tm, torch, rand(*shape, seed=seed) * 2 + 1, rtol=1e-4, atol=1e-4)
        for k, v in tm.state_dict().items():
            close(arr(m.state_dict()[k]), v.numpy(), 1e-5, 1e-5)
        assert m.num_batches_tracked.item() == 3
        m.eval()
        tm.eval()
        _fwd(m, tm, torch, rand(*shape, seed=7), rtol=1e-4, atol=1e-4)
        assert m.num_batches_tracked.item() == 3

    def test_batch_norm_without_running_stats(self, torch):
        tm = torch.nn.BatchNorm2d(2, track_running_stats=False)
        m = nn.BatchNorm2d(2, track_running_stats=False)
        m.eval()
        tm.eval()
        _fwd(m, tm, torch, rand(3, 2, 2, 2), rtol=1e-4, atol=1e-4)

    def test_batch_norm_input_checks(self):
        with pytest.raises(ValueError, match="expected 4D input"):
            nn.BatchNorm2d(3)(tp.ones(2, 3))
        with pytest.raises(ValueError, match="more than 1 value per channel"):
            nn.BatchNorm1d(3)(tp.ones(1, 3))

    def test_embedding_padding_idx(self, torch):
        tm = torch.nn.Embedding(10, 4, padding_idx=2)
        m = nn.Embedding(10, 4, padding_idx=2)
        close(arr(m.weight)[2], np.zeros(4))
        copy_from_torch(m, tm)
        idx = np.array([[1, 2, 3], [2, 9, 0]], dtype=np.int64)
        out, tout = _fwd(m, tm, torch, idx)
        out.sum().backward()
        tout.sum().backward()
        close(arr(m.weight.grad), tm.weight.grad.numpy())
        close(arr(m.weight.grad)[2], np.zeros(4))

    def test_embedding_negative_padding_idx_and_pretrained(self):
        assert nn.Embedding(5, 2, padding_idx=-1).padding_idx == 4
        w = tp.tensor(rand(3, 2))
        e = nn.Embedding.from_pretrained(w)
        assert not e.weight.requires_grad
        close(arr(e(tp.tensor([2, 0]))), arr(w)[[2, 0]])

    @pytest.mark.parametrize("name,kw", [
        ("ReLU", {}), ("ReLU6", {}), ("GELU", {}), ("GELU", dict(approximate="tanh")), ("SiLU", {}), ("Mish", {}),
        ("Softplus", {}), ("Softplus", dict(beta=2.0, threshold=1.0)), ("ELU", {}), ("ELU", dict(alpha=0.3)),
        ("LeakyReLU", {}), ("LeakyReLU", dict(negative_slope=0.2)), ("Hardtanh", {}),
        ("Hardtanh", dict(min_val=-0.5, max_val=2.0)), ("Tanh", {}), ("Sigmoid", {}), ("LogSigmoid", {}),
        ("Softmax", dict(dim=1)), ("LogSoftmax", dict(dim=-1)), ("Softmax", dict(dim=0)),
    ])
    def test_activations(self, torch, name, kw):
        x = rand(4, 5) * 3
        tm, m = getattr(torch.nn, name)(**kw), getattr(nn, name)(**kw)
        xt = torch.from_numpy(x).requires_grad_()
        xp = tp.tensor(x, requires_grad=True)
        out, tout = m(xp), tm(xt)
        close(arr(out), tout.detach().numpy())
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        close(arr(xp.grad), xt.grad.numpy(), 1e-4, 1e-4)

    def test_inplace_activation_writes_input(self):
        x = tp.tensor([-1.0, 2.0])
        y = nn.ReLU(inplace=True)(x)
        close(arr(x), [0.0, 2.0])
        close(arr(y), [0.0, 2.0])

    def test_flatten_unflatten(self, torch):
        x = rand(2, 3, 4, 5)
        for kw in [dict(), dict(start_dim=0), dict(start_dim=1, end_dim=2), dict(start_dim=-2)]:
            _fwd(nn.Flatten(**kw), torch.nn.Flatten(**kw), torch, x)
        y = nn.Unflatten(1, (3, 4))(tp.tensor(rand(2, 12, 5)))
        assert y.shape == (2, 3, 4, 5)

    def test_dropout_eval_is_identity_and_train_scales(self):
        x = tp.ones(2000)
        d = nn.Dropout(0.25)
        d.eval()
        close(arr(d(x)), np.ones(2000))
        d.train()
        y = arr(d(x))
        kept = y != 0
        assert 0.65 < kept.mean() < 0.85
        close(y[kept], np.full(kept.sum(), 1 / 0.75), 1e-6, 1e-6)
        close(arr(nn.Dropout(0.0)(x)), np.ones(2000))

    def test_dropout_bad_p(self):
        with pytest.raises(ValueError, match="between 0 and 1"):
            nn.Dropout(1.5)
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(tp.ones(2), -0.1)

    @pytest.mark.parametrize("name,args,kw", [
        ("MaxPool2d", (2,), {}), ("MaxPool2d", (3,), dict(stride=2, padding=1)),
        ("MaxPool2d", (2,), dict(ceil_mode=True)), ("MaxPool2d", (2,), dict(dilation=2)),
        ("AvgPool2d", (2,), {}), ("AvgPool2d", (3,), dict(stride=2, padding=1)),
        ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
        ("AvgPool2d", (2,), dict(ceil_mode=True)),
        ("AdaptiveAvgPool2d", (1,), {}), ("AdaptiveAvgPool2d", ((3, 2),), {}), ("AdaptiveAvgPool2d", ((None, 2),), {}),
    ])
    def test_pooling(self, torch, name, args, kw):
        _fwd(getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw), torch, rand(2, 3, 7, 6))

    @pytest.mark.parametrize("name,kw,target", [
        ("MSELoss", {}, "float"), ("MSELoss", dict(reduction="sum"), "float"), ("MSELoss", dict(reduction="none"), "float"),
        ("L1Loss", {}, "float"),
        ("CrossEntropyLoss", {}, "class"), ("CrossEntropyLoss", dict(label_smoothing=0.1), "class"),
        ("CrossEntropyLoss", dict(ignore_index=1), "class"), ("CrossEntropyLoss", dict(reduction="none"), "class"),
        ("CrossEntropyLoss", dict(weight=True), "class"), ("CrossEntropyLoss", {}, "probs"),
        ("NLLLoss", {}, "class"), ("NLLLoss", dict(weight=True, reduction="sum"), "class"),
        ("BCELoss", {}, "binary"), ("BCELoss", dict(weight=True), "binary"),
        ("BCEWithLogitsLoss", {}, "binary"), ("BCEWithLogitsLoss", dict(pos_weight=True), "binary"),
    ])
    def test_losses(self, torch, name, kw, target):
        rng = np.random.default_rng(1)
        x = rand(6, 4) * 2
        if target == "class":
            y = rng.integers(0, 4, size=6).astype(np.int64)
        elif target == "probs":
            y = np.abs(rand(6, 4, seed=2))
            y = (y / y.sum(1, keepdims=True)).astype(np.float32)
        elif target == "binary":
            y = rng.integers(0, 2, size=(6, 4)).astype(np.float32)
        else:
            y = rand(6, 4, seed=3)
        if name == "BCELoss":
            x = 1 / (1 + np.exp(-x))
        if name == "NLLLoss":
            x = x - np.log(np.exp(x).sum(1, keepdims=True))
        tkw, pkw = dict(kw), dict(kw)
        for key in ("weight", "pos_weight"):
            if kw.get(key):
                w = np.linspace(0.5, 1.5, 4).astype(np.float32)
                tkw[key], pkw[key] = torch.from_numpy(w), tp.tensor(w)
        xp, xt = tp.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
        out = getattr(nn, name)(**pkw)(xp, tp.tensor(y))
        tout = getattr(torch.nn, name)(**tkw)(xt, torch.from_numpy(y))
        close(arr(out), tout.detach().numpy(), 1e-5, 1e-5)
        out.sum().backward()
        tout.sum().backward()
        close(arr(xp.grad), xt.grad.numpy(), 1e-4, 1e-5)

    def test_loss_legacy_flags(self):
        with pytest.warns(UserWarning):
            assert nn.MSELoss(size_average=False).reduction == "sum"
        with pytest.warns(UserWarning):
            assert nn.MSELoss(reduce=False).reduction == "none"
        with pytest.raises(ValueError, match="reduction"):
            F.mse_loss(tp.ones(2), tp.ones(2), reduction="avg")


# ---------------------------------------------------------------- MultiheadAttention
class TestMultiheadAttention:
    @pytest.mark.parametrize("kw", [dict(), dict(batch_first=True), dict(bias=False), dict(kdim=6, vdim=5),
                                    dict(add_bias_kv=True), dict(add_zero_attn=True),
                                    dict(add_bias_kv=True, add_zero_attn=True, batch_first=True)])
    @pytest.mark.parametrize("average", [True, False])
    def test_forward_matches_torch(self, torch, kw, average):
        E, H, L, S, N = 8, 2, 5, 7, 3
        tm = torch.nn.MultiheadAttention(E, H, **kw)
        m = copy_from_torch(nn.MultiheadAttention(E, H, **kw), tm)
        kd, vd = kw.get("kdim", E), kw.get("vdim", E)
        if kw.get("batch_first"):
            q, k, v = rand(N, L, E, seed=1), rand(N, S, kd, seed=2), rand(N, S, vd, seed=3)
        else:
            q, k, v = rand(L, N, E, seed=1), rand(S, N, kd, seed=2), rand(S, N, vd, seed=3)
        out, w = m(tp.tensor(q), tp.tensor(k), tp.tensor(v), average_attn_weights=average)
        tout, tw = tm(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), average_attn_weights=average)
        close(arr(out), tout.detach().numpy(), 1e-4, 1e-5)
        close(arr(w), tw.detach().numpy(), 1e-4, 1e-5)

    @pytest.mark.parametrize("mask_kind", ["bool", "float", "batched"])
    def test_masks(self, torch, mask_kind):
        E, H, L, S, N = 8, 2, 4, 6, 2
        tm = torch.nn.MultiheadAttention(E, H, batch_first=True)
        m = copy_from_torch(nn.MultiheadAttention(E, H, batch_first=True), tm)
        q, k = rand(N, L, E, seed=1), rand(N, S, E, seed=2)
        rng = np.random.default_rng(5)
        if mask_kind == "bool":
            am = rng.random((L, S)) < 0.3
            am[:, 0] = False
        elif mask_kind == "float":
            am = (rng.standard_normal((L, S))).astype(np.float32)
        else:
            am = rng.random((N * H, L, S)) < 0.3
            am[..., 0] = False
        kpm = np.zeros((N, S), dtype=bool)
        kpm[0, -2:] = True
        out, w = m(tp.tensor(q), tp.tensor(k), tp.tensor(k), attn_mask=tp.tensor(am), key_padding_mask=tp.tensor(kpm))
        tout, tw = tm(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(k), attn_mask=torch.from_numpy(am),
                      key_padding_mask=torch.from_numpy(kpm))
        close(arr(out), tout.detach().numpy(), 1e-4, 1e-5)
        close(arr(w), tw.detach().numpy(), 1e-4, 1e-5)

    def test_need_weights_false_and_unbatched(self, torch):
        tm = torch.nn.MultiheadAttention(8, 4)
        m = copy_from_torch(nn.MultiheadAttention(8, 4), tm)
        x = rand(5, 8)
        out, w = m(tp.tensor(x), tp.tensor(x), tp.tensor(x), need_weights=False)
        assert w is None
        tout, _ = tm(*(torch.from_numpy(x),) * 3, need_weights=False)
        close(arr(out), tout.detach().numpy(), 1e-4, 1e-5)

    def test_gradients_match_torch(self, torch):
        tm = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        m = copy_from_torch(nn.MultiheadAttention(8, 2, batch_first=True), tm)
        x = rand(2, 5, 8)
        out, _ = m(tp.tensor(x), tp.tensor(x), tp.tensor(x))
        tout, _ = tm(*(torch.from_numpy(x),) * 3)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        grads = dict(m.named_parameters())
        for name, p in tm.named_parameters():
            close(arr(grads[name].grad), p.grad.numpy(), 1e-3, 1e-4)

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="divisible"):
            nn.MultiheadAttention(10, 3)
        with pytest.raises(RuntimeError, match="attn_mask"):
            m = nn.MultiheadAttention(4, 2)
            x = tp.ones(3, 1, 4)
            m(x, x, x, is_causal=True)


# ---------------------------------------------------------------- functional
class TestFunctional:
    def test_import_does_not_need_ops(self):
        assert callable(F.gelu) and callable(F.conv2d)

    def test_missing_op_error_names_it(self, monkeypatch):
        monkeypatch.delattr(tp, "relu", raising=False)
        with pytest.raises(NotImplementedError, match="'relu'"):
            F.relu(tp.ones(2))

    @pytest.mark.parametrize("causal,mask", [(False, None), (False, "bool"), (False, "float"), (True, None)])
    def test_sdpa_matches_torch(self, torch, causal, mask):
        q, k, v = rand(2, 3, 4, 8, seed=1), rand(2, 3, 6, 8, seed=2), rand(2, 3, 6, 8, seed=3)
        am = None
        if mask == "bool":
            am = np.random.default_rng(0).random((4, 6)) < 0.7
            am[:, 0] = True
        elif mask == "float":
            am = rand(4, 6, seed=4)
        out = F.scaled_dot_product_attention(tp.tensor(q), tp.tensor(k), tp.tensor(v),
                                             attn_mask=None if am is None else tp.tensor(am), is_causal=causal)
        tout = torch.nn.functional.scaled_dot_product_attention(
            torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
            attn_mask=None if am is None else torch.from_numpy(am), is_causal=causal)
        close(arr(out), tout.numpy(), 1e-4, 1e-5)

    def test_sdpa_scale(self, torch):
        q = rand(1, 3, 4)
        out = F.scaled_dot_product_attention(tp.tensor(q), tp.tensor(q), tp.tensor(q), scale=0.3)
        tq = torch.from_numpy(q)
        close(arr(out), torch.nn.functional.scaled_dot_product_attention(tq, tq, tq, scale=0.3).numpy(), 1e-4, 1e-5)

    def test_softmax_implicit_dim_warns(self):
        with pytest.warns(UserWarning, match="Implicit dimension"):
            y = F.softmax(tp.ones(2, 3))
        close(arr(y), np.full((2, 3), 1 / 3), 1e-6, 1e-6)

    def test_max_pool_stride_defaults_to_kernel(self, torch):
        x = rand(1, 2, 6, 6)
        close(arr(F.max_pool2d(tp.tensor(x), 3)), torch.nn.functional.max_pool2d(torch.from_numpy(x), 3).numpy())
        close(arr(F.avg_pool2d(tp.tensor(x), (2, 3))),
              torch.nn.functional.avg_pool2d(torch.from_numpy(x), (2, 3)).numpy())

    def test_pool1d(self, torch):
        x = rand(2, 3, 9)
        tf = torch.nn.functional
        close(arr(F.max_pool1d(tp.tensor(x), 3, 2, 1)), tf.max_pool1d(torch.from_numpy(x), 3, 2, 1).numpy())
        close(arr(F.avg_pool1d(tp.tensor(x), 2)), tf.avg_pool1d(torch.from_numpy(x), 2).numpy())

    def test_one_hot(self):
        y = F.one_hot(tp.tensor([0, 2, 1]), 4)
        close(arr(y), np.eye(4, dtype=np.int64)[[0, 2, 1]])
        assert F.one_hot(tp.tensor([0, 2])).shape == (2, 3)

    def test_linear_functional(self):
        x, w, b = rand(3, 4), rand(2, 4, seed=1), rand(2, seed=2)
        close(arr(F.linear(tp.tensor(x), tp.tensor(w), tp.tensor(b))), x @ w.T + b, 1e-5, 1e-5)
        close(arr(F.linear(tp.tensor(x), tp.tensor(w))), x @ w.T, 1e-5, 1e-5)

    def test_functional_batch_norm_updates_running_stats(self):
        x = rand(16, 3)
        rm, rv = tp.zeros(3), tp.ones(3)
        F.batch_norm(tp.tensor(x), rm, rv, training=True, momentum=0.5)
        close(arr(rm), 0.5 * x.mean(0), 1e-5, 1e-5)
        close(arr(rv), 0.5 + 0.5 * x.var(0, ddof=1), 1e-5, 1e-5)

    def test_conv_bad_padding_string(self):
        with pytest.raises(ValueError, match="padding"):
            F.conv2d(tp.ones(1, 1, 3, 3), tp.ones(1, 1, 2, 2), padding="full")
        with pytest.raises(ValueError, match="strided"):
            nn.Conv2d(1, 1, 3, stride=2, padding="same")


# ---------------------------------------------------------------- init
class TestInit:
    def test_fans_match_torch(self, torch):
        for shape in [(3, 4), (8, 3, 5), (6, 2, 3, 3)]:
            assert nn.init._calculate_fan_in_and_fan_out(tp.empty(*shape)) == \
                torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
        with pytest.raises(ValueError, match="fewer than 2"):
            nn.init._calculate_fan_in_and_fan_out(tp.empty(3))

    def test_gains_match_torch(self, torch):
        for args in [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",),
                     ("leaky_relu", 0.2), ("selu",)]:
            assert nn.init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))
        with pytest.raises(ValueError):
            nn.init.calculate_gain("swish")

    def test_in_place_on_parameters_without_recording(self):
        p = nn.Parameter(tp.empty(50, 40))
        assert nn.init.uniform_(p, -0.5, 0.5) is p
        assert p.is_leaf and p.grad_fn is None and p.requires_grad
        a = arr(p)
        assert a.min() >= -0.5 and a.max() <= 0.5 and a.std() > 0.2

    def test_distributions(self):
        t = tp.empty(200, 300)
        a = arr(nn.init.normal_(t, 1.0, 2.0))
        assert abs(a.mean() - 1.0) < 0.05 and abs(a.std() - 2.0) < 0.05
        bound = math.sqrt(6 / 500)
        a = arr(nn.init.xavier_uniform_(t))
        assert a.max() <= bound and a.min() >= -bound and abs(a.std() - bound / math.sqrt(3)) < 0.01 * bound * 3
        a = arr(nn.init.xavier_normal_(t, gain=2.0))
        assert abs(a.std() - 2 * math.sqrt(2 / 500)) < 0.01
        a = arr(nn.init.kaiming_uniform_(t, a=math.sqrt(5)))
        assert a.max() <= 1 / math.sqrt(300) + 1e-7
        a = arr(nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"))
        assert abs(a.std() - math.sqrt(2 / 200)) < 0.005
        a = arr(nn.init.trunc_normal_(t, mean=0.5, std=1.0, a=-1.0, b=1.0))
        assert a.min() >= -1.0 and a.max() <= 1.0 and a.std() > 0.3

    def test_constants(self):
        t = tp.empty(2, 3, dtype=tp.float64)
        close(arr(nn.init.constant_(t, 0.25)), np.full((2, 3), 0.25))
        close(arr(nn.init.ones_(t)), np.ones((2, 3)))
        close(arr(nn.init.zeros_(t)), np.zeros((2, 3)))
        close(arr(nn.init.eye_(t)), np.eye(2, 3))

    def test_seeded_init_is_reproducible(self):
        tp.manual_seed(3)
        a = arr(nn.Linear(4, 4).weight)
        tp.manual_seed(3)
        b = arr(nn.Linear(4, 4).weight)
        np.testing.assert_array_equal(a, b)

    def test_default_layer_init_bounds(self):
        m = nn.Linear(100, 10)
        assert np.abs(arr(m.weight)).max() <= 0.1 and np.abs(arr(m.bias)).max() <= 0.1
        mha = nn.MultiheadAttention(8, 2)
        close(arr(mha.in_proj_bias), np.zeros(24))
        ln = nn.LayerNorm(3)
        close(arr(ln.weight), np.ones(3))

    def test_bad_mode(self):
        with pytest.raises(ValueError, match="fan_in"):
            nn.init.kaiming_uniform_(tp.empty(2, 2), mode="fan_avg")


# ---------------------------------------------------------------- compile
class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tp.tensor([[1.0, 2.0], [3.0, 4.0]]), requires_grad=False)

    def forward(self, x):
        return tp.relu(tp.matmul(x, self.w)) * 2 + 1


def test_module_compile_matches_eager():
    m = Scale()
    x = tp.tensor(rand(3, 2))
    expected = arr(m(x))
    m.compile(backend="eager")
    close(arr(m(x)), expected)
    close(arr(m(x)), expected)


def test_module_compile_sees_parameter_updates():
    m = Scale()
    m.compile(backend="eager")
    x = tp.ones(1, 2)
    m(x)
    with tp.no_grad():
        m.w.mul_(0)
    close(arr(m(x)), [[1.0, 1.0]])


# ---------------------------------------------------------------- dtypes, layouts, sizes, errors
@pytest.mark.parametrize("build,shape", [
    (lambda m, **k: m.Linear(5, 3, **k), (4, 5)),
    (lambda m, **k: m.Conv2d(2, 3, 3, padding=1, **k), (2, 2, 5, 5)),
    (lambda m, **k: m.LayerNorm(5, **k), (3, 5)),
    (lambda m, **k: m.BatchNorm1d(5, **k), (6, 5)),
    (lambda m, **k: m.RMSNorm(5, **k), (3, 5)),
])
def test_float64_layers_match_torch(torch, build, shape):
    tm = build(torch.nn, dtype=torch.float64)
    m = build(nn, dtype=tp.float64)
    assert all(p.dtype == tp.float64 for p in m.parameters())
    copy_from_torch(m, tm)
    x = np.random.default_rng(0).standard_normal(shape)
    out = m(tp.tensor(x, dtype=tp.float64))
    assert out.dtype == tp.float64
    close(arr(out), tm(torch.from_numpy(x)).detach().numpy(), 1e-12, 1e-12)


def test_float64_multihead_attention_via_double(torch):
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    m = copy_from_torch(nn.MultiheadAttention(8, 2, batch_first=True).double(), tm)
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    out, w = m(*(tp.tensor(x, dtype=tp.float64),) * 3)
    tout, tw = tm(*(torch.from_numpy(x),) * 3)
    close(arr(out), tout.detach().numpy(), 1e-12, 1e-12)
    close(arr(w), tw.detach().numpy(), 1e-12, 1e-12)


def test_non_contiguous_inputs(torch):
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.LayerNorm(6))
    m = copy_from_torch(nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6)), tm)
    x = rand(4, 5)
    out = m(tp.tensor(x).t())  # (5, 4) transposed view
    close(arr(out), tm(torch.from_numpy(x).t()).detach().numpy())
    conv_t, conv = torch.nn.Conv2d(2, 2, 3), nn.Conv2d(2, 2, 3)
    copy_from_torch(conv, conv_t)
    img = rand(2, 6, 7, 7)
    close(arr(conv(tp.tensor(img)[:, ::3])), conv_t(torch.from_numpy(img)[:, ::3]).detach().numpy(), 1e-5, 1e-5)


def test_zero_size_batch(torch):
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.LayerNorm(3))
    out = m(tp.zeros(0, 4))
    assert out.shape == (0, 3)
    out.sum().backward()
    close(arr(m[0].weight.grad), np.zeros((3, 4)))


@pytest.mark.parametrize("call", [
    lambda: nn.Linear(4, 3)(tp.ones(2, 5)),
    lambda: nn.Conv2d(3, 4, 3)(tp.ones(1, 2, 5, 5)),
    lambda: nn.LayerNorm(4)(tp.ones(2, 5)),
    lambda: nn.Embedding(3, 2)(tp.tensor([0, 5])),
    lambda: nn.CrossEntropyLoss()(tp.ones(2, 3), tp.tensor([0, 1, 2])),
    lambda: nn.MSELoss()(tp.ones(2, 3), tp.ones(3, 2)),
    lambda: nn.MultiheadAttention(4, 2)(tp.ones(3, 1, 5), tp.ones(3, 1, 5), tp.ones(3, 1, 5)),
])
def test_bad_shapes_raise_python_errors(call):
    with pytest.raises((ValueError, TypeError, IndexError, RuntimeError)):
        call()


# ---------------------------------------------------------------- utils
@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf")])
def test_clip_grad_norm_matches_torch(torch, norm_type):
    grads = [rand(3, 4, seed=1), rand(5, seed=2)]
    ps = [nn.Parameter(tp.zeros(*g.shape)) for g in grads]
    tps = [torch.nn.Parameter(torch.zeros(*g.shape)) for g in grads]
    for p, tpp, g in zip(ps, tps, grads):
        p.grad, tpp.grad = tp.tensor(g), torch.from_numpy(g.copy())
    total = nn.utils.clip_grad_norm_(ps, 0.5, norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, 0.5, norm_type)
    close(total.item(), ttotal.item(), 1e-6)
    for p, tpp in zip(ps, tps):
        close(arr(p.grad), tpp.grad.numpy(), 1e-5, 1e-7)


def test_clip_grad_norm_leaves_small_gradients_and_value_clips():
    p = nn.Parameter(tp.zeros(2))
    p.grad = tp.tensor([0.1, -0.2])
    nn.utils.clip_grad_norm_(p, 10.0)
    close(arr(p.grad), [0.1, -0.2])
    nn.utils.clip_grad_value_([p], 0.15)
    close(arr(p.grad), [0.1, -0.15])
    p.grad = tp.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


# ---------------------------------------------------------------- compositions beyond the registered ops
@pytest.mark.parametrize("name,kw", [("SELU", {}), ("CELU", {}), ("CELU", dict(alpha=0.5)), ("Hardsigmoid", {}),
                                     ("Hardswish", {}), ("Softsign", {}), ("GLU", {}), ("GLU", dict(dim=0)),
                                     ("Softmin", dict(dim=1))])
def test_composed_activations_match_torch(torch, name, kw):
    x = rand(4, 6) * 4
    xp, xt = tp.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    out, tout = getattr(nn, name)(**kw)(xp), getattr(torch.nn, name)(**kw)(xt)
    close(arr(out), tout.detach().numpy())
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    close(arr(xp.grad), xt.grad.numpy(), 1e-4, 1e-5)


@pytest.mark.parametrize("groups,shape", [(2, (3, 4, 5)), (1, (2, 6, 3, 3)), (6, (2, 6, 4))])
def test_group_norm_matches_torch(torch213, groups, shape):
    torch = torch213
    c = shape[1]
    tm = torch.nn.GroupNorm(groups, c)
    with torch.no_grad():
        tm.weight.uniform_(0.5, 1.5)
        tm.bias.uniform_(-0.5, 0.5)
    m = copy_from_torch(nn.GroupNorm(groups, c), tm)
    out, tout = _fwd(m, tm, torch, rand(*shape) * 3 + 1, rtol=1e-4, atol=1e-5)
    out.sum().backward()
    tout.sum().backward()
    close(arr(m.weight.grad), tm.weight.grad.numpy(), 1e-4, 1e-4)
    assert repr(m) == repr(tm)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)


@pytest.mark.parametrize("name,kw", [("SmoothL1Loss", {}), ("SmoothL1Loss", dict(beta=0.5)),
                                     ("SmoothL1Loss", dict(beta=0.0)), ("HuberLoss", dict(delta=0.7)),
                                     ("HuberLoss", dict(reduction="sum"))])
def test_regression_losses_match_torch(torch, name, kw):
    x, y = rand(5, 3) * 2, rand(5, 3, seed=1)
    xp, xt = tp.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    out = getattr(nn, name)(**kw)(xp, tp.tensor(y))
    tout = getattr(torch.nn, name)(**kw)(xt, torch.from_numpy(y))
    close(arr(out), tout.detach().numpy())
    out.backward()
    tout.backward()
    close(arr(xp.grad), xt.grad.numpy(), 1e-5, 1e-6)


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(torch, reduction, log_target):
    x = rand(4, 5)
    x = x - np.log(np.exp(x).sum(1, keepdims=True))
    t = np.abs(rand(4, 5, seed=1))
    t[0, 0] = 0.0  # 0 * log 0 counts as 0
    t = t / t.sum(1, keepdims=True)
    if log_target:
        t = np.log(t + 1e-3).astype(np.float32)
    out = nn.KLDivLoss(reduction=reduction, log_target=log_target)(tp.tensor(x), tp.tensor(t))
    tout = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(torch.from_numpy(x), torch.from_numpy(t))
    close(arr(out), tout.numpy(), 1e-5, 1e-6)


def test_normalize_and_cosine_similarity_match_torch(torch):
    tf = torch.nn.functional
    x, y = rand(4, 6), rand(4, 6, seed=1)
    x[1] = 0.0  # a zero row: eps keeps it finite
    for kw in [dict(), dict(p=1.0, dim=0), dict(dim=-1, eps=1e-3)]:
        close(arr(F.normalize(tp.tensor(x), **kw)), tf.normalize(torch.from_numpy(x), **kw).numpy(), 1e-5, 1e-6)
    close(arr(F.cosine_similarity(tp.tensor(x), tp.tensor(y))),
          tf.cosine_similarity(torch.from_numpy(x), torch.from_numpy(y)).numpy(), 1e-5, 1e-6)
    close(arr(F.cosine_similarity(tp.tensor(x), tp.tensor(y[:1]), dim=-1)),
          tf.cosine_similarity(torch.from_numpy(x), torch.from_numpy(y[:1]), dim=-1).numpy(), 1e-5, 1e-6)


@pytest.mark.parametrize("build", [lambda m: m.GroupNorm(2, 4), lambda m: m.SELU(inplace=True), lambda m: m.CELU(0.5),
                                   lambda m: m.GLU(dim=1), lambda m: m.Hardswish(), lambda m: m.SmoothL1Loss(beta=0.5),
                                   lambda m: m.KLDivLoss(reduction="batchmean"), lambda m: m.Softmin(dim=0)])
def test_more_reprs_match_pytorch(torch213, build):
    torch = torch213
    assert repr(build(nn)) == repr(build(torch.nn))


def test_init_with_generator_is_reproducible():
    g = tp.Generator()
    draws = []
    for _ in range(2):
        g.manual_seed(7)
        t = tp.empty(3, 4)
        nn.init.xavier_uniform_(t, generator=g)
        nn.init.trunc_normal_(tp.empty(2), generator=g)
        draws.append(arr(t))
    np.testing.assert_array_equal(draws[0], draws[1])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_init_into_other_float_dtypes(dtype):
    t = tp.empty(64, 64, dtype=getattr(tp, dtype))
    nn.init.kaiming_uniform_(t)
    a = arr(t.to(tp.float64))
    bound = math.sqrt(3) * math.sqrt(2 / (1 + 0.01 ** 2)) / 8
    assert a.max() <= bound * 1.01 and a.min() >= -bound * 1.01 and a.std() > bound / 3


@pytest.mark.parametrize("with_layer_norm", [False, True])
def test_module_compile_default_backend_and_keywords(with_layer_norm):
    norm = [nn.LayerNorm(8)] if with_layer_norm else []
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), *norm, nn.Linear(8, 2))
    m.eval()
    x = tp.randn(3, 4)
    with tp.no_grad():
        expected = arr(m(x))
        m.compile()
        close(arr(m(x)), expected, 1e-5, 1e-6)
        close(arr(m(input=x)), expected, 1e-5, 1e-6)


@pytest.mark.parametrize("convert,dtype", [("half", "float16"), ("bfloat16", "bfloat16"), ("double", "float64")])
def test_module_dtype_conversion_runs(convert, dtype):
    m = getattr(nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)), convert)()
    assert all(p.dtype == getattr(tp, dtype) for p in m.parameters())
    out = m(tp.randn(2, 4).to(getattr(tp, dtype)))
    assert out.dtype == getattr(tp, dtype) and out.shape == (2, 3)


def test_load_state_dict_accepts_torch_tensors_and_numpy_arrays(torch):
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    tm(torch.randn(8, 3))  # moves the running statistics away from their initial values
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m.load_state_dict(tm.state_dict())
    m.eval()
    tm.eval()
    x = rand(5, 3)
    close(arr(m(tp.tensor(x))), tm(torch.from_numpy(x)).detach().numpy())
    assert m[1].num_batches_tracked.item() == 1
    m2 = nn.Linear(3, 4)
    m2.load_state_dict({k: v.numpy() for k, v in tm[0].state_dict().items()})
    close(arr(m2.weight), tm[0].weight.detach().numpy())
    with pytest.raises(RuntimeError, match='expected a Tensor from the checkpoint but received list'):
        m2.load_state_dict({"weight": [[0.0] * 3] * 4, "bias": tp.zeros(4)})


# ---------------------------------------------------------------- transformer encoder
@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True), dict(batch_first=True, activation="gelu"),
                                dict(bias=False, layer_norm_eps=1e-6)])
@pytest.mark.parametrize("masks", [False, True])
def test_transformer_encoder_matches_torch(torch213, kw, masks):
    torch = torch213
    def build(m):
        layer = m.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)
        extra = {} if m is nn else dict(enable_nested_tensor=False)
        return m.TransformerEncoder(layer, 2, norm=m.LayerNorm(8), **extra)

    tm, m = build(torch.nn), build(nn)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert repr(m) == repr(tm)
    copy_from_torch(m, tm)
    S, N = 5, 3
    x = rand(N, S, 8) if kw.get("batch_first") else rand(S, N, 8)
    call_kw, tcall_kw = {}, {}
    if masks:
        causal = np.triu(np.ones((S, S), dtype=bool), 1)
        pad = np.zeros((N, S), dtype=bool)
        pad[1, -1] = True
        call_kw = dict(mask=tp.tensor(causal), src_key_padding_mask=tp.tensor(pad))
        tcall_kw = dict(mask=torch.from_numpy(causal), src_key_padding_mask=torch.from_numpy(pad))
    xp, xt = tp.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    out, tout = m(xp, **call_kw), tm(xt, **tcall_kw)
    close(arr(out), tout.detach().numpy(), 1e-4, 1e-5)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    close(arr(xp.grad), xt.grad.numpy(), 1e-3, 1e-4)
    grads = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        close(arr(grads[name].grad), p.grad.numpy(), 1e-3, 1e-4)


def test_transformer_encoder_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(4, 2, 8)
    enc = nn.TransformerEncoder(layer, 3)
    ws = [l.linear1.weight for l in enc.layers]
    assert len({id(w) for w in ws}) == 3 and all(w is not layer.linear1.weight for w in ws)
    np.testing.assert_array_equal(arr(ws[0]), arr(layer.linear1.weight))
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(4, 2, activation="swish")


@pytest.mark.parametrize("mode,pads,shape", [
    ("constant", (1, 2), (2, 3, 4)), ("constant", (1, 0, 2, 1), (2, 3, 4)), ("constant", (-1, 2, 0, -2), (2, 3, 4)),
    ("constant", (1, 1, 1, 1, 1, 1), (2, 3, 4)), ("reflect", (2, 1), (2, 3, 4)), ("reflect", (1, 2, 2, 1), (1, 2, 3, 4)),
    ("replicate", (3, 1), (2, 3, 4)), ("replicate", (1, 2, 2, 0), (1, 2, 3, 4)), ("circular", (2, 3), (2, 3, 4)),
    ("circular", (1, 1, 2, 0), (1, 2, 3, 4)),
])
def test_pad_matches_torch(torch, mode, pads, shape):
    x = rand(*shape)
    kw = dict(value=2.5) if mode == "constant" else {}
    xp, xt = tp.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    out = F.pad(xp, pads, mode=mode, **kw)
    tout = torch.nn.functional.pad(xt, pads, mode=mode, **kw)
    close(arr(out), tout.detach().numpy())
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    close(arr(xp.grad), xt.grad.numpy())


def test_pad_errors():
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(tp.ones(2, 2), (1,))
    with pytest.raises(ValueError, match="reflect padding"):
        F.pad(tp.ones(1, 2, 3), (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="too large"):
        F.pad(tp.ones(2), (1, 1, 1, 1))
