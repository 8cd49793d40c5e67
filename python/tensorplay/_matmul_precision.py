"""tp.set_float32_matmul_precision / get_float32_matmul_precision: the spelling of
tp.backends.cuda.matmul.allow_tf32 PyTorch code uses."""
import sys


def _tp():
    return sys.modules[__package__]


_MATMUL_PRECISION = ["highest"]


def set_float32_matmul_precision(precision):
    """'highest' (full float32 GEMMs), 'high' or 'medium' (TF32 allowed on CUDA: the setting of
    tp.backends.cuda.matmul.allow_tf32). CPU GEMMs are float32 in every case."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _MATMUL_PRECISION[0] = precision
    _tp().backends.cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    if _MATMUL_PRECISION[0] == "highest" and _tp().backends.cuda.matmul.allow_tf32:
        return "high"
    return _MATMUL_PRECISION[0]


def install():
    tp = _tp()
    for name in ("set_float32_matmul_precision", "get_float32_matmul_precision"):
        if not hasattr(tp, name):
            setattr(tp, name, globals()[name])
