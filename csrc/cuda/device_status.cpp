#include "cuda/device_status.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

struct Site {
  std::string op;
  int64_t dim, size;
};

std::mutex g_mutex;
std::vector<Site>& sites() {
  static auto* v = new std::vector<Site>();
  return *v;
}
std::map<std::tuple<std::string, int64_t, int64_t>, long long>& site_ids() {
  static auto* m = new std::map<std::tuple<std::string, int64_t, int64_t>, long long>();
  return *m;
}

// The shared status of the capture in progress on this thread.
thread_local Tensor t_capture_status;

Tensor zeroed_status(int dev) {
  Tensor s = empty({3}, DType::Int64, dev);
  activate(dev);
  check(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(s.data()), 0, 3 * sizeof(int64_t),
                                 current_stream(dev)),
        "device status");
  return s;
}

}  // namespace

long long status_site(const std::string& op, int64_t dim, int64_t size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto [it, fresh] = site_ids().try_emplace({op, dim, size}, static_cast<long long>(sites().size()));
  if (fresh) sites().push_back({op, dim, size});
  return it->second;
}

Tensor launch_status(int dev) {
  if (!capturing()) return zeroed_status(dev);
  // Allocated from the capture's private pool and kept by the graph, so no
  // later allocation of the capture reuses its bytes.
  if (!t_capture_status.defined()) t_capture_status = zeroed_status(dev);
  if (t_capture_status.device().index != dev)
    throw NotCapturable(str("a checked index kernel on cuda:", dev, " in a CUDA graph captured on ",
                            t_capture_status.device().str()));
  return t_capture_status;
}

void check_launch_status(const Tensor& status) {
  if (!capturing()) raise_if_recorded(status);
}

void raise_if_recorded(const Tensor& status) {
  const Tensor h = to_cpu(status);
  const int64_t* v = h.data_as<int64_t>();
  if (v[0] == 0) return;
  Site s;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    TP_CHECK(v[2] >= 0 && static_cast<size_t>(v[2]) < sites().size(), Error,
             "device status: a bad index with an unknown site tag ", v[2]);
    s = sites()[static_cast<size_t>(v[2])];
  }
  throw IndexError(str(s.op, ": index ", v[1], " is out of bounds for dimension ", s.dim, " with size ", s.size));
}

Tensor take_capture_status() noexcept {
  Tensor s = std::move(t_capture_status);
  t_capture_status = Tensor();
  return s;
}

}  // namespace tp::cuda
