#include "stax/backend/cuda_graph_region.h"

#include "core/deterministic.h"
#include "core/error.h"
#include "core/warning.h"
#include "cuda/copy.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "ops/ops.h"

namespace tp::stax {
namespace {

std::mutex g_totals_mutex;
CudaGraphRegion::Stats g_totals;
void count(int CudaGraphRegion::Stats::*field) {
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  ++(g_totals.*field);
}

// A buffer with t's sizes and strides (covering its whole span).
Tensor buffer_like(const Tensor& t, int device) {
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * t.strides()[d];
  if (t.numel() == 0) span = 1;
  Tensor base = cuda::empty(Shape{span}, t.dtype(), device);
  return base.as_strided(t.sizes(), t.strides(), 0);
}

void copy_into(Tensor dst, const Tensor& src) {
  if (src.device().kind == Device::Kind::CPU) {  // a host scalar input: through a device copy
    cuda::copy_device_to_device(dst, cuda::to_device(src, dst.device().index));
    return;
  }
  if (dst.is_contiguous() && src.is_contiguous())
    cuda::copy_device_to_device(dst, src);
  else
    ops::copy_(dst, src);
}

}  // namespace

CudaGraphRegion::CudaGraphRegion(std::shared_ptr<CudaRegion> region, int device, std::string name)
    : region_(std::move(region)), device_(device), name_(std::move(name)) {}

void CudaGraphRegion::note(int Stats::*field) {
  ++(stats_.*field);
  count(field);
}

CudaGraphRegion::Stats CudaGraphRegion::totals() {
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  return g_totals;
}

CudaGraphRegion::Stats CudaGraphRegion::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<Tensor> CudaGraphRegion::graph_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs_[i].copied ? inputs_[i].static_buffer : inputs[i];
  return in;
}

bool CudaGraphRegion::capture(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> in = graph_inputs(inputs);
  auto g = std::make_unique<cuda::Graph>(device_);
  std::vector<Tensor> outs;
  try {
    g->begin_capture();
    outs = region_->run(in);
    g->end_capture();
  } catch (const Error& e) {
    g->abort_capture();
    stats_.disabled = true;
    warn(str("tp.compile(mode=\"reduce-overhead\"): region ", name_,
             " is not captured into a CUDA graph (its kernels are launched one by one): ", e.what()));
    return false;
  }
  // What each output is: an address in the graph's pool, rewritten by every replay.
  outputs_.clear();
  std::vector<const StorageImpl*> seen;
  for (const Tensor& o : outs) {
    const StorageImpl* s = o.impl()->storage.get();
    for (const Tensor& x : in)
      if (x.defined() && x.impl()->storage.get() == s) {
        stats_.disabled = true;  // an output aliasing an input: not the pool's memory
        return false;
      }
    OutputSpec spec;
    size_t k = 0;
    while (k < seen.size() && seen[k] != s) ++k;
    if (k == seen.size()) seen.push_back(s);
    spec.storage_index = static_cast<int>(k);
    spec.storage_data = s->data();
    spec.nbytes = s->nbytes();
    spec.sizes = o.sizes();
    spec.strides = o.strides();
    spec.offset = o.offset();
    spec.dtype = o.dtype();
    outputs_.push_back(std::move(spec));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    InputState& st = inputs_[i];
    if (!st.copied && in[i].defined()) {
      st.storage = in[i].impl()->storage;
      st.data = in[i].data();  // the element address: a view at another offset of the same storage differs
    }
  }
  graph_ = std::move(g);
  deterministic_ = deterministic_algorithms();
  shapes_.clear();
  for (const Tensor& t : inputs) shapes_.push_back(t.defined() ? t.sizes() : Shape{});
  live_.clear();
  note(&Stats::captures);
  return true;
}

std::vector<Tensor> CudaGraphRegion::run(const std::vector<Tensor>& inputs) {
  cuda::DeviceGuard guard;  // a region on cuda:1 leaves the caller's current context current
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.disabled || calls_++ == 0 || cuda::capturing()) {  // warm-up, or no graph
    note(&Stats::plain_calls);
    return region_->run(inputs);
  }
  if (inputs_.size() != inputs.size()) inputs_.assign(inputs.size(), InputState{});
  // A 0-d CPU input (a scalar eager accepts beside CUDA tensors) is read through
  // a device buffer: a graph cannot record the plain run's copy from host memory.
  for (size_t i = 0; i < inputs.size(); ++i) {
    InputState& st = inputs_[i];
    if (st.copied || !inputs[i].defined() || inputs[i].device().kind != Device::Kind::CPU) continue;
    st.copied = true;
    st.static_buffer = cuda::empty(inputs[i].sizes(), inputs[i].dtype(), device_);
    graph_.reset();
  }
  // Dynamic shapes: a symbolic region is called at other sizes; the graph
  // recorded its launches (grids, size arguments, buffers) at one, so another
  // size captures again (one graph at a time, for the latest sizes).
  if (graph_) {
    bool same = shapes_.size() == inputs.size();
    for (size_t i = 0; same && i < inputs.size(); ++i)
      same = inputs[i].defined() ? inputs[i].sizes() == shapes_[i] : shapes_[i].empty();
    if (!same) {
      graph_.reset();
      inputs_.assign(inputs.size(), InputState{});
    }
  }
  // The deterministic mode changed since the capture: the recorded index
  // kernels (atomic or sorted) are the other mode's, so capture again.
  if (graph_ && deterministic_ != deterministic_algorithms()) graph_.reset();
  // An in-place input in another storage than captured: read it through a static buffer from now on.
  if (graph_) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      InputState& st = inputs_[i];
      if (st.copied || !inputs[i].defined()) continue;
      const std::shared_ptr<StorageImpl> s = st.storage.lock();
      if (s && s == inputs[i].impl()->storage && inputs[i].data() == st.data) continue;
      st.copied = true;
      st.static_buffer = buffer_like(inputs[i], device_);
      note(&Stats::copied_inputs);
      graph_.reset();  // recorded with the old address: capture again
    }
  }
  // The caller still holds an output of the last replay: leave the pool alone.
  if (graph_) {
    for (const auto& w : live_)
      if (!w.expired()) {
        note(&Stats::plain_calls);
        return region_->run(inputs);
      }
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs_[i].copied) copy_into(inputs_[i].static_buffer, inputs[i]);
  if (!graph_ && !capture(inputs)) {
    note(&Stats::plain_calls);
    return region_->run(inputs);
  }
  graph_->replay();
  note(&Stats::replays);
  // Fresh storages over the pool's memory; they keep the pool alive.
  std::vector<std::shared_ptr<StorageImpl>> storages;
  std::vector<Tensor> result;
  result.reserve(outputs_.size());
  live_.clear();
  const std::shared_ptr<cuda::DevicePool>& pool = graph_->pool();
  for (const OutputSpec& o : outputs_) {
    if (static_cast<size_t>(o.storage_index) == storages.size()) {
      storages.push_back(StorageImpl::wrap(const_cast<void*>(o.storage_data), o.nbytes, [pool] {},
                                           cuda::cuda_device(device_)));
      live_.push_back(storages.back());
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = storages[static_cast<size_t>(o.storage_index)];
    impl->sizes = o.sizes;
    impl->strides = o.strides;
    impl->offset = o.offset;
    impl->dtype = o.dtype;
    result.emplace_back(std::move(impl));
  }
  return result;
}

}  // namespace tp::stax
