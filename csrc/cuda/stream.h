// Streams and events (Section 9.9, issue 12 item 1). Every kernel, copy and
// cuBLASLt call goes to the *current stream* of its device, kept per thread
// and per device like PyTorch's. The default is the legacy default stream
// (handle 0), so code that never touches streams behaves as before: host
// order is device order. Side streams are non-blocking driver streams from a
// per-device pool of 32 (never destroyed: a block of the caching allocator
// may still name one, and work queued on it may still be running).
//
// Capture: while this thread captures a CUDA graph, the capture stream is
// current and every operation that would synchronize the host or use
// another stream (synchronous copies, device synchronize) raises
// NotCapturable instead of silently invalidating the capture.
#pragma once
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "cuda/driver.h"

namespace tp::cuda {

// The stream the next operation on `device` goes to, for this thread.
CUstream current_stream(int device);
void set_current_stream(int device, CUstream s);
// A non-blocking stream from the device's pool (round robin).
CUstream pool_stream(int device);
// A fresh non-blocking stream owned by the caller (graph capture streams).
CUstream new_stream(int device);
void stream_synchronize(int device, CUstream s);
bool stream_query(int device, CUstream s);  // true: all its work has finished

// An event (driver handle). `timing` false gives the cheaper kind.
CUevent event_create(int device, bool timing);
void event_destroy(CUevent e);
void event_record(int device, CUevent e, CUstream s);
void event_synchronize(CUevent e);
bool event_query(CUevent e);
float event_elapsed_ms(CUevent start, CUevent end);
void stream_wait_event(int device, CUstream s, CUevent e);
// `waiter` waits (device side) for all work queued so far on `other`.
void stream_wait_stream(int device, CUstream waiter, CUstream other);
// The same across devices: `waiter` (a stream of `waiter_device`, 0 = its
// legacy stream) waits for the work queued so far on `other` of
// `other_device` (copies between GPUs order both sides with it).
void stream_wait_device(int waiter_device, CUstream waiter, int other_device, CUstream other);

// Raised by an operation that cannot be recorded into a CUDA graph.
struct NotCapturable : Error {
  using Error::Error;
};
// True while this thread captures a graph.
bool capturing();
void set_capturing(bool on);
// Throws NotCapturable naming `what` while this thread captures.
void check_not_capturing(const char* what);

// The driver API is required for side streams; raises when it lacks them.
void require_streams(const char* what);

}  // namespace tp::cuda
