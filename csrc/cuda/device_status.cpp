#include "cuda/device_status.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

// One checked call site: the operator and the dim its index runs along. The
// size is not part of the key (the kernel records it with the bad value), so
// the table holds one entry per (operator, dim) however many sizes pass.
struct Site {
  std::string op;
  int64_t dim = 0;
};

// The site table: open addressing in a fixed array, read without a lock. An
// entry is written once, under g_mutex, and then published by the release
// store of its slot's tag; a reader that finds the tag (acquire) sees the
// entry, so a launch from a site already seen takes no lock. At most
// kMaxSites entries (a bound on the process's memory whatever the sizes);
// past it a site shares the catch-all entry 0 (never reached in practice:
// the operators with checked kernels times their dims are a few hundred at most).
constexpr int kSlots = 2048;  // a power of two, at most half full
constexpr int kMaxSites = kSlots / 2;
struct Slot {
  std::atomic<long long> tag{-1};  // -1: empty; else the entry's index in g_sites
  uint64_t hash = 0;
};
Slot g_slots[kSlots];
// Never destroyed (a launch at exit may still look a site up); entry 0 is the catch-all.
Site* const g_sites = [] {
  Site* s = new Site[kMaxSites];
  s[0] = {"a checked CUDA index kernel", -1};
  return s;
}();
std::atomic<int> g_site_count{1};

// One device's status: the word kernels CAS (device memory, never freed: a
// captured graph may address it for the rest of the process) and its host mirror.
struct Status {
  CUdeviceptr word = 0;
  volatile long long* host = nullptr;
  Tensor view;  // the word as a CUDA tensor of four int64 (not owned)
};

// Statuses by device, published once each like the sites (never freed).
constexpr int kMaxDevices = 64;
std::atomic<Status*> g_status[kMaxDevices];

std::mutex g_mutex;  // writers of the sites and statuses, and takers of a recorded error

uint64_t site_hash(const std::string& op, int64_t dim) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the name, then the dim
  for (unsigned char c : op) h = (h ^ c) * 1099511628211ull;
  return (h ^ static_cast<uint64_t>(dim)) * 1099511628211ull;
}
std::atomic<long long> g_host_syncs{0};

std::atomic<int>& sync_flag() {  // -1: not read from the environment yet
  static std::atomic<int> f{-1};
  return f;
}

Status* find_status(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  return g_status[dev].load(std::memory_order_acquire);
}

// The message of a recorded bad index; `size` is the one the kernel recorded.
std::string site_message(long long value, long long tag, long long size) {
  TP_CHECK(tag >= 0 && tag < g_site_count.load(std::memory_order_acquire), Error,
           "device status: a bad index with an unknown site tag ", tag);
  const Site& s = g_sites[tag];
  return str(s.op, ": index ", value, " is out of bounds for dimension ", s.dim, " with size ", size);
}

// Reads and clears one device's recorded bad index (caller holds g_mutex and
// has made sure the recording kernels finished, or accepts missing running ones).
bool take_locked(int dev, Status& st, std::string& msg) {
  if (st.host[0] == 0) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  const long long value = st.host[1], tag = st.host[2], size = st.host[3];
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
  msg = site_message(value, tag, size);
  return true;
}

// Takes the first recorded bad index of any device (empty: none); `dev` out.
std::string take_any(int& dev) {
  // Every synchronization point asks: without a recorded error, no lock.
  bool any = false;
  for (int d = 0; d < kMaxDevices && !any; ++d)
    if (Status* st = find_status(d)) any = st->host[0] != 0;
  if (!any) return {};
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int d = 0; d < kMaxDevices; ++d) {
    Status* st = find_status(d);
    if (!st) continue;
    std::string msg;
    if (take_locked(d, *st, msg)) {
      dev = d;
      return msg;
    }
  }
  return {};
}

}  // namespace

long long status_site(const std::string& op, int64_t dim, int64_t /*size: recorded by the kernel*/) {
  const uint64_t h = site_hash(op, dim);
  // Lock-free for a site already seen: probe the published slots.
  for (int k = 0; k < kSlots; ++k) {
    Slot& sl = g_slots[(h + static_cast<uint64_t>(k)) & (kSlots - 1)];
    const long long t = sl.tag.load(std::memory_order_acquire);
    if (t < 0) break;  // not there: entries are never removed, so a probe ends at the first empty slot
    if (sl.hash == h && g_sites[t].dim == dim && g_sites[t].op == op) return t;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int k = 0; k < kSlots; ++k) {  // again under the lock: another thread may have added it
    Slot& sl = g_slots[(h + static_cast<uint64_t>(k)) & (kSlots - 1)];
    const long long t = sl.tag.load(std::memory_order_relaxed);
    if (t >= 0) {
      if (sl.hash == h && g_sites[t].dim == dim && g_sites[t].op == op) return t;
      continue;
    }
    const int n = g_site_count.load(std::memory_order_relaxed);
    if (n >= kMaxSites) return 0;
    g_sites[n] = {op, dim};
    g_site_count.store(n + 1, std::memory_order_release);
    sl.hash = h;
    sl.tag.store(n, std::memory_order_release);
    return n;
  }
  return 0;
}

long long status_site_count() { return g_site_count.load(std::memory_order_acquire); }

const char* status_device_code() {
  return "__device__ __forceinline__ void tp_bad(long long* bad, long long v, long long tag, long long size) {\n"
         "  if (atomicCAS((unsigned long long*)bad, 0ull, 1ull) == 0ull) {\n"
         "    bad[1] = v; bad[2] = tag;\n"
         "    volatile long long* h = (volatile long long*)bad[3];\n"  // the host mirror
         "    h[1] = v; h[2] = tag; h[3] = size;\n    __threadfence_system();\n    h[0] = 1;\n  }\n}\n"
         // The checked position of index value v along a dim of `size` (bad: recorded, 0 returned).
         "__device__ __forceinline__ long long tp_pos(long long v, long long size, long long neg, long long* bad, "
         "long long tag, bool& ok) {\n"
         "  const long long w = (neg && v < 0) ? v + size : v;\n"
         "  ok = w >= 0 && w < size;\n"
         "  if (!ok) { tp_bad(bad, v, tag, size); return 0; }\n"
         "  return w;\n}\n";
}

void prepare_status(int dev) {
  TP_CHECK(dev >= 0 && dev < kMaxDevices, Error, "device status: device index ", dev, " out of range");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (find_status(dev)) return;
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
  auto* st = new Status();  // never freed (see Status)
  st->view = Tensor(std::move(impl));
  st->host = static_cast<volatile long long*>(host);
  st->word = word;
  g_status[dev].store(st, std::memory_order_release);
}

Tensor launch_status(int dev) {
  if (Status* st = find_status(dev)) return st->view;  // lock-free once the device has one
  if (capturing())
    throw NotCapturable(str("a checked index kernel on cuda:", dev,
                            " in a CUDA graph captured on another device (its status was not prepared)"));
  prepare_status(dev);
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
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!find_status(d)) continue;
      DeviceGuard guard;
      activate(d);
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
