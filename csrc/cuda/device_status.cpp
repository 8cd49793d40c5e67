#include "cuda/device_status.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

struct Site {
  std::string op;
  int64_t dim, size;
};

// One device's status: the word kernels CAS (device memory, never freed: a
// captured graph may address it for the rest of the process) and its host mirror.
struct Status {
  CUdeviceptr word = 0;
  volatile long long* host = nullptr;
  Tensor view;  // the word as a CUDA tensor of four int64 (not owned)
};

std::mutex g_mutex;  // sites and statuses
std::vector<Site>& sites() {
  static auto* v = new std::vector<Site>();
  return *v;
}
std::map<std::tuple<std::string, int64_t, int64_t>, long long>& site_ids() {
  static auto* m = new std::map<std::tuple<std::string, int64_t, int64_t>, long long>();
  return *m;
}
std::vector<Status>& statuses() {
  static auto* v = new std::vector<Status>();
  return *v;
}

std::atomic<long long> g_host_syncs{0};

std::atomic<int>& sync_flag() {  // -1: not read from the environment yet
  static std::atomic<int> f{-1};
  return f;
}

Status* find_status(int dev) {
  auto& v = statuses();
  return static_cast<size_t>(dev) < v.size() && v[static_cast<size_t>(dev)].word ? &v[static_cast<size_t>(dev)]
                                                                                  : nullptr;
}

// The message of a recorded bad index (caller holds g_mutex).
std::string site_message(long long value, long long tag) {
  TP_CHECK(tag >= 0 && static_cast<size_t>(tag) < sites().size(), Error,
           "device status: a bad index with an unknown site tag ", tag);
  const Site& s = sites()[static_cast<size_t>(tag)];
  return str(s.op, ": index ", value, " is out of bounds for dimension ", s.dim, " with size ", s.size);
}

// Reads and clears one device's recorded bad index (caller holds g_mutex and
// has made sure the recording kernels finished, or accepts missing running ones).
bool take_locked(int dev, Status& st, std::string& msg) {
  if (st.host[0] == 0) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  const long long value = st.host[1], tag = st.host[2];
  st.host[0] = 0;
  // The device flag too, so that the next bad index is recorded. Ordered after
  // every finished kernel; waited for, so that no later launch on a side stream
  // finds the flag still set (an error path: its cost does not matter).
  {
    DeviceGuard guard;
    activate(dev);
    check(driver().cuMemsetD8Async(st.word, 0, sizeof(long long), nullptr), "device status");
    check(driver().cuStreamSynchronize(nullptr), "device status");
  }
  msg = site_message(value, tag);
  return true;
}

// Takes the first recorded bad index of any device (empty: none); `dev` out.
std::string take_any(int& dev) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& v = statuses();
  for (size_t d = 0; d < v.size(); ++d) {
    if (!v[d].word) continue;
    std::string msg;
    if (take_locked(static_cast<int>(d), v[d], msg)) {
      dev = static_cast<int>(d);
      return msg;
    }
  }
  return {};
}

}  // namespace

long long status_site(const std::string& op, int64_t dim, int64_t size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto [it, fresh] = site_ids().try_emplace({op, dim, size}, static_cast<long long>(sites().size()));
  if (fresh) sites().push_back({op, dim, size});
  return it->second;
}

const char* status_device_code() {
  return "__device__ __forceinline__ void tp_bad(long long* bad, long long v, long long tag) {\n"
         "  if (atomicCAS((unsigned long long*)bad, 0ull, 1ull) == 0ull) {\n"
         "    bad[1] = v; bad[2] = tag;\n"
         "    volatile long long* h = (volatile long long*)bad[3];\n"  // the host mirror
         "    h[1] = v; h[2] = tag;\n    __threadfence_system();\n    h[0] = 1;\n  }\n}\n"
         // The checked position of index value v along a dim of `size` (bad: recorded, 0 returned).
         "__device__ __forceinline__ long long tp_pos(long long v, long long size, long long neg, long long* bad, "
         "long long tag, bool& ok) {\n"
         "  const long long w = (neg && v < 0) ? v + size : v;\n"
         "  ok = w >= 0 && w < size;\n"
         "  if (!ok) { tp_bad(bad, v, tag); return 0; }\n"
         "  return w;\n}\n";
}

