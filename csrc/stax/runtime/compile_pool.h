// A small pool of compile workers (Section 11.2: submit every compilation,
// then wait for all). The external compiler is a subprocess, so threads give
// real parallelism; the pool has as many workers as the machine has hardware
// threads (at least 2, at most 8). Tasks must not reach Python: they defer
// their warnings (core/warning.h) and hand them to the thread that waits.
#pragma once
#include <cstddef>
#include <functional>

namespace tp::stax::runtime {

// Runs `task` on a pool worker; it must not throw (catch and hand over).
void submit_build(std::function<void()> task);
int compile_pool_size();

// Runs task(0) .. task(n-1) and returns when all have ended; then rethrows
// the exception of the lowest index that threw, if any. The calling thread
// claims tasks until none is left; pool workers with nothing queued for a
// short grace period steal one task at a time (then look at the queue
// again), so a build queued meanwhile -- the forward region a training step
// waits for first -- never waits behind this run's tasks. The caller never
// waits for a task still queued: no deadlock when it is a pool worker itself
// (a background region build compiling its translation units). Warnings
// raised by tasks on workers are reported with warn() on the calling thread,
// in task order.
void run_parallel(size_t n, const std::function<void(size_t)>& task);

}  // namespace tp::stax::runtime
