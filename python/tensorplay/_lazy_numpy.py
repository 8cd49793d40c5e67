"""NumPy, imported when an interop function first needs it (tp.from_numpy,
Tensor.numpy(), tp.tensor of a list or an array, printing, save/load), not by
`import tensorplay`: importing NumPy costs ~40 ms and its OpenBLAS starts
threads that spin beside ours.

`np` is a stand-in whose first attribute access imports NumPy, so a module
keeps writing `np.float64`. A type test must not import NumPy for a value that
cannot be NumPy's: `is_ndarray` / `is_numpy_value` look NumPy up in
sys.modules (an array exists only once NumPy has been imported)."""
import sys


class _LazyNumpy:
    __slots__ = ()

    def __getattr__(self, name):
        import numpy  # the first use imports it; later ones find it in sys.modules

        return getattr(numpy, name)


np = _LazyNumpy()


def is_ndarray(x) -> bool:
    mod = sys.modules.get("numpy")
    return mod is not None and isinstance(x, mod.ndarray)


def is_numpy_value(x) -> bool:
    """A NumPy array or a NumPy scalar (np.float32(1), np.bool_(True))."""
    mod = sys.modules.get("numpy")
    return mod is not None and isinstance(x, (mod.ndarray, mod.generic))
