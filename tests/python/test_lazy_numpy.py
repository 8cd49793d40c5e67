"""`import tensorplay` does not import NumPy (~40 ms, and OpenBLAS threads that
spin): NumPy is imported when an interop function first needs it. Each check runs
in a new interpreter, where nothing else has imported NumPy yet."""
import os
import subprocess
import sys
import textwrap


def run(code, tmp_path):
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_import_and_a_compiled_call_do_not_import_numpy(tmp_path):
    got = run("""
        import sys
        import tensorplay as tp
        print("numpy" in sys.modules)
        f = tp.compile(lambda x, w: ((x + w).relu() * 2).sum(-1), strict_native=True)
        y = f(tp.randn(4, 8), tp.randn(8))
        g = tp.compile(lambda x: x.exp().sum(-1), dynamic=True, strict_native=True)
        g(tp.randn(3, 5)), g(tp.randn(4, 7))
        m = tp.nn.Linear(8, 3)
        m(tp.randn(2, 8)).sum().backward()
        print(float(y.sum()) == float(y.sum()), "numpy" in sys.modules)
    """, tmp_path)
    assert got == ["False", "True", "False"]


def test_numpy_interop_after_a_lazy_import(tmp_path):
    got = run("""
        import sys
        import tensorplay as tp
        assert "numpy" not in sys.modules
        import numpy as np
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = tp.from_numpy(a)
        assert t.dtype == tp.float32 and t.numpy().tolist() == a.tolist()
        assert np.asarray(t * 2).tolist() == (a * 2).tolist()          # __array__
        assert tp.tensor(a).dtype == tp.float32                         # construction from an ndarray
        assert tp.as_tensor(a).dtype == tp.float32
        assert tp.tensor([np.float64(1.5), 2]).dtype == tp.float64      # NumPy scalars keep their dtype
        assert tp.tensor([np.bool_(True), False]).dtype == tp.bool
        print(repr(tp.tensor([1.5, 2.0])).replace(" ", ""))
        print(tp.tensor([[1, 2]]).tolist() == [[1, 2]])
    """, tmp_path)
    assert got == ["tensor([1.5000,2.0000])", "True"]


def test_save_load_and_state_dict_arrays_import_numpy_on_use(tmp_path):
    got = run(f"""
        import sys
        import tensorplay as tp
        t = tp.arange(5, dtype=tp.bfloat16)
        tp.save({{"t": t}}, {str(tmp_path / "x.tp")!r})
        print("numpy" in sys.modules)
        back = tp.load({str(tmp_path / "x.tp")!r})["t"]
        print(back.dtype == tp.bfloat16, back.float().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0])
        import numpy as np
        m = tp.nn.Linear(2, 1)
        m.load_state_dict({{"weight": np.ones((1, 2), dtype=np.float32), "bias": np.zeros(1, dtype=np.float32)}})
        print(m.weight.tolist() == [[1.0, 1.0]])
    """, tmp_path)
    assert got == ["True", "True", "True", "True"]
