// CUDA Graphs (Section 9.9): a sequence of launches recorded once and
// replayed with one cuGraphLaunch. Capture runs on a side stream (one per
// device, non-blocking) that first waits for the caller's current stream;
// while it lasts that stream is current on the capturing thread and the
// thread's allocations come from the graph's private pool (allocator.h), so
// every address the recorded kernels use stays the graph's. Nothing runs
// during capture: replay() queues the recorded work on the current stream.
#pragma once
#include <memory>

#include "core/tensor.h"
#include "cuda/allocator.h"
#include "cuda/driver.h"

namespace tp::cuda {

bool graphs_available();

class Graph {
 public:
  explicit Graph(int device);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void begin_capture();
  // Ends the capture and instantiates the graph.
  void end_capture();
  // Ends a capture that failed (restores the thread's stream and pool; the
  // partial graph is discarded). Never throws.
  void abort_capture() noexcept;
  // Launches the graph. A replay is a check point of the checked index
  // kernels' asynchronous status (cuda/device_status.h): a bad index recorded
  // by finished work raises here; with synchronous checks the replay waits
  // for itself and raises IndexError for its own bad index.
  void replay();
  bool captured() const { return exec_ != nullptr; }
  bool capturing() const { return capturing_; }
  int device() const { return device_; }
  // Number of nodes (kernels, memsets, copies, library launches) recorded.
  size_t node_count() const { return nodes_; }
  const std::shared_ptr<DevicePool>& pool() const { return pool_; }

 private:
  void restore() noexcept;
  int device_;
  std::shared_ptr<DevicePool> pool_;
  CUstream stream_ = nullptr;  // the capture stream
  CUstream prev_ = nullptr;    // the caller's stream during capture
  CUgraphExec exec_ = nullptr;
  size_t nodes_ = 0;
  bool capturing_ = false;
};

}  // namespace tp::cuda
