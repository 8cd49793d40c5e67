#include "cuda/graph.h"

#include <mutex>
#include <vector>

#include "core/error.h"
#include "cuda/device_status.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {
// One capture stream per device, created on first capture (never destroyed).
CUstream capture_stream(int device) {
  static std::mutex mu;
  static auto* v = new std::vector<CUstream>();
  std::lock_guard<std::mutex> lock(mu);
  if (v->size() <= static_cast<size_t>(device)) v->resize(static_cast<size_t>(device) + 1, nullptr);
  CUstream& s = (*v)[static_cast<size_t>(device)];
  if (!s) s = new_stream(device);
  return s;
}
}  // namespace

bool graphs_available() { return is_available() && driver().has_graphs; }

Graph::Graph(int device) : device_(device) {
  if (!is_available()) throw_unavailable("cuda.CUDAGraph");
  TP_CHECK(driver().has_graphs, Error, "cuda.CUDAGraph: the CUDA driver lacks the graph entry points");
  pool_ = new_private_pool(device);
}

Graph::~Graph() {
  if (capturing_) abort_capture();
  if (exec_ && driver().cuGraphExecDestroy) driver().cuGraphExecDestroy(exec_);
}

void Graph::begin_capture() {
  DeviceGuard guard;
  TP_CHECK(!capturing_ && !exec_, Error, "CUDAGraph.capture_begin: this graph was already captured");
  TP_CHECK(!cuda::capturing(), Error, "CUDAGraph.capture_begin: this thread is already capturing a graph");
  activate(device_);
  stream_ = capture_stream(device_);
  prepare_status(device_);  // the checked kernels' status word, made outside the capture
  prev_ = current_stream(device_);
  // The recorded work reads what the caller's stream has produced so far.
  stream_wait_stream(device_, stream_, prev_);
  check(driver().cuStreamBeginCapture(stream_, kCaptureModeRelaxed), "cuStreamBeginCapture");
  capturing_ = true;
  set_current_stream(device_, stream_);
  set_capture_pool(pool_);
  set_capturing(true);
}

void Graph::restore() noexcept {
  set_capturing(false);
  set_capture_pool(nullptr);
  set_current_stream(device_, prev_);
  capturing_ = false;
}

void Graph::end_capture() {
  DeviceGuard guard;
  TP_CHECK(capturing_, Error, "CUDAGraph.capture_end: no capture in progress");
  CUgraph g = nullptr;
  const CUresult r = driver().cuStreamEndCapture(stream_, &g);
  restore();
  check(r, "cuStreamEndCapture");
  size_t n = 0;
  driver().cuGraphGetNodes(g, nullptr, &n);
  nodes_ = n;
  const CUresult ri = driver().cuGraphInstantiateWithFlags(&exec_, g, 0);
  driver().cuGraphDestroy(g);  // the executable graph is independent of it
  check(ri, "cuGraphInstantiate");
}

void Graph::abort_capture() noexcept {
  if (!capturing_) return;
  CUgraph g = nullptr;
  driver().cuStreamEndCapture(stream_, &g);
  if (g) driver().cuGraphDestroy(g);
  restore();
}

void Graph::replay() {
  DeviceGuard guard;
  TP_CHECK(exec_, Error, "CUDAGraph.replay: the graph has not been captured");
  activate(device_);
  // A replay boundary: a bad index recorded by work already finished is
  // reported here (no synchronization); synchronous checks wait for this replay.
  report_device_status();
  const CUstream s = current_stream(device_);
  check(driver().cuGraphLaunch(exec_, s), "cuGraphLaunch");
  if (sync_checks()) check_launch_status(launch_status(device_));
}

}  // namespace tp::cuda
