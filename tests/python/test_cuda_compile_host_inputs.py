"""Compiled CUDA regions given host values eager accepts beside device tensors
(found by the compiled OpInfo walk on the H200): an index built from a Python
list and saved for indexing's backward, and item() of a CUDA tensor during
capture."""
import numpy as np
import pytest

import tensorplay as tp

cuda = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("fn", [
    lambda x: x[[0, 2]].sin().sum(),
    lambda x: x[[0, 2], [1, 1]].sum(),
    lambda x: tp.diag(x).exp().sum(),
])
def test_compiled_backward_with_host_index(fn):
    xa = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    x = tp.from_numpy(xa).cuda().requires_grad_(True)
    y = tp.from_numpy(xa).cuda().requires_grad_(True)
    a, b = tp.compile(fn)(x), fn(y)
    a.backward()
    b.backward()
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.cpu().numpy(), y.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)


@cuda
def test_item_of_a_cuda_tensor_in_a_compiled_function():
    x = tp.tensor([1.5, 2.0]).cuda()
    f = tp.compile(lambda t: t * t[0].item())
    np.testing.assert_allclose(f(x).cpu().numpy(), (x * 1.5).cpu().numpy())
    n = tp.compile(lambda a, b: tp.linspace(a, b, 5))
    np.testing.assert_allclose(n(tp.tensor(0.0).cuda(), tp.tensor(1.0).cuda()).cpu().numpy(),
                               np.linspace(0, 1, 5), rtol=1e-6)
