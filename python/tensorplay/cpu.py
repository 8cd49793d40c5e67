"""tp.cpu: torch.cpu's spellings. `tp.cpu.amp.autocast` / `tp.cpu.amp.GradScaler` are tp.amp's
classes with device_type "cpu" fixed (as `tp.cuda.amp` fixes "cuda"); nothing is reimplemented."""


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """CPU work is synchronous: nothing to wait for."""


from .amp.device_spellings import device_amp_module as _device_amp_module  # noqa: E402

amp = _device_amp_module(__name__ + ".amp", "cpu")
