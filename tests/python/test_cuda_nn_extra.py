"""The layers and optimizers added with ConvTranspose/EmbeddingBag/InstanceNorm/Conv3d and the
new optimizers, on CUDA against the same computation on the CPU (values and gradients).
Skipped without a GPU."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

pytestmark = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

rng = np.random.default_rng(5)


def _pair(*shape):
    a = rng.standard_normal(shape)
    cpu = tp.tensor(a)
    cpu.requires_grad_(True)
    gpu = tp.tensor(a).to("cuda")
    gpu.requires_grad_(True)
    return cpu, gpu


def _close(gpu, cpu, tol=1e-9):
    assert gpu.device.type == "cuda"
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=tol, atol=tol)


def test_conv_transpose2d_and_conv3d_on_cuda_match_cpu():
    xc, xg = _pair(2, 4, 5, 5)
    wc, wg = _pair(4, 3, 3, 3)
    yc = F.conv_transpose2d(xc, wc, stride=2, padding=1, output_padding=1, groups=1)
    yg = F.conv_transpose2d(xg, wg, stride=2, padding=1, output_padding=1, groups=1)
    _close(yg, yc)
    yc.pow(2).sum().backward()
    yg.pow(2).sum().backward()
    _close(xg.grad, xc.grad)
    _close(wg.grad, wc.grad)
    xc, xg = _pair(1, 2, 4, 5, 5)
    wc, wg = _pair(3, 2, 2, 3, 3)
    _close(F.conv3d(xg, wg, stride=(1, 2, 1), padding=1), F.conv3d(xc, wc, stride=(1, 2, 1), padding=1))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_on_cuda_matches_cpu(mode):
    wc, wg = _pair(10, 4)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 2], dtype=np.int64)
    offs = np.array([0, 3, 3, 6], dtype=np.int64)
    yc = F.embedding_bag(tp.tensor(idx), wc, tp.tensor(offs), mode=mode, padding_idx=2)
    yg = F.embedding_bag(tp.tensor(idx).to("cuda"), wg, tp.tensor(offs).to("cuda"), mode=mode, padding_idx=2)
    _close(yg, yc)
    yc.sum().backward()
    yg.sum().backward()
    _close(wg.grad, wc.grad)


def test_instance_norm_and_lrn_on_cuda_match_cpu():
    xc, xg = _pair(2, 3, 4, 4)
    _close(F.instance_norm(xg), F.instance_norm(xc))
    _close(F.local_response_norm(xg, 3), F.local_response_norm(xc, 3), 1e-7)


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Adadelta"])
def test_optimizers_on_cuda_match_cpu(name):
    wc, wg = _pair(5, 3)
    oc, og = getattr(tp.optim, name)([wc], lr=0.05), getattr(tp.optim, name)([wg], lr=0.05)
    for _ in range(7):
        for w, o in ((wc, oc), (wg, og)):
            o.zero_grad()
            (w ** 3).sum().backward()
            o.step()
    _close(wg, wc, 1e-12)
    assert og.state[wg]["exp_avg" if name != "Adadelta" else "square_avg"].device.type == "cuda"


def test_lbfgs_on_cuda_matches_cpu():
    xc, xg = _pair(4)
    res = []
    for x in (xc, xg):
        opt = tp.optim.LBFGS([x], line_search_fn="strong_wolfe")

        def closure(x=x, opt=opt):
            opt.zero_grad()
            loss = ((x - 1) ** 2).sum() + (x ** 4).sum()
            loss.backward()
            return loss
        opt.step(closure)
        res.append(x)
    _close(res[1], res[0], 1e-9)


@pytest.mark.parametrize("make", [
    lambda ps: tp.optim.Adam(ps, lr=0.05),
    lambda ps: tp.optim.AdamW(ps, lr=0.05, amsgrad=True),
    lambda ps: tp.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True),
    lambda ps: tp.optim.Adagrad(ps, lr=0.05, initial_accumulator_value=0.1),
], ids=["adam", "adamw_amsgrad", "rmsprop_centered", "adagrad"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled_step"])
def test_adam_rmsprop_adagrad_state_lives_on_the_parameters_device(make, compiled):
    # Their state was made on the CPU whatever the parameter's device, so the
    # first step on CUDA raised a device mismatch (found by a compiled CUDA
    # training step of the H200 run).
    wc, wg = _pair(5, 3)
    oc, og = make([wc]), make([wg])
    steps = [o.step for o in (oc, og)]
    if compiled:
        steps = [tp.compile(s) for s in steps]
    for _ in range(5):
        for w, o, step in ((wc, oc, steps[0]), (wg, og, steps[1])):
            o.zero_grad()
            (w ** 3).sum().backward()
            step()
    _close(wg, wc, 1e-5)
    assert all(v.device.type == "cuda" for k, v in og.state[wg].items() if k != "step")
