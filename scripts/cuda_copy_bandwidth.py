"""Copy bandwidth through TensorPlay's CUDA allocator and copies (prints GB/s).

Device to device: y.copy_(x) for 256 MiB (bytes read + written counted once
each, as PyTorch's benchmarks do: 2 * size / time); host to device and device
to host: pageable copies of the same size."""
import time

import tensorplay as tp

if not tp.cuda.is_available():
    raise SystemExit("no CUDA GPU")
n = (256 << 20) // 4
x = tp.ones(n, device="cuda")
y = tp.empty(n, device="cuda")
for _ in range(3):
    y.copy_(x)
tp.cuda.synchronize()
reps = 50
t0 = time.perf_counter()
for _ in range(reps):
    y.copy_(x)
tp.cuda.synchronize()
dt = (time.perf_counter() - t0) / reps
print(f"d2d 256 MiB: {dt * 1e3:.3f} ms, {2 * (256 << 20) / dt / 1e9:.0f} GB/s (read + write)")
h = tp.ones(n)
t0 = time.perf_counter()
for _ in range(5):
    d = h.cuda()
tp.cuda.synchronize()
dt = (time.perf_counter() - t0) / 5
print(f"h2d 256 MiB pageable: {(256 << 20) / dt / 1e9:.1f} GB/s")
t0 = time.perf_counter()
for _ in range(5):
    d.cpu()
dt = (time.perf_counter() - t0) / 5
print(f"d2h 256 MiB pageable: {(256 << 20) / dt / 1e9:.1f} GB/s")
p = h.pin_memory()
p.cuda()
tp.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(5):
    d = p.cuda(non_blocking=True)
tp.cuda.synchronize()
dt = (time.perf_counter() - t0) / 5
print(f"h2d 256 MiB pinned, non_blocking: {(256 << 20) / dt / 1e9:.1f} GB/s")
x2 = tp.ones(n, device="cuda")
for _ in range(3):
    x2 + x2
tp.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(20):
    x2 + x2
tp.cuda.synchronize()
dt = (time.perf_counter() - t0) / 20
print(f"add 64M float32 (NVRTC kernel): {dt * 1e3:.3f} ms, {3 * (256 << 20) / dt / 1e9:.0f} GB/s")
print("allocated", tp.cuda.memory_allocated(), "reserved", tp.cuda.memory_reserved(),
      "kernels compiled", tp.cuda._rt.compiled_kernel_count())
