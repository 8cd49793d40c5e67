// Device-side status of checked kernels (the integer-indexed operators of
// cuda/index_kernels.cpp): a kernel that meets an index out of range clamps
// it (never reads or writes outside its buffers) and records the first one.
//
// The status is asynchronous (issue 12): a checked launch costs no host
// synchronization. Each device has one status for the process:
// - a device word of four int64: [0] set once by a CAS (so exactly one thread
//   records), [1] the bad value, [2] the launch's site tag (operator and dim;
//   status_site), [3] the address of the host mirror;
// - the host mirror, four int64 in page-locked host memory that the device
//   addresses directly (unified addressing): the thread that wins the CAS
//   writes value, tag and the dim's size there, fences (system scope), then
//   sets the flag [0].
// The host reads the mirror with plain loads, so checking costs nothing and
// needs no copy: report_device_status() runs at the natural synchronization
// points (tp.cuda.synchronize, stream/event synchronize, every download —
// .cpu(), .item(), .numpy(), repr —, a CUDA graph replay) and raises a
// RuntimeError naming the operator, the index and the size; the status is
// then cleared, so later calls work (the error is recoverable). A recorded
// error still pending at exit is printed (tensorplay/cuda.py).
//
// Synchronous mode, for debugging (env TP_CUDA_SYNC_CHECKS=1 or
// tp.cuda.set_sync_checks(True)): each checked launch synchronizes its
// stream and raises IndexError from the call that caused it, as the CPU
// does; a CUDA graph replay synchronizes and raises from replay().
//
// CUDA graph captures record launches that address the same device word, so
// replays need no memset; Graph::begin_capture prepares the word first (it
// is allocated outside every capture and the caching allocator).
#pragma once
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace tp::cuda {

// The asynchronous report (a RuntimeError): raised by whichever operation
// synchronizes, its message names the operator that met the bad index, so
// the binding passes it on unrenamed.
struct DeviceIndexError : Error {
  using Error::Error;
};

// The tag a kernel records for a bad index of operator `op` along `dim` (of
// `size`, which the kernel records itself: it is not part of the tag, so the
// table keeps one entry per (operator, dim) however many sizes pass, at most
// 1024). Called on every checked launch: a site already seen is found without
// a lock (a fixed open-addressing table whose entries are published once).
long long status_site(const std::string& op, int64_t dim, int64_t size);
// Entries in the site table (a test hook: many sizes must not grow it).
long long status_site_count();

// The device code every checked kernel includes: tp_bad(bad, v, tag, size)
// records a bad value, tp_pos(v, size, neg, bad, tag, ok) checks one index
// (clamped to 0).
const char* status_device_code();

// The status word (four int64 on device `dev`, see above) a checked launch
// passes to its kernel as `long long* bad` (lock-free once the device has one).
Tensor launch_status(int dev);
// Creates the device's status (outside a capture; Graph::begin_capture).
void prepare_status(int dev);

// After a checked launch: nothing in asynchronous mode; in synchronous mode
// (not while capturing) synchronizes the current stream and raises IndexError.
void check_launch_status(const Tensor& status);

// At a synchronization point: raises RuntimeError for a bad index recorded by
// a finished kernel on any device, and clears the status.
void report_device_status();
// The same as text without raising (empty: none); clears it. For exit.
std::string take_device_status();

// Synchronous checks (debugging); the default comes from TP_CUDA_SYNC_CHECKS.
bool sync_checks();
void set_sync_checks(bool on);

// Host synchronizations made so far by the CUDA layer (device, stream and
// event synchronize, downloads, synchronous checks): tests show that checked
// launches make none.
long long host_sync_count();
void note_host_sync();

}  // namespace tp::cuda
