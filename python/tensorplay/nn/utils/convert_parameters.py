"""Flattening a model's parameters into one vector and back (e.g. for second-order or
evolutionary optimizers that work on a single flat vector)."""
import tensorplay as _tp
from ..._grad_mode import no_grad


def _check_same_device(fn, param, device):
    if device is not None and param.device != device:
        raise TypeError(f"{fn}: found two parameters on different devices ({device} and {param.device}); "
                        "all parameters must be on the same device")
    return param.device


def parameters_to_vector(parameters):
    """The parameters, each flattened, concatenated into one 1-D tensor (differentiable)."""
    device, parts = None, []
    for param in parameters:
        device = _check_same_device("parameters_to_vector", param, device)
        parts.append(param.reshape(-1))
    if not parts:
        raise RuntimeError("parameters_to_vector: expected at least one parameter")
    return _tp.cat(parts)


def vector_to_parameters(vec, parameters):
    """Writes consecutive slices of the 1-D `vec` into the parameters, in order (no autograd record)."""
    if not isinstance(vec, _tp.Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, but got {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.numel() != total:
        raise RuntimeError(f"vector_to_parameters: vec must be 1-D with {total} elements (the parameters' total), "
                           f"got shape {tuple(vec.shape)}")
    device, offset = None, 0
    with no_grad():
        for param in params:
            device = _check_same_device("vector_to_parameters", param, device)
            n = param.numel()
            param.data = vec[offset:offset + n].reshape(list(param.shape)).clone()
            offset += n
