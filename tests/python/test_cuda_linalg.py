"""tp.linalg on CUDA tensors: the LAPACK primitives run on host copies
(cuda/host_kernels.cpp) and everything composed above them (inv, det, pinv,
norms, derivative formulas, compiled regions) stays on the device. Results,
gradients and errors equal the CPU's."""
import numpy as np
import pytest

import tensorplay as tp

pytestmark = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")


def _spd(a):
    return a @ a.mT + 3 * tp.eye(a.shape[-1], dtype=a.dtype, device=a.device)


CASES = {
    "inv": lambda a: tp.linalg.inv(_spd(a)),
    "det": lambda a: tp.linalg.det(a),
    "slogdet": lambda a: tp.linalg.slogdet(a)[1],
    "logdet": lambda a: tp.logdet(_spd(a)),
    "solve": lambda a: tp.linalg.solve(_spd(a), a[..., :2]),
    "solve_vector": lambda a: tp.linalg.solve(_spd(a), a[..., 0]),
    "cholesky": lambda a: tp.linalg.cholesky(_spd(a)),
    "qr_Q": lambda a: tp.linalg.qr(a)[0].abs(),  # signs are LAPACK's on both devices; abs for the gradient check
    "qr_R": lambda a: tp.linalg.qr(a)[1].abs(),
    "eigh": lambda a: tp.linalg.eigh(a + a.mT)[0],
    "eigvalsh": lambda a: tp.linalg.eigvalsh(a + a.mT),
    "svdvals": lambda a: tp.linalg.svdvals(a),
    "pinv": lambda a: tp.linalg.pinv(_spd(a)),
    "matrix_rank": lambda a: tp.linalg.matrix_rank(a).to(a.dtype),
    "nuclear_norm": lambda a: tp.linalg.matrix_norm(a, "nuc"),
    "spectral_norm": lambda a: tp.linalg.matrix_norm(a, 2),
    "lstsq": lambda a: tp.linalg.lstsq(a[..., :3], a[..., :1]).solution,
    "matrix_power": lambda a: tp.linalg.matrix_power(_spd(a), -2),
    "inv_ex": lambda a: tp.linalg.inv_ex(_spd(a))[0],
    "cholesky_ex": lambda a: tp.linalg.cholesky_ex(_spd(a))[0],
}
NO_GRAD = {"matrix_rank"}


def _inputs(shape=(2, 4, 4), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return a


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_equals_cpu(name):
    fn = CASES[name]
    a = _inputs()
    cpu = fn(tp.from_numpy(a))
    gpu = fn(tp.from_numpy(a).cuda())
    assert gpu.device.type == "cuda", name
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_GRAD))
def test_cuda_gradients_equal_cpu(name):
    fn = CASES[name]
    a = _inputs(seed=1)
    x = tp.from_numpy(a).requires_grad_(True)
    y = tp.from_numpy(a).cuda().requires_grad_(True)
    fn(x).sum().backward()
    fn(y).sum().backward()
    assert y.grad.device.type == "cuda"
    np.testing.assert_allclose(y.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("name", ["inv", "det", "solve", "cholesky", "eigh", "svdvals", "pinv", "lstsq"])
def test_cuda_compiled_equals_eager(name):
    fn = CASES[name]
    a = _inputs(seed=2)
    x = tp.from_numpy(a).cuda().requires_grad_(True)
    y = tp.from_numpy(a).cuda().requires_grad_(True)
    e = fn(x)
    c = tp.compile(fn)(y)
    assert c.device.type == "cuda"
    np.testing.assert_allclose(c.detach().cpu().numpy(), e.detach().cpu().numpy(), rtol=1e-9, atol=1e-10)
    e.sum().backward()
    c.sum().backward()
    np.testing.assert_allclose(y.grad.cpu().numpy(), x.grad.cpu().numpy(), rtol=1e-8, atol=1e-9)


def test_cuda_singular_matrix_raises_linalg_error():
    a = tp.zeros((3, 3), dtype=tp.float64).cuda()
    with pytest.raises(tp.linalg.LinAlgError, match="inv"):
        tp.linalg.inv(a)
    info = tp.linalg.inv_ex(a).info
    assert info.device.type == "cuda" and int(info.item()) > 0


def test_cuda_forward_mode():
    a = tp.from_numpy(_inputs(seed=3))
    t = tp.from_numpy(_inputs(seed=4))
    p_cpu, t_cpu = tp.func.jvp(lambda m: tp.linalg.eigvalsh(m + m.mT), (a,), (t,))
    p_gpu, t_gpu = tp.func.jvp(lambda m: tp.linalg.eigvalsh(m + m.mT), (a.cuda(),), (t.cuda(),))
    np.testing.assert_allclose(t_gpu.cpu().numpy(), t_cpu.numpy(), rtol=1e-8, atol=1e-9)
