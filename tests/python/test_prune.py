"""tp.nn.utils.prune against torch.nn.utils.prune: deterministic masks (L1,
Ln, custom, global) equal torch's on the same weights; state_dict keys, hook
and parameter bookkeeping; pruned weights stay zero while training."""
import numpy as np
import pytest
import tensorplay as tp

torch = pytest.importorskip("torch")
import torch.nn.utils.prune as tprune  # noqa: E402

prune = tp.nn.utils.prune


def _linear_pair(i=6, o=5, seed=0):
    torch.manual_seed(seed)
    mt = torch.nn.Linear(i, o)
    mp = tp.nn.Linear(i, o)
    mp.load_state_dict({k: tp.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    return mp, mt


def _conv_pair(seed=0):
    torch.manual_seed(seed)
    mt = torch.nn.Conv2d(3, 4, 3)
    mp = tp.nn.Conv2d(3, 4, 3)
    mp.load_state_dict({k: tp.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    return mp, mt


def _same_state(mp, mt):
    sp, st = mp.state_dict(), mt.state_dict()
    assert list(sp.keys()) == list(st.keys())
    for k in st:
        np.testing.assert_allclose(sp[k].numpy(), st[k].detach().numpy(), rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.parametrize("amount", [0.0, 0.3, 0.5, 7, 30])
def test_l1_unstructured_matches_torch(amount):
    mp, mt = _linear_pair()
    prune.l1_unstructured(mp, "weight", amount=amount)
    tprune.l1_unstructured(mt, "weight", amount=amount)
    _same_state(mp, mt)
    np.testing.assert_allclose(mp.weight.detach().numpy(), mt.weight.detach().numpy())
    assert prune.is_pruned(mp) and "weight" not in mp._parameters
    assert isinstance(mp.weight_orig, tp.nn.Parameter)


@pytest.mark.parametrize("n,dim,amount", [(1, 0, 2), (2, -1, 0.5), (float("inf"), 1, 1), (-float("inf"), 0, 0.25),
                                          (1, 0, 0)])
def test_ln_structured_matches_torch(n, dim, amount):
    mp, mt = _conv_pair()
    prune.ln_structured(mp, "weight", amount=amount, n=n, dim=dim)
    tprune.ln_structured(mt, "weight", amount=amount, n=n, dim=dim)
    _same_state(mp, mt)


def test_ln_structured_fro_on_linear_matches_torch():
    # torch.norm accepts 'fro' only over at most two dims, so compare on a Linear weight.
    mp, mt = _linear_pair()
    prune.ln_structured(mp, "weight", amount=2, n="fro", dim=0)
    tprune.ln_structured(mt, "weight", amount=2, n="fro", dim=0)
    _same_state(mp, mt)


def test_iterative_pruning_combines_masks_like_torch():
    mp, mt = _conv_pair(1)
    for P, T in ((prune, tprune),):
        P.l1_unstructured(mp, "weight", amount=0.3)
        T.l1_unstructured(mt, "weight", amount=0.3)
        P.ln_structured(mp, "weight", amount=1, n=2, dim=0)
        T.ln_structured(mt, "weight", amount=1, n=2, dim=0)
        P.l1_unstructured(mp, "weight", amount=5)
        T.l1_unstructured(mt, "weight", amount=5)
    _same_state(mp, mt)
    hooks = [h for h in mp._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 3


def test_custom_mask_and_importance_scores_match_torch():
    mp, mt = _linear_pair()
    mask = (np.arange(30).reshape(5, 6) % 3 != 0).astype(np.float32)
    prune.custom_from_mask(mp, "weight", mask=tp.tensor(mask))
    tprune.custom_from_mask(mt, "weight", mask=torch.tensor(mask))
    scores = np.random.default_rng(0).uniform(size=5).astype(np.float32)
    prune.l1_unstructured(mp, "bias", amount=2, importance_scores=tp.tensor(scores))
    tprune.l1_unstructured(mt, "bias", amount=2, importance_scores=torch.tensor(scores))
    _same_state(mp, mt)
    with pytest.raises(ValueError, match="importance_scores"):
        prune.l1_unstructured(mp, "bias", amount=1, importance_scores=tp.ones(3))


def test_global_unstructured_matches_torch():
    mp1, mt1 = _linear_pair(6, 5, 0)
    mp2, mt2 = _linear_pair(5, 4, 1)
    prune.l1_unstructured(mp1, "weight", amount=0.2)
    tprune.l1_unstructured(mt1, "weight", amount=0.2)
    prune.global_unstructured([(mp1, "weight"), (mp2, "weight"), (mp2, "bias")], prune.L1Unstructured, amount=0.4)
    tprune.global_unstructured([(mt1, "weight"), (mt2, "weight"), (mt2, "bias")], tprune.L1Unstructured,
                               amount=0.4)
    _same_state(mp1, mt1)
    _same_state(mp2, mt2)
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(mp2, "weight")], prune.LnStructured, amount=1, n=1, dim=0)


def test_remove_makes_pruning_permanent_like_torch():
    mp, mt = _linear_pair()
    prune.l1_unstructured(mp, "weight", amount=0.5)
    tprune.l1_unstructured(mt, "weight", amount=0.5)
    prune.remove(mp, "weight")
    tprune.remove(mt, "weight")
    _same_state(mp, mt)
    assert isinstance(mp.weight, tp.nn.Parameter) and not prune.is_pruned(mp)
    assert not mp._forward_pre_hooks
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(mp, "weight")


def test_random_pruning_counts_and_structure():
    tp.manual_seed(0)
    mp, _ = _conv_pair()
    prune.random_unstructured(mp, "weight", amount=0.25)
    n = mp.weight.numel()
    assert int((mp.weight_mask == 0).sum()) == round(0.25 * n)
    mq, _ = _conv_pair()
    prune.random_structured(mq, "weight", amount=2, dim=0)
    per_channel = mq.weight_mask.sum(dim=[1, 2, 3]).numpy()
    assert sorted(per_channel.tolist()) == [0, 0, 27, 27]
    with pytest.raises(ValueError, match="multidimensional"):
        prune.random_structured(mq, "bias", amount=1, dim=0)
    assert "bias" in mq._parameters and "bias_orig" not in mq._parameters  # failed pruning left it alone


def test_training_keeps_pruned_weights_zero():
    mp, _ = _linear_pair()
    prune.l1_unstructured(mp, "weight", amount=0.5)
    mask = mp.weight_mask.numpy().copy()
    opt = tp.optim.SGD(mp.parameters(), lr=0.1)
    names = [n for n, _ in mp.named_parameters()]
    assert names == ["bias", "weight_orig"]
    x, y = tp.randn(16, 6), tp.randn(16, 5)
    before = mp.weight_orig.detach().numpy().copy()
    for _ in range(5):
        opt.zero_grad()
        loss = ((mp(x) - y) ** 2).mean()
        loss.backward()
        # the gradient of the pruned entries is masked out
        assert np.all(mp.weight_orig.grad.numpy()[mask == 0] == 0)
        opt.step()
    w = mp.weight.detach().numpy()
    assert np.all(w[mask == 0] == 0)
    assert not np.allclose(w[mask == 1], before[mask == 1])


def test_forward_matches_torch_after_pruning():
    mp, mt = _conv_pair()
    prune.ln_structured(mp, "weight", amount=0.5, n=1, dim=0)
    tprune.ln_structured(mt, "weight", amount=0.5, n=1, dim=0)
    x = np.random.default_rng(0).normal(size=(2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(mp(tp.tensor(x)).detach().numpy(), mt(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_amount_validation():
    mp, _ = _linear_pair()
    with pytest.raises(ValueError):
        prune.l1_unstructured(mp, "weight", amount=1.5)
    with pytest.raises(ValueError):
        prune.l1_unstructured(mp, "weight", amount=-1)
    with pytest.raises(TypeError):
        prune.l1_unstructured(mp, "weight", amount="half")
    with pytest.raises(ValueError, match="smaller than"):
        prune.l1_unstructured(mp, "weight", amount=100)
    assert "weight" in mp._parameters and not prune.is_pruned(mp)
    prune.identity(mp, "weight")
    assert prune.is_pruned(mp) and np.all(mp.weight_mask.numpy() == 1)


def test_pruning_method_prune_and_container():
    t = tp.tensor([[0.1, -2.0, 0.3], [4.0, -0.05, 1.0]])
    out = prune.L1Unstructured(amount=2).prune(t)
    np.testing.assert_allclose(out.numpy(), [[0.0, -2.0, 0.3], [4.0, 0.0, 1.0]])
    m = prune.L1Unstructured(amount=1)
    m._tensor_name = "w"
    c = prune.PruningContainer(m)
    other = prune.L1Unstructured(amount=1)
    other._tensor_name = "v"
    with pytest.raises(ValueError, match="named 'w'"):
        c.add_pruning_method(other)


def test_pruned_module_inside_compiled_function_matches_eager():
    import warnings
    mp, _ = _linear_pair()
    prune.l1_unstructured(mp, "weight", amount=0.5)
    x = tp.randn(3, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the pruning hook is pure: no capture warning
        cf = tp.compile(lambda x: mp(x) * 2.0)
        np.testing.assert_allclose(cf(x).detach().numpy(), (mp(x) * 2.0).detach().numpy(), rtol=1e-6)
    # weight_orig and weight_mask are read at every call
    with tp.no_grad():
        mp.weight_orig.mul_(3.0)
    np.testing.assert_allclose(cf(x).detach().numpy(), (mp(x) * 2.0).detach().numpy(), rtol=1e-6)
    prune.l1_unstructured(mp, "weight", amount=3)
    np.testing.assert_allclose(cf(x).detach().numpy(), (mp(x) * 2.0).detach().numpy(), rtol=1e-6)
