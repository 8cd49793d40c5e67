"""Factories inside a compiled function over CUDA tensors put their results
where eager does (found by the compiled OpInfo walk on the H200): on the
input's device by default (new_*), on the host for device="cpu" (a CUDA region
cannot return a host tensor: it runs eagerly then), and new_tensor of a list
is a constant of the target device."""
import numpy as np
import pytest

import tensorplay as tp

pytestmark = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")

CASES = {
    "new_zeros": lambda x: x.new_zeros(3, 4) + x.sum(),
    "new_ones_tuple": lambda x: x.new_ones((2,)) * 2,
    "new_full": lambda x: x.new_full((2, 2), 3.0),
    "new_empty_shape": lambda x: x.new_empty((2, 3)).shape[0] * x,
    "new_tensor": lambda x: x.new_tensor([1.0, 2.0]) * x[:2, 0],
    "new_full_host": lambda x: x.new_full((1, 1, 12), 3.5, device="cpu"),
    "new_zeros_host": lambda x: x.new_zeros(3, device="cpu"),
    "zeros_host_and_device": lambda x: (tp.zeros(2), x * 2),
    "zeros_on_device": lambda x: tp.zeros(3, device=x.device) + x[0, :3],
    "new_full_dtype": lambda x: x.new_full((5,), 2, dtype=tp.float64),
    "empty_input": lambda x: x[:0].new_ones((3, 2, 2)),
    "scalar_input": lambda x: x[0, 0].new_full((), -1.5),
    "fill_": lambda x: x.clone().fill_(2.0),  # functionalized into a factory: still on x's device
    "zero_": lambda x: x.clone().zero_() + x,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_factory_device_and_values(name):
    fn = CASES[name]
    x = tp.from_numpy(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)).cuda()
    compiled = tp.compile(fn, options={"warn_fallback": False})
    for _ in range(2):  # the capture and the compiled call
        want, got = fn(x), compiled(x)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for w, g in zip(want, got):
            assert g.device == w.device, name
            assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), name
            if name != "new_empty_shape":  # sums may be reassociated in generated code
                np.testing.assert_allclose(g.cpu().numpy(), w.cpu().numpy(), rtol=1e-6)
