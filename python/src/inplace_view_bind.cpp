// In-place shape methods (squeeze_, unsqueeze_, t_, transpose_, swapdims_, resize_, ...):
// the Python side (tensorplay/_inplace_views.py) computes the out-of-place view with the
// ordinary operator, so autograd and a capture record it; these helpers then make the
// tensor the caller holds take the view's shape.
#include <cstring>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "core/grad_mode.h"
#include "graph/tracer.h"

namespace tp::graph {
// tracer.cpp: during a trace, whether `t` was made by an operator of the trace (views
// included; not an input or free tensor), so the Python object holding it is the function's own.
bool is_traced_result(const Tensor& t);
}  // namespace tp::graph

namespace tp::py {
namespace {

void check_leaf(const Tensor& t, const char* name) {
  const TensorImpl* impl = t.impl();
  if (GradMode::is_enabled() && impl->requires_grad && !impl->grad_fn && !impl->requires_grad_from_base)
    throw Error(str(name, ": a leaf Variable that requires grad is being used in an in-place operation (shape ",
                    shape_str(t.sizes()), "); change its shape under tp.no_grad() or use the out-of-place ",
                    "method"));
}

// `self` takes the shape of `view`, a view of self made by the out-of-place operator.
nb::handle apply_view(nb::handle self, const Tensor& view, const char* name) {
  Tensor& t = nb::cast<Tensor&>(self);
  check_leaf(t, name);
  TensorImpl* impl = t.impl();
  const bool tracing = graph::is_tracing();
  if (tracing && !graph::is_traced_result(t))
    throw CaptureError(str("Tensor.", name, "() of an argument or a module's tensor inside a compiled function ",
                           "(tp.compile) is not supported: the compiled program cannot change the shape of a ",
                           "tensor the caller holds at later calls; use the out-of-place ", name,
                           " (without the trailing underscore) and rebind the name instead"));
  if (tracing || (GradMode::is_enabled() && impl->grad_fn)) {
    // The Python object now holds the view itself: its history (the view operator's node)
    // and, in a capture, its graph value come with it, while the old tensor, which saved
    // values may hold, keeps its shape. The view's _base is the old tensor's.
    std::shared_ptr<TensorImpl> old_base = impl->view_base;
    std::shared_ptr<void> old_py = impl->base_py;
    t = view;
    t.impl()->view_base = std::move(old_base);
    t.impl()->base_py = std::move(old_py);
  } else {
    impl->sizes = view.sizes();
    impl->strides = view.strides();
    impl->offset = view.offset();
  }
  t.bump_version();
  return self;
}

nb::handle resize(nb::handle self, const Shape& sizes, const char* name) {
  Tensor& t = nb::cast<Tensor&>(self);
  TensorImpl* impl = t.impl();
  if (graph::is_tracing())
    throw CaptureError(str("Tensor.", name, "() inside a compiled function (tp.compile) is not supported: it may ",
                           "reallocate the tensor's memory, which the compiled program cannot record; use ",
                           "tp.empty / reshape outside it"));
  TP_CHECK(!impl->requires_grad, Error, name, ": cannot resize a tensor that requires grad (shape ",
           shape_str(t.sizes()), ")");
  for (int64_t s : sizes)
    TP_CHECK(s >= 0, ValueError, name, ": sizes must be non-negative, got ", shape_str(sizes));
  const size_t need = static_cast<size_t>(impl->offset + tp::numel(sizes)) * itemsize(impl->dtype);
  if (need > impl->storage->nbytes()) {
    TP_CHECK(impl->storage->device().kind == Device::Kind::CPU, NotImplementedError, name,
             ": growing the memory of a tensor on ", impl->storage->device().str(), " is not supported");
    TP_CHECK(impl->storage.use_count() == 1, Error, name, ": cannot grow the memory of a tensor that shares it with ",
             "other tensors (views or aliases) from shape ", shape_str(t.sizes()), " to ", shape_str(sizes),
             "; resize a tensor that owns its memory");
    auto grown = StorageImpl::allocate(need, impl->storage->device());
    std::memcpy(grown->data(), impl->storage->data(), impl->storage->nbytes());
    impl->storage = std::move(grown);
  }
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  t.bump_version();
  return self;
}

}  // namespace

void bind_inplace_views(nb::module_& m) {
  m.def("_inplace_view_apply",
        [](nb::handle self, const Tensor& view, const std::string& name) {
          return nb::borrow(apply_view(self, view, name.c_str()));
        });
  m.def("_inplace_check_leaf", [](const Tensor& t, const std::string& name) { check_leaf(t, name.c_str()); });
  m.def("_resize_", [](nb::handle self, const std::vector<int64_t>& sizes, const std::string& name) {
    return nb::borrow(resize(self, Shape(sizes), name.c_str()));
  });
}

}  // namespace tp::py
