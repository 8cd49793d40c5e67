// A small pool of compile workers (Section 11.2: submit every compilation,
// then wait for all). The external compiler is a subprocess, so threads give
// real parallelism; the pool has as many workers as the machine has hardware
// threads (at least 2, at most 8). Tasks must not reach Python: they defer
// their warnings (core/warning.h) and hand them to the thread that waits.
#pragma once
#include <functional>

namespace tp::stax::runtime {

// Runs `task` on a pool worker; it must not throw (catch and hand over).
void submit_build(std::function<void()> task);
int compile_pool_size();

}  // namespace tp::stax::runtime
