"""Outside testing, sixteenth round: nn layers, optimizers and schedulers against PyTorch"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")


def _copy(tm, pm):
    pm.load_state_dict({k: tp.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _np(t):
    return t.detach().numpy()


def test_mha_without_weights_gives_zero_for_a_query_with_every_key_masked():
    # A padded sequence under a causal mask leaves query 0 with no key to attend to.
    # PyTorch's need_weights=False path (what TransformerEncoderLayer uses) runs
    # scaled_dot_product_attention, which gives such a row 0; TensorPlay's softmax
    # gave NaN, which then spread through the layer norm and every gradient.
    rng = np.random.RandomState(0)
    x = rng.randn(3, 1, 4).astype(np.float32)
    kpm = np.array([[True, False, False]])
    am = np.triu(np.ones((3, 3), bool), 1)
    tm = torch.nn.MultiheadAttention(4, 2)
    pm = nn.MultiheadAttention(4, 2)
    _copy(tm, pm)
    tx = torch.tensor(x, requires_grad=True)
    px = tp.tensor(x, requires_grad=True)
    a, _ = tm(tx, tx, tx, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am), need_weights=False)
    b, w = pm(px, px, px, key_padding_mask=tp.tensor(kpm), attn_mask=tp.tensor(am), need_weights=False)
    assert w is None
    np.testing.assert_allclose(_np(b), _np(a), atol=1e-5)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-5)
    # need_weights=True keeps PyTorch's NaN row in both the output and the weights.
    b2, w2 = pm(px, px, px, key_padding_mask=tp.tensor(kpm), attn_mask=tp.tensor(am))
    assert np.isnan(_np(w2)[0, 0]).all() and np.isnan(_np(b2)[0]).all()


def test_encoder_layer_with_padding_and_causal_mask_stays_finite():
    rng = np.random.RandomState(0)
    x = rng.randn(4, 2, 8).astype(np.float32)
    kpm = np.array([[0, 1, 0, 0], [1, 1, 0, 0]], bool)
    causal = np.triu(np.ones((4, 4), bool), 1)
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True)
    pm = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True)
    _copy(tm, pm)
    a = tm(torch.tensor(x), src_mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(kpm))
    for run in (pm, tp.compile(pm)):
        b = run(tp.tensor(x), src_mask=tp.tensor(causal), src_key_padding_mask=tp.tensor(kpm))
        np.testing.assert_allclose(_np(b), _np(a), atol=1e-5)


def test_sdpa_enable_gqa_shares_key_value_heads():
    # enable_gqa=True (Llama-style grouped-query attention) raised NotImplementedError.
    rng = np.random.RandomState(1)
    q = rng.randn(2, 6, 4, 8).astype(np.float32)
    k = rng.randn(2, 2, 5, 8).astype(np.float32)
    v = rng.randn(2, 2, 5, 3).astype(np.float32)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    pq, pk, pv = (tp.tensor(a, requires_grad=True) for a in (q, k, v))
    a = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
    b = F.scaled_dot_product_attention(pq, pk, pv, is_causal=True, enable_gqa=True)
    np.testing.assert_allclose(_np(b), _np(a), atol=1e-5)
    a.sum().backward()
    b.sum().backward()
    for t, p in ((tq, pq), (tk, pk), (tv, pv)):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), atol=1e-5)
    fn = tp.compile(lambda x, y, z: F.scaled_dot_product_attention(x, y, z, enable_gqa=True))
    np.testing.assert_allclose(_np(fn(pq, pk, pv)),
                               _np(torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)),
                               atol=1e-5)
    with pytest.raises(RuntimeError, match="multiple of the number of key/value heads"):
        F.scaled_dot_product_attention(pq, pk[:, :1].expand(2, 4, 5, 8), pv[:, :1].expand(2, 4, 5, 3),
                                       enable_gqa=True)


@pytest.mark.parametrize("which", ["prelu", "rrelu"])
def test_prelu_and_eval_rrelu_gradient_at_zero_is_the_slope(which):
    # PyTorch's PReLU/RReLU take the identity branch only for x > 0; TensorPlay used
    # x >= 0, so an input of exactly 0 (common after a ReLU or padding) got gradient 1.
    x = np.array([-1.0, 0.0, -0.0, 2.0], np.float32)
    tx, px = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    if which == "prelu":
        torch.nn.functional.prelu(tx, torch.tensor([0.25])).sum().backward()
        F.prelu(px, tp.tensor([0.25])).sum().backward()
    else:
        torch.nn.functional.rrelu(tx, 0.1, 0.3, training=False).sum().backward()
        F.rrelu(px, 0.1, 0.3, training=False).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-7)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [dict(size=(5, 4)), dict(scale_factor=0.37), dict(size=(20, 9), align_corners=True),
                                dict(scale_factor=0.3, recompute_scale_factor=True)])
def test_interpolate_antialias_matches_torch(mode, kw):
    # antialias=True (torchvision's Resize on tensors) raised NotImplementedError.
    x = np.random.RandomState(0).randn(2, 3, 13, 17).astype(np.float32)
    tx, px = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    a = torch.nn.functional.interpolate(tx, mode=mode, antialias=True, **kw)
    b = F.interpolate(px, mode=mode, antialias=True, **kw)
    np.testing.assert_allclose(_np(b), _np(a), atol=1e-5)
    w = np.random.RandomState(1).randn(*a.shape).astype(np.float32)
    (a * torch.tensor(w)).sum().backward()
    (b * tp.tensor(w)).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-5)
    c = tp.compile(lambda t: F.interpolate(t, mode=mode, antialias=True, **kw))(px)
    np.testing.assert_allclose(_np(c), _np(a), atol=1e-5)
    with pytest.raises(ValueError, match="anti-alias option is restricted"):
        F.interpolate(px, scale_factor=0.5, mode="nearest", antialias=True)


def test_interpolate_area_on_volumes():
    # mode='area' on a 5-D input raised NotImplementedError; it is adaptive_avg_pool3d.
    x = np.random.RandomState(2).randn(1, 2, 7, 8, 9)
    tx, px = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    a = torch.nn.functional.interpolate(tx, size=(3, 5, 4), mode="area")
    b = F.interpolate(px, size=(3, 5, 4), mode="area")
    np.testing.assert_allclose(_np(b), _np(a), atol=1e-12)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("norm_type", [-float("inf"), 0, 0.5, float("inf")])
def test_clip_grad_norm_with_unusual_norm_types(norm_type):
    # -inf gave the largest |element| (it is the smallest), and 0 (a count of nonzero
    # tensors in PyTorch) raised ZeroDivisionError.
    rng = np.random.RandomState(0)
    gs = [rng.randn(4, 3).astype(np.float32) * 3, rng.randn(3).astype(np.float32) * 0.1,
          np.zeros(2, np.float32)]
    tps = [torch.zeros(g.shape, requires_grad=True) for g in gs]
    pps = [tp.zeros(*g.shape, requires_grad=True) for g in gs]
    for t, p, g in zip(tps, pps, gs):
        t.grad, p.grad = torch.tensor(g), tp.tensor(g)
    a = torch.nn.utils.clip_grad_norm_(tps, 0.1, norm_type=norm_type)
    b = nn.utils.clip_grad_norm_(pps, 0.1, norm_type=norm_type)
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5)
    for t, p in zip(tps, pps):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_with_a_nan_gradient_poisons_all_as_torch():
    # The coefficient was computed on the host with min(1.0, max_norm / nan) == 1.0,
    # so a NaN norm left every gradient as it was; PyTorch multiplies by the NaN.
    tps = [torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    pps = [tp.zeros(2, requires_grad=True), tp.zeros(2, requires_grad=True)]
    for lib, ps in ((torch, tps), (tp, pps)):
        ps[0].grad = lib.tensor([float("nan"), 1.0])
        ps[1].grad = lib.tensor([3.0, 4.0])
    torch.nn.utils.clip_grad_norm_(tps, 1.0)
    nn.utils.clip_grad_norm_(pps, 1.0)
    assert np.isnan(pps[1].grad.numpy()).all() and np.isnan(tps[1].grad.numpy()).all()


def test_load_from_state_dict_override_with_torch_signature():
    # Checkpoint-compatibility code overrides _load_from_state_dict(state_dict, prefix,
    # local_metadata, strict, missing_keys, unexpected_keys, error_msgs) and calls super();
    # TensorPlay's had no local_metadata, so the arguments shifted and loading crashed.
    class Renamed(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                  unexpected_keys, error_msgs):
            old = prefix + "w"
            if old in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(old)
            assert local_metadata.get("version") == 1
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)

    m = nn.Sequential(Renamed(2, 2))
    sd = m.state_dict()
    assert sd._metadata["0"] == {"version": 1}
    sd["0.w"] = tp.ones(2, 2)
    del sd["0.weight"]
    assert repr(m.load_state_dict(sd)) == "<All keys matched successfully>"
    assert m[0].weight.sum().item() == 4.0


def test_extra_state_and_state_dict_hooks():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(1, 1)
            self.steps = 0

        def get_extra_state(self):
            return {"steps": self.steps}

        def set_extra_state(self, state):
            self.steps = state["steps"]

    a, b = Counter(), Counter()
    a.steps = 7
    sd = a.state_dict()
    assert list(sd) == ["_extra_state", "lin.weight", "lin.bias"]
    b.load_state_dict(sd)
    assert b.steps == 7
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
        b.load_state_dict({k: v for k, v in sd.items() if k != "_extra_state"})

    log = []
    m = nn.Linear(1, 1)
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix)))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", sorted(sd))))
    m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: log.append(("lpre", sorted(sd))))

    def drop_missing(mod, keys):
        log.append(("lpost", list(keys.missing_keys)))
        keys.missing_keys.clear()  # a post hook may forgive keys, as in PyTorch

    m.register_load_state_dict_post_hook(drop_missing)
    m.load_state_dict({"weight": tp.ones(1, 1)})
    m.state_dict()
    assert log == [("lpre", ["weight"]), ("lpost", ["bias"]), ("pre", ""), ("post", ["bias", "weight"])]


def test_batchnorm_loads_a_checkpoint_without_num_batches_tracked():
    # PyTorch (state dict version < 2, or no version, as in a dict of arrays) keeps the
    # counter; TensorPlay raised 'Missing key(s) in state_dict: "1.num_batches_tracked"'.
    m = nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2))
    m[1].num_batches_tracked.fill_(3)
    sd = {k: v.clone() for k, v in m.state_dict().items() if "num_batches" not in k}
    assert repr(m.load_state_dict(sd)) == "<All keys matched successfully>"
    assert m[1].num_batches_tracked.item() == 3
    sd = m.state_dict()  # a current checkpoint (version 2) must still have it
    del sd["1.num_batches_tracked"]
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        m.load_state_dict(sd)


def test_set_submodule_containers_pop_and_always_call_hooks():
    s = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.ReLU()))
    s.set_submodule("1.0", nn.Tanh())
    assert isinstance(s[1][0], nn.Tanh)
    with pytest.raises(AttributeError, match="has no attribute `x`"):
        s.set_submodule("1.x", nn.Tanh(), strict=True)
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.ELU()])
    assert isinstance(ml.pop(1), nn.Tanh)
    assert [type(x).__name__ for x in ml] == ["ReLU", "ELU"] and list(ml._modules) == ["0", "1"]
    assert isinstance(s.pop(0), nn.Linear) and len(s) == 1

    seen = []
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(RuntimeError):
        lin(tp.ones(3))
    assert seen == [None]
    lin(tp.ones(2))
    assert len(seen) == 2 and seen[1] is not None


def test_nn_buffer_assignment_registers_a_buffer():
    # nn.Buffer (PyTorch 2.4+: `self.x = nn.Buffer(t, persistent=False)`) did not exist.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Buffer(tp.ones(2))
            self.b = nn.Buffer(tp.zeros(1), persistent=False)
            self.c = tp.ones(3)  # a plain tensor stays a plain attribute

    m = M()
    assert list(m.state_dict()) == ["a"]
    assert [n for n, _ in m.named_buffers()] == ["a", "b"]
    assert isinstance(m.a, nn.Buffer) and not m.a.requires_grad
    m.a = nn.Buffer(tp.ones(4), persistent=False)
    assert list(m.state_dict()) == [] and tuple(m.a.shape) == (4,)
    assert m.double().b.dtype == tp.float64


def test_lp_pool3d_matches_torch():
    x = np.abs(np.random.RandomState(3).randn(2, 3, 4, 5, 6))
    tx, px = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    a = torch.nn.functional.lp_pool3d(tx, 3, (2, 1, 3), stride=2, ceil_mode=True)
    b = F.lp_pool3d(px, 3, (2, 1, 3), stride=2, ceil_mode=True)
    np.testing.assert_allclose(_np(b), _np(a), rtol=1e-10)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(_np(nn.LPPool3d(2, 2)(px)), _np(torch.nn.LPPool3d(2, 2)(tx)), rtol=1e-10)


def test_functional_multi_head_attention_forward():
    # F.multi_head_attention_forward (called by code that keeps its own projection weights)
    # did not exist.
    rng = np.random.RandomState(0)
    L, S, N, E, H = 4, 5, 2, 8, 2
    q, k, v = rng.randn(L, N, E), rng.randn(S, N, E), rng.randn(S, N, E)
    w, b, ow, ob = rng.randn(3 * E, E) * 0.3, rng.randn(3 * E) * 0.1, rng.randn(E, E) * 0.3, rng.randn(E) * 0.1
    kpm = np.zeros((N, S), bool)
    kpm[0, 3:] = True
    res = []
    for lib, fn in ((torch, torch.nn.functional), (tp, F)):
        c = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        out, wts = fn.multi_head_attention_forward(*c, E, H, lib.tensor(w), lib.tensor(b), None, None, False, 0.0,
                                                   lib.tensor(ow), lib.tensor(ob), training=False,
                                                   key_padding_mask=lib.tensor(kpm), average_attn_weights=False)
        (out.sum() + wts.pow(2).sum()).backward()
        res.append((out, wts, c))
    (a, aw, ac), (p, pw, pc) = res
    np.testing.assert_allclose(_np(p), _np(a), atol=1e-10)
    np.testing.assert_allclose(_np(pw), _np(aw), atol=1e-10)
    for t, x in zip(ac, pc):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_regression_losses_take_weight(name, reduction):
    # PyTorch 2.13's mse_loss / l1_loss / huber_loss take weight= (mse and l1 average by
    # sum(weight), huber by the element count); TensorPlay raised TypeError / NotImplementedError.
    rng = np.random.RandomState(0)
    x, y, w = rng.randn(3, 4), rng.randn(3, 4), rng.rand(3, 4)
    tx, px = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    a = getattr(torch.nn.functional, name)(tx, torch.tensor(y), reduction=reduction, weight=torch.tensor(w))
    b = getattr(F, name)(px, tp.tensor(y), reduction=reduction, weight=tp.tensor(w))
    np.testing.assert_allclose(_np(b), _np(a), rtol=1e-12)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        getattr(F, name)(px, tp.tensor(y), weight=tp.ones(4))


def test_bad_arguments_raise_naming_the_layer():
    # huber_loss with delta <= 0 returned a (negative) loss where PyTorch raises; GroupNorm
    # and MultiheadAttention reported shape mistakes as a reshape or add deep inside.
    with pytest.raises(ValueError, match="huber_loss: .*non-positive values for delta"):
        F.huber_loss(tp.ones(2), tp.zeros(2), delta=-1.0)
    with pytest.raises(ValueError, match=r"group_norm: .*weight of shape \(6,\) and input of shape \(2, 4, 3\)"):
        nn.GroupNorm(2, 6)(tp.ones(2, 4, 3))
    mha = nn.MultiheadAttention(8, 2)
    q, kv = tp.ones(4, 2, 8), tp.ones(5, 2, 8)
    with pytest.raises(ValueError, match=r"attn_mask is \(3, 3\), but should be \(4, 5\)"):
        mha(q, kv, kv, attn_mask=tp.ones(3, 3, dtype=tp.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(2, 5\), but got \(2, 4\)"):
        mha(q, kv, kv, key_padding_mask=tp.ones(2, 4, dtype=tp.bool))
    with pytest.raises(ValueError, match="key of shape .* and value of shape"):
        mha(q, kv, tp.ones(6, 2, 8))


def test_global_module_forward_hooks():
    # torch.nn.modules.module.register_module_forward_(pre_)hook (FLOP counters, tracers)
    # did not exist; they run before each module's own hooks.
    from tensorplay.nn.modules import module as mm
    log = []
    h1 = mm.register_module_forward_pre_hook(lambda m, a: log.append(("pre", type(m).__name__)))
    h2 = mm.register_module_forward_hook(lambda m, a, o: log.append(("post", type(m).__name__)))
    h3 = mm.register_module_forward_hook(lambda m, a, o: o * 2 if isinstance(m, nn.Linear) else None)
    try:
        net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
        net[0].register_forward_hook(lambda m, a, o: log.append("local"))
        with tp.no_grad():
            net[0].weight.fill_(1.0)
            net[0].bias.zero_()
        y = net(tp.ones(1, 2))
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
    assert y.tolist() == [[4.0, 4.0]]
    assert log == [("pre", "Sequential"), ("pre", "Linear"), ("post", "Linear"), "local", ("pre", "ReLU"),
                   ("post", "ReLU"), ("post", "Sequential")]
    log.clear()
    assert net(tp.ones(1, 2)).tolist() == [[2.0, 2.0]] and log == ["local"]


def test_optimizer_step_and_state_dict_hooks():
    # register_step_pre_hook / register_step_post_hook (EMA and logging utilities), the global
    # optimizer step hooks and the state-dict hooks did not exist.
    from tensorplay.optim import optimizer as om
    log = []
    p = nn.Parameter(tp.ones(2))
    opt = tp.optim.SGD([p], lr=0.1)
    h = opt.register_step_pre_hook(lambda o, args, kwargs: log.append(("pre", args[0] is o)))
    opt.register_step_post_hook(lambda o, args, kwargs: log.append("post"))
    g = om.register_optimizer_step_pre_hook(lambda o, args, kwargs: log.append("global"))
    try:
        p.grad = tp.ones(2)
        opt.step()
        lbfgs = tp.optim.LBFGS([p])  # an optimizer with its own step(): hooks once per step
        lbfgs.register_step_post_hook(lambda o, args, kwargs: log.append("lbfgs"))
        lbfgs.step(lambda: (p * p).sum())
    finally:
        g.remove()
    h.remove()
    assert log == ["global", ("pre", True), "post", "global", "lbfgs"]
    opt.register_state_dict_post_hook(lambda o, sd: sd.update(extra=1))
    opt.register_load_state_dict_pre_hook(lambda o, sd: {k: v for k, v in sd.items() if k != "extra"})
    sd = opt.state_dict()
    assert sd["extra"] == 1
    opt.load_state_dict(sd)

    log.clear()
    q = nn.Parameter(tp.ones(2))
    adam = tp.optim.Adam([q], lr=0.1)
    adam.register_step_post_hook(lambda o, args, kwargs: log.append("post"))
    step = tp.compile(adam.step)  # the hooks run at every compiled call, not once at capture
    for _ in range(3):
        q.grad = tp.ones(2)
        step()
    assert log == ["post"] * 3


def test_module_methods_ported_code_calls():
    # lstm.flatten_parameters() (in most RNN code written for cuDNN), cell.reset_parameters(),
    # Conv._conv_forward (weight-standardized convolutions) and
    # Embedding._fill_padding_idx_with_zero raised AttributeError; nn.RNNCellBase did not exist.
    nn.LSTM(2, 3).flatten_parameters()
    cell = nn.LSTMCell(3, 4)
    with tp.no_grad():
        cell.weight_ih.fill_(9.0)
    cell.reset_parameters()
    assert float(cell.weight_ih.abs().max()) <= 0.5
    assert isinstance(cell, nn.RNNCellBase) and isinstance(nn.GRUCell(1, 1), nn.RNNCellBase)

    class WSConv(torch.nn.Conv2d):
        def forward(self, x):
            w = self.weight
            w = (w - w.mean((1, 2, 3), keepdim=True)) / (w.std((1, 2, 3), keepdim=True) + 1e-5)
            return self._conv_forward(x, w, self.bias)

    class PWSConv(nn.Conv2d):
        forward = WSConv.forward

    tm, pm = WSConv(3, 4, 3, padding=1, padding_mode="reflect"), PWSConv(3, 4, 3, padding=1, padding_mode="reflect")
    _copy(tm, pm)
    x = np.random.RandomState(0).randn(1, 3, 5, 5).astype(np.float32)
    np.testing.assert_allclose(_np(pm(tp.tensor(x))), _np(tm(torch.tensor(x))), atol=1e-5)

    emb = nn.Embedding(4, 2, padding_idx=1)
    with tp.no_grad():
        emb.weight.fill_(1.0)
    emb._fill_padding_idx_with_zero()
    assert emb.weight[1].tolist() == [0.0, 0.0]


def test_module_to_an_integer_dtype_is_refused():
    # model.to(tp.int64) truncated every floating weight to an integer where PyTorch raises.
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        m.to(tp.int64)
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(tp.ones(1, dtype=tp.int32))
    assert m.weight.dtype == tp.float32
    # Module.type casts everything, integer buffers included, as PyTorch's
    bn = nn.BatchNorm1d(2).type(tp.float64)
    assert bn.num_batches_tracked.dtype == tp.float64 and bn.share_memory() is bn


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
@pytest.mark.parametrize("omap", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_parametrization_matches_torch(shape, omap):
    # nn.utils.parametrizations.orthogonal did not exist.
    rng = np.random.RandomState(0)
    w = rng.randn(*shape)
    tm = torch.nn.Linear(shape[1], shape[0], dtype=torch.float64)
    pm = nn.Linear(shape[1], shape[0], dtype=tp.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    with tp.no_grad():
        pm.weight.copy_(tp.tensor(w))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=omap)
    nn.utils.parametrizations.orthogonal(pm, orthogonal_map=omap)
    pw = _np(pm.weight)
    gram = pw @ pw.T if shape[0] <= shape[1] else pw.T @ pw
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-10)
    assert sorted(pm.state_dict()) == sorted(tm.state_dict())
    # a non-square base is random: take PyTorch's, then values and gradients agree
    pm.load_state_dict({k: tp.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = rng.randn(2, shape[1])
    a, b = tm(torch.tensor(x)), pm(tp.tensor(x))
    np.testing.assert_allclose(_np(b), _np(a), atol=1e-10)
    a.pow(3).sum().backward()
    b.pow(3).sum().backward()
    np.testing.assert_allclose(pm.parametrizations.weight.original.grad.numpy(),
                               tm.parametrizations.weight.original.grad.numpy(), atol=1e-10)
