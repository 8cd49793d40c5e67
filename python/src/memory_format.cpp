// memory_format=: PyTorch's names for the order of a tensor's strides.
//
// TensorPlay tensors are strided, so channels-last is a permutation of the
// strides over the unchanged logical (N, C, H, W) shape: the kernels read any
// strides, and the binding only has to produce the layout asked for. Operators
// make contiguous results; a `memory_format=` argument (generated bindings,
// Tensor.to / float() / ..., contiguous, clone, *_like, empty) is applied to
// the result here, at the cost of one copy only when the layout has to change.
#include "common.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

// The dims from outermost to innermost stride for each channels-last rank.
const ops::Dims& channels_last_order(int64_t rank) {
  static const ops::Dims k4 = {0, 2, 3, 1}, k5 = {0, 2, 3, 4, 1};
  return rank == 4 ? k4 : k5;
}

const char* format_name(MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous: return "contiguous_format";
    case MemoryFormat::Preserve: return "preserve_format";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
  }
  return "?";
}

void check_rank(const Tensor& t, MemoryFormat f, std::string_view op) {
  const int64_t want = f == MemoryFormat::ChannelsLast ? 4 : 5;
  TP_CHECK(t.dim() == want, Error, op, ": required rank ", want, " tensor to use ", format_name(f),
           " format, but got a tensor of shape ", shape_str(t.sizes()));
}

}  // namespace

bool is_contiguous_as(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous || f == MemoryFormat::Preserve) return t.is_contiguous();
  if (t.dim() != (f == MemoryFormat::ChannelsLast ? 4 : 5)) return false;
  // Dense in the channels-last order; dims of size 1 may have any stride.
  int64_t expected = 1;
  const ops::Dims& order = channels_last_order(t.dim());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t size = t.sizes()[*it];
    if (size != 1 && t.strides()[*it] != expected) return false;
    expected *= size;
  }
  return true;
}

Tensor apply_memory_format(const Tensor& t, MemoryFormat f, std::string_view op) {
  switch (f) {
    case MemoryFormat::Preserve: return t;
    case MemoryFormat::Contiguous: return ops::contiguous(t);
    case MemoryFormat::ChannelsLast:
    case MemoryFormat::ChannelsLast3d: {
      check_rank(t, f, op);
      if (is_contiguous_as(t, f)) return t;
      // Copy in the permuted order, then view it back in the logical order.
      const ops::Dims& order = channels_last_order(t.dim());
      ops::Dims inverse(order.size());
      for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
      return ops::permute(ops::clone(ops::permute(t, order)), inverse);
    }
  }
  return t;
}

std::optional<MemoryFormat> to_memory_format(nb::handle h, std::string_view op) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<MemoryFormat>(h)) return nb::cast<MemoryFormat>(h);
  // torch.memory_format objects print as "torch.channels_last".
  const std::string name = nb::cast<std::string>(nb::str(h));
  for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::Preserve, MemoryFormat::ChannelsLast,
                         MemoryFormat::ChannelsLast3d})
    if (name == std::string("torch.") + format_name(f)) return f;
  throw TypeError(str(op, ": memory_format must be a tensorplay memory format (tensorplay.contiguous_format, ",
                      "preserve_format, channels_last or channels_last_3d), not ", nb::inst_name(h).c_str()));
}

void bind_memory_format(nb::module_& m) {
  nb::enum_<MemoryFormat>(m, "memory_format")
      .value("contiguous_format", MemoryFormat::Contiguous)
      .value("preserve_format", MemoryFormat::Preserve)
      .value("channels_last", MemoryFormat::ChannelsLast)
      .value("channels_last_3d", MemoryFormat::ChannelsLast3d)
      .def("__repr__", [](MemoryFormat f) { return std::string("tensorplay.") + format_name(f); })
      .def("__str__", [](MemoryFormat f) { return std::string("tensorplay.") + format_name(f); });
}

}  // namespace tp::py
