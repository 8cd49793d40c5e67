"""tp.optim.swa_utils against torch.optim.swa_utils on the same weights."""
import numpy as np
import pytest
import tensorplay as tp

torch = pytest.importorskip("torch")
from tensorplay.optim import swa_utils  # noqa: E402
from torch.optim import swa_utils as tswa  # noqa: E402


def _pair(seed=0, bn=True):
    torch.manual_seed(seed)
    layers_t = [torch.nn.Linear(3, 4)] + ([torch.nn.BatchNorm1d(4)] if bn else []) + [torch.nn.Linear(4, 2)]
    layers_p = [tp.nn.Linear(3, 4)] + ([tp.nn.BatchNorm1d(4)] if bn else []) + [tp.nn.Linear(4, 2)]
    mt, mp = torch.nn.Sequential(*layers_t), tp.nn.Sequential(*layers_p)
    _load(mp, mt)
    return mp, mt


def _load(mp, mt):
    sd = {k: tp.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()}
    mp.load_state_dict(sd)


def _perturb(mp, mt, k):
    rng = np.random.default_rng(k)
    with torch.no_grad():
        for p in mt.parameters():
            p.add_(torch.tensor(rng.normal(size=tuple(p.shape)), dtype=p.dtype))
    _load(mp, mt)


def _assert_same(mp, mt, tol=1e-6):
    sp, st = mp.state_dict(), mt.state_dict()
    assert list(sp.keys()) == list(st.keys())
    for k in st:
        np.testing.assert_allclose(sp[k].numpy(), st[k].numpy(), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("kind", ["swa", "ema_multi", "ema", "swa_fn", "custom"])
@pytest.mark.parametrize("use_buffers", [False, True])
def test_averaged_model_matches_torch(kind, use_buffers):
    mp, mt = _pair()
    kw_t, kw_p = {}, {}
    if kind == "ema_multi":
        kw_t["multi_avg_fn"], kw_p["multi_avg_fn"] = tswa.get_ema_multi_avg_fn(0.9), swa_utils.get_ema_multi_avg_fn(0.9)
    elif kind == "ema":
        kw_t["avg_fn"], kw_p["avg_fn"] = tswa.get_ema_avg_fn(0.8), swa_utils.get_ema_avg_fn(0.8)
    elif kind == "swa_fn":
        kw_t["avg_fn"], kw_p["avg_fn"] = tswa.get_swa_avg_fn(), swa_utils.get_swa_avg_fn()
    elif kind == "custom":
        kw_t["avg_fn"] = lambda a, c, n: 0.5 * a + 0.5 * c
        kw_p["avg_fn"] = lambda a, c, n: 0.5 * a + 0.5 * c
    at = tswa.AveragedModel(mt, use_buffers=use_buffers, **kw_t)
    ap = swa_utils.AveragedModel(mp, use_buffers=use_buffers, **kw_p)
    x = np.random.default_rng(5).normal(size=(8, 3)).astype(np.float32)
    for k in range(4):
        _perturb(mp, mt, k)
        # run the models in train mode so BatchNorm buffers change too
        mt.train(), mp.train()
        mt(torch.tensor(x)), mp(tp.tensor(x))
        at.update_parameters(mt)
        ap.update_parameters(mp)
    if use_buffers:
        # Integer buffers (num_batches_tracked) are handled differently by torch's
        # per-dtype paths; compare the floating-point state.
        sp, st = ap.state_dict(), at.state_dict()
        assert list(sp.keys()) == list(st.keys())
        for key in st:
            if st[key].is_floating_point():
                np.testing.assert_allclose(sp[key].numpy(), st[key].numpy(), rtol=1e-5, atol=1e-6, err_msg=key)
    else:
        _assert_same(ap, at, 1e-5)
    assert int(ap.n_averaged) == 4
    ap.eval(), at.eval()
    np.testing.assert_allclose(ap(tp.tensor(x)).detach().numpy(), at(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_averaged_model_is_a_copy_and_validates():
    mp, _ = _pair()
    ap = swa_utils.AveragedModel(mp)
    assert ap.module is not mp
    assert ap.module[0].weight is not mp[0].weight
    with pytest.raises(ValueError, match="Only one"):
        swa_utils.AveragedModel(mp, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_multi_avg_fn(1.5)
    with pytest.raises(TypeError):
        swa_utils.AveragedModel(object())


def test_update_bn_matches_torch():
    mp, mt = _pair(bn=True)
    at, ap = tswa.AveragedModel(mt), swa_utils.AveragedModel(mp)
    rng = np.random.default_rng(3)
    batches = [rng.normal(size=(6, 3)).astype(np.float32) for _ in range(5)]
    tswa.update_bn([(torch.tensor(b), 0) for b in batches], at)
    swa_utils.update_bn([(tp.tensor(b), 0) for b in batches], ap)
    _assert_same(ap, at, 1e-5)
    assert at.training and ap.training
    # momentum restored
    assert ap.module[1].momentum == at.module[1].momentum == 0.1
    mp2, mt2 = _pair(bn=False)
    swa_utils.update_bn([tp.tensor(batches[0])], mp2)  # no BatchNorm: nothing to do


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 5])
def test_swalr_matches_torch(strategy, anneal_epochs):
    wt, wp = torch.nn.Parameter(torch.zeros(2)), tp.nn.Parameter(tp.zeros(2))
    ot = torch.optim.SGD([{"params": [wt]}, {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.3}], lr=1.0)
    op = tp.optim.SGD([{"params": [wp]}, {"params": [tp.nn.Parameter(tp.zeros(1))], "lr": 0.3}], lr=1.0)
    st = tswa.SWALR(ot, swa_lr=[0.05, 0.1], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    sp = swa_utils.SWALR(op, swa_lr=[0.05, 0.1], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    for step in range(8):
        np.testing.assert_allclose(sp.get_last_lr(), st.get_last_lr(), rtol=1e-12, err_msg=str(step))
        if step == 3:  # a manual lr change in the middle is honoured the same way
            ot.param_groups[0]["lr"] *= 2
            op.param_groups[0]["lr"] *= 2
        ot.step(), op.step()
        st.step(), sp.step()


def test_swalr_validation():
    op = tp.optim.SGD([tp.nn.Parameter(tp.zeros(2))], lr=1.0)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(op, 0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(op, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr"):
        swa_utils.SWALR(op, [0.1, 0.2])


def test_swa_training_loop_runs():
    mp, _ = _pair(bn=False)
    opt = tp.optim.SGD(mp.parameters(), lr=0.1)
    swa = swa_utils.AveragedModel(mp)
    sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    x, y = tp.randn(16, 3), tp.randn(16, 2)
    for _ in range(5):
        opt.zero_grad()
        loss = ((mp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        swa.update_parameters(mp)
        sched.step()
    assert abs(opt.param_groups[0]["lr"] - 0.05) < 1e-12
    assert int(swa.n_averaged) == 5
