// Device-side status of checked kernels (the integer-indexed operators of
// cuda/index_kernels.cpp): a kernel that meets an index out of range clamps
// it (never reads or writes outside its buffers) and records the first one in
// a status buffer of three int64 on the device: [0] set once (a CAS), [1] the
// bad value, [2] the launch's site tag (operator, dim, size; status_site).
//
// When the status is read, as PyTorch users expect of device-side errors but
// without poisoning the context:
// - eagerly (and in compiled regions launched kernel by kernel) each launch
//   has its own zeroed buffer, read right after the kernel: the IndexError is
//   raised by the call that caused it (the read-back synchronizes);
// - while a CUDA graph is captured nothing may synchronize, so the checked
//   launches of one capture share one buffer, zeroed by a memset recorded
//   before the first of them; the graph keeps it and reads it after each
//   replay (cuda/graph.cpp): one read-back per replay, not per kernel, and
//   the IndexError comes from replay(), naming the operator, index and size.
#pragma once
#include <string>

#include "core/tensor.h"

namespace tp::cuda {

// The tag a kernel records for a bad index of operator `op` along `dim` of `size`.
long long status_site(const std::string& op, int64_t dim, int64_t size);

// The status buffer for the next checked launch on device `dev`: a fresh
// zeroed one, or the current capture's shared one.
Tensor launch_status(int dev);

// After the launch: reads the status and raises IndexError, unless this
// thread captures a graph (then the graph reads it after each replay).
void check_launch_status(const Tensor& status);

// Reads a status buffer (synchronizes) and raises IndexError for a recorded bad index.
void raise_if_recorded(const Tensor& status);

// The shared buffer of the capture this thread is ending (undefined when no
// checked kernel was recorded); the next capture starts without one.
Tensor take_capture_status() noexcept;

}  // namespace tp::cuda
