#include "cuda/stream.h"

#include <array>
#include <mutex>
#include <vector>

#include "cuda/device_status.h"

namespace tp::cuda {
namespace {

constexpr int kPoolSize = 32;

// Per thread: the current stream of each device (0 = legacy default stream).
std::vector<CUstream>& current() {
  thread_local std::vector<CUstream> v;
  return v;
}
thread_local bool t_capturing = false;

struct Pool {
  std::array<CUstream, kPoolSize> streams{};
  unsigned next = 0;
};
std::mutex g_pool_mutex;
std::vector<Pool>& pools() {
  static auto* v = new std::vector<Pool>();  // leaked: streams live for the process
  return *v;
}

}  // namespace

void require_streams(const char* what) {
  if (!driver().initialized) throw_unavailable(what);
  TP_CHECK(driver().has_streams, Error, what, ": the CUDA driver lacks the stream/event entry points");
}

CUstream current_stream(int device) {
  auto& v = current();
  return device >= 0 && static_cast<size_t>(device) < v.size() ? v[static_cast<size_t>(device)] : nullptr;
}

void set_current_stream(int device, CUstream s) {
  auto& v = current();
  if (static_cast<size_t>(device) >= v.size()) v.resize(static_cast<size_t>(device) + 1, nullptr);
  v[static_cast<size_t>(device)] = s;
}

CUstream new_stream(int device) {
  require_streams("cuda.Stream");
  activate(device);
  CUstream s = nullptr;
  check(driver().cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
  return s;
}

CUstream pool_stream(int device) {
  require_streams("cuda.Stream");
  activate(device);
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  auto& p = pools();
  if (p.empty()) p.resize(static_cast<size_t>(device_count()));
  Pool& pool = p.at(static_cast<size_t>(device));
  CUstream& s = pool.streams[pool.next++ % kPoolSize];
  if (!s) check(driver().cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
  return s;
}

void stream_synchronize(int device, CUstream s) {
  check_not_capturing("Stream.synchronize");
  activate(device);
  if (!s) {
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  } else {
    check(driver().cuStreamSynchronize(s), "cuStreamSynchronize");
  }
  note_host_sync();
  report_device_status();  // a synchronization point of the checked index kernels
}

bool stream_query(int device, CUstream s) {
  require_streams("Stream.query");
  activate(device);
  const CUresult r = driver().cuStreamQuery(s);
  if (r == kErrorNotReady) return false;
  check(r, "cuStreamQuery");
  return true;
}

CUevent event_create(int device, bool timing) {
  require_streams("cuda.Event");
  activate(device);
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, timing ? 0u : kEventDisableTiming), "cuEventCreate");
  return e;
}

void event_destroy(CUevent e) {
  // Called from destructors (possibly at exit): errors are ignored.
  if (e && driver().cuEventDestroy) driver().cuEventDestroy(e);
}

void event_record(int device, CUevent e, CUstream s) {
  activate(device);
  check(driver().cuEventRecord(e, s), "cuEventRecord");
}

void event_synchronize(CUevent e) {
  check_not_capturing("Event.synchronize");
  check(driver().cuEventSynchronize(e), "cuEventSynchronize");
  note_host_sync();
  report_device_status();  // a synchronization point of the checked index kernels
}

bool event_query(CUevent e) {
  const CUresult r = driver().cuEventQuery(e);
  if (r == kErrorNotReady) return false;
  check(r, "cuEventQuery");
  return true;
}

float event_elapsed_ms(CUevent start, CUevent end) {
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start, end), "Event.elapsed_time (cuEventElapsedTime)");
  return ms;
}

void stream_wait_event(int device, CUstream s, CUevent e) {
  activate(device);
  check(driver().cuStreamWaitEvent(s, e, 0), "cuStreamWaitEvent");
}

namespace {
// One marker event per thread and device, re-recorded for every wait: a wait
// captures the event's state when it is queued, so reusing it is safe.
CUevent marker(int device) {
  thread_local std::vector<CUevent> events;
  if (static_cast<size_t>(device) >= events.size()) events.resize(static_cast<size_t>(device) + 1, nullptr);
  CUevent& e = events[static_cast<size_t>(device)];
  if (!e) e = event_create(device, false);
  return e;
}
}  // namespace

void stream_wait_stream(int device, CUstream waiter, CUstream other) {
  stream_wait_device(device, waiter, device, other);
}

void stream_wait_device(int waiter_device, CUstream waiter, int other_device, CUstream other) {
  if (waiter_device == other_device && waiter == other) return;
  require_streams("Stream.wait_stream");
  // The event belongs to the recorded stream's device; a stream of another
  // device may wait for it (cuStreamWaitEvent allows that).
  CUevent e = marker(other_device);
  event_record(other_device, e, other);
  stream_wait_event(waiter_device, waiter, e);
}

bool capturing() { return t_capturing; }
void set_capturing(bool on) { t_capturing = on; }
void check_not_capturing(const char* what) {
  if (t_capturing)
    throw NotCapturable(str(what, " cannot run while a CUDA graph is being captured (it synchronizes the host)"));
}

}  // namespace tp::cuda