void prepare_status(int dev) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& v = statuses();
  if (v.size() <= static_cast<size_t>(dev)) v.resize(static_cast<size_t>(dev) + 1);
  Status& st = v[static_cast<size_t>(dev)];
  if (st.word) return;
  check_not_capturing("creating the device status of checked index kernels");
  DeviceGuard guard;
  activate(dev);
  void* host = nullptr;
  check(driver().cuMemAllocHost(&host, 4 * sizeof(long long)), "device status (cuMemAllocHost)");
  std::memset(host, 0, 4 * sizeof(long long));
  CUdeviceptr word = 0;
  check(driver().cuMemAlloc(&word, 4 * sizeof(long long)), "device status (cuMemAlloc)");
  // Unified addressing: the page-locked block's host address is its device address.
  const long long init[4] = {0, 0, 0, static_cast<long long>(reinterpret_cast<uintptr_t>(host))};
  check(driver().cuMemcpyHtoD(word, init, sizeof(init)), "device status");
  check(driver().cuCtxSynchronize(), "device status");  // once per device: the word is set before any launch
  note_host_sync();
  auto impl = std::make_shared<TensorImpl>();
  Device d;
  d.kind = Device::Kind::CUDA;
  d.index = dev;
  impl->storage = StorageImpl::wrap(reinterpret_cast<void*>(word), sizeof(init), [] {}, d);
  impl->sizes = {4};
  impl->strides = {1};
  impl->dtype = DType::Int64;
  st.view = Tensor(std::move(impl));
  st.host = static_cast<volatile long long*>(host);
  st.word = word;
}

Tensor launch_status(int dev) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (Status* st = find_status(dev)) return st->view;
  }
  if (capturing())
    throw NotCapturable(str("a checked index kernel on cuda:", dev,
                            " in a CUDA graph captured on another device (its status was not prepared)"));
  prepare_status(dev);
  std::lock_guard<std::mutex> lock(g_mutex);
  return find_status(dev)->view;
}

void check_launch_status(const Tensor& status) {
  if (capturing() || !sync_checks()) return;
  const int dev = status.device().index;
  {
    DeviceGuard guard;
    activate(dev);
    check(driver().cuStreamSynchronize(current_stream(dev)), "cuStreamSynchronize");
    note_host_sync();
  }
  std::string msg;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    Status* st = find_status(dev);
    if (!st || !take_locked(dev, *st, msg)) return;
  }
  throw IndexError(msg);
}

void report_device_status() {
  int dev = 0;
  const std::string msg = take_any(dev);
  if (msg.empty()) return;
  throw DeviceIndexError(str(msg, " (an out-of-bounds index found on cuda:", dev,
                  " by a kernel launched earlier; checked indices are reported at the next synchronization; "
                  "TP_CUDA_SYNC_CHECKS=1 or tp.cuda.set_sync_checks(True) raises it at the call)"));
}

std::string take_device_status() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& v = statuses();
    for (size_t d = 0; d < v.size(); ++d) {
      if (!v[d].word) continue;
      DeviceGuard guard;
      activate(static_cast<int>(d));
      if (driver().cuCtxSynchronize() != 0) return {};  // a broken context at exit: nothing to say
    }
  }
  int dev = 0;
  return take_any(dev);
}

bool sync_checks() {
  int f = sync_flag().load(std::memory_order_relaxed);
  if (f < 0) {
    const char* e = std::getenv("TP_CUDA_SYNC_CHECKS");
    f = e && *e && std::strcmp(e, "0") != 0 ? 1 : 0;
    int expected = -1;
    sync_flag().compare_exchange_strong(expected, f);
    f = sync_flag().load();
  }
  return f == 1;
}

void set_sync_checks(bool on) { sync_flag().store(on ? 1 : 0); }

long long host_sync_count() { return g_host_syncs.load(std::memory_order_relaxed); }
void note_host_sync() { g_host_syncs.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tp::cuda
