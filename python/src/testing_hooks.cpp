// Testing only: planted faults for the bisection tests (tp.compiler.bisect must
// name the layer a fault is in). Each hook is a clearly named private function
// of tensorplay._C; nothing calls them outside tests.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include "common.h"
#include "cuda/gap_kernels.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/size_expr.h"
#include "passes/passes.h"
#include "stax/backend/cuda_region.h"
#include "stax/backend/cuda_specialize.h"
#include "stax/backend/stax_backend.h"
#include "stax/backend/testing_faults.h"
#include "stax/backend/testing_symbolic.h"

namespace tp::py {

namespace {
// A broken graph pass: every float `mul` becomes `add` (same arguments, same
// result metadata), so the graph computes a wrong value.
bool mul_to_add(graph::Graph& g) {
  const OpDef* add = find_op("add");
  bool changed = false;
  for (auto& n : g.nodes())
    if (n->opcode == graph::Opcode::CallFunction && n->is_op("mul") && is_floating(n->meta.dtype)) {
      n->target = add;
      changed = true;
    }
  return changed;
}
// Captures the Python function fn on `inputs` (one tensor or a sequence of them out).
auto trace_python(nb::object& fn, const std::vector<Tensor>& inputs) {
  return graph::trace([&](const std::vector<Tensor>& proxies) {
    nb::list l;
    for (auto& t : proxies) l.append(nb::cast(t));
    nb::object out = fn(*nb::tuple(l));
    std::vector<Tensor> outs;
    if (nb::isinstance<Tensor>(out)) outs.push_back(nb::cast<Tensor>(out));
    else
      for (nb::handle h : out) outs.push_back(nb::cast<Tensor>(h));
    return outs;
  }, inputs);
}

// A fake device for CPU-only tests of device placement: host memory labelled
// cuda:0, whose operators the fake hook runs with the CPU kernels (on the same
// memory relabelled CPU) and whose results it labels cuda:0 again. A composite
// or derivative formula that mixes in a host tensor with dims then meets the
// dispatcher's same-device check exactly as on a GPU. Only operators may touch
// such tensors (no repr, item or .cpu(): those would call the CUDA driver);
// tests unlabel them with _testing_fake_device_unlabel.
Tensor relabel(const Tensor& t, Device d) {
  if (!t.defined() || t.device() == d) return t;
  const std::shared_ptr<StorageImpl> src = t.impl()->storage;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = StorageImpl::wrap(src->data(), src->nbytes(), [src] {}, d);
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.impl()->offset;
  impl->dtype = t.dtype();
  impl->wrapped_number = t.impl()->wrapped_number;
  return Tensor(std::move(impl));
}
constexpr Device kFakeDevice{Device::Kind::CUDA, 0};
// With composites on, the CUDA kernels made only of other operators
// (cuda::composite_kernel) run first, their pieces coming back here: their
// logic (attributes, shapes, dtypes) is tested without a GPU.
bool g_fake_composites = false;
int64_t g_fake_composite_calls = 0;  // calls a composite kernel took (the tests check it ran)
bool fake_device_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (g_fake_composites && cuda::composite_kernel(op, in, attrs, out_meta, out)) {
    ++g_fake_composite_calls;
    return true;
  }
  if (op.has(kView) && op.cpu) {  // re-describes the labelled storage itself
    out = op.cpu(op, in, attrs, out_meta);
    return true;
  }
  std::vector<Tensor> host;
  for (auto& t : in) host.push_back(relabel(t, Device::cpu()));
  std::vector<Tensor> r = run_kernel(op, host, attrs);
  for (size_t i = 0; i < r.size(); ++i) {
    const bool self = op.has(kInplace) && i == 0;
    out.push_back(self ? in[0] : relabel(r[i], kFakeDevice));
  }
  return true;
}
CudaKernelHook g_saved_hook = nullptr;
bool g_fake_on = false;

}  // namespace

void bind_testing_hooks(nb::module_& m) {
  m.def("_testing_fake_device", [](bool on, bool composites) {
    g_fake_composites = on && composites;
    if (on == g_fake_on) return;
    if (on) {
      g_saved_hook = cuda_kernel_hook();
      set_cuda_kernel_hook(&fake_device_kernel);
    } else {
      set_cuda_kernel_hook(g_saved_hook);
    }
    g_fake_on = on;
  }, nb::arg("on"), nb::arg("composites") = false);
  m.def("_testing_fake_device_composite_calls", [] { return g_fake_composite_calls; });
  // A contiguous host copy of t labelled cuda:0 / a CPU view of a labelled tensor.
  m.def("_testing_fake_device_label", [](const Tensor& t) {
    TP_CHECK(t.device().kind == Device::Kind::CPU, ValueError, "_testing_fake_device_label: expected a CPU tensor");
    return relabel(ops::clone(ops::contiguous(t)), kFakeDevice);
  });
  m.def("_testing_fake_device_unlabel", [](const Tensor& t) {
    TP_CHECK(g_fake_on, Error, "_testing_fake_device_unlabel: the fake device is off");
    return relabel(t, Device::cpu());
  });
  m.def("_testing_plant_pass", [](std::string name, std::string kind, bool stax_only) {
    TP_CHECK(kind == "mul_to_add", ValueError, "_testing_plant_pass: unknown fault '", kind, "' (expected 'mul_to_add')");
    passes::register_testing_pass(name, mul_to_add, stax_only);
  }, nb::arg("name"), nb::arg("kind") = "mul_to_add", nb::arg("stax_only") = true);
  m.def("_testing_plant_stax_fault", &stax::testing::plant_fault, nb::arg("kind"), nb::arg("op") = "");
  // While set, derivative formulas drop how they computed sizes (ops/size_expr.h):
  // cat's gradient then slices at plain ints, as a formula without a symbolic form does.
  m.def("_testing_drop_size_recipes", &ops::testing::drop_size_recipes, nb::arg("drop"));
  // Captures fn on `inputs`, runs the Stax passes (decompositions, except
  // `mean`, whose count becomes a run-time size), makes the graph symbolic over
  // `hints` (see mark_symbols) and compiles it with the Stax backend. Returns
  // (run, source, graph code, extern count, seconds in the C++ compiler): run(list of tensors) -> list of tensors calls the
  // one compiled region at any sizes.
  m.def("_testing_stax_symbolic", [](nb::object fn, std::vector<Tensor> inputs, std::vector<int64_t> hints) {
    auto r = trace_python(fn, inputs);
    graph::Graph& g = *r.graph;
    stax::testing::run_passes_keeping_mean(g);
    stax::testing::mark_symbols(g, hints);
    std::shared_ptr<stax::CompiledRegion> region = stax::compile_region(g);
    std::function<std::vector<Tensor>(std::vector<Tensor>)> run = [region](std::vector<Tensor> in) {
      return region->run(in);
    };
    return std::make_tuple(run, region->source(), g.code(), region->extern_count(), region->compiler_seconds());
  }, nb::arg("fn"), nb::arg("inputs"), nb::arg("hints"));
  // The CUDA twin (dynamic shapes on CUDA): captures fn on `inputs` (CPU
  // tensors are fine), marks the symbols as above and prints the graph for the
  // GPU. Returns (source, kernels, caps, run): kernels as (name, form, block_x,
  // block_y, work at the hints, symbolic launch), caps the 32-bit caps per
  // symbol (empty: proved over the declared ranges), run(list of CUDA tensors)
  // compiling one region at its first call and calling it at any sizes.
  m.def("_testing_stax_cuda_symbolic", [](nb::object fn, std::vector<Tensor> inputs, std::vector<int64_t> hints) {
    auto r = trace_python(fn, inputs);
    std::shared_ptr<graph::Graph> g(std::move(r.graph));
    // Marked whole, then decomposed as the CUDA backend does a symbolic graph.
    stax::testing::mark_symbols(*g, hints);
    stax::codegen::CudaUnit u = stax::cuda_unit(*g, 0);
    std::vector<std::tuple<std::string, std::string, int, int, int64_t, bool>> kernels;
    for (size_t k = 0; k < u.launches.size(); ++k) {
      const stax::codegen::CudaLaunch& l = u.launches[k];
      const char* form = l.form == stax::codegen::CudaForm::Flat ? "flat" : l.form == stax::codegen::CudaForm::Row ? "row" : "column";
      kernels.emplace_back(u.unit.kernel_names[k], form, l.block_x, l.block_y, l.work, l.symbolic);
    }
    auto region = std::make_shared<std::shared_ptr<stax::CudaRegion>>();
    std::function<std::vector<Tensor>(std::vector<Tensor>)> run = [g, region](std::vector<Tensor> in) {
      if (!*region) *region = stax::compile_cuda_test_region(*g, in);
      return (*region)->run(in);
    };
    return std::make_tuple(u.unit.source, kernels, stax::cuda_index32_caps(*g), run);
  }, nb::arg("fn"), nb::arg("inputs"), nb::arg("hints"));
  // Dynamic shapes on CUDA, the specialization net (cuda_specialize.h):
  // captures fn on `inputs`, marks the symbols as above, specializes the
  // symbolic graph at `call_inputs`' sizes and returns its static CUDA source
  // (a test compares it with the source of a capture at those sizes) — no GPU.
  m.def("_testing_cuda_specialized_source", [](nb::object fn, std::vector<Tensor> inputs, std::vector<int64_t> hints,
                                               std::vector<Tensor> call_inputs) {
    auto r = trace_python(fn, inputs);
    stax::testing::mark_symbols(*r.graph, hints);
    TP_CHECK(r.graph->is_symbolic(), ValueError, "_testing_cuda_specialized_source: no size equals a hint");
    return stax::cuda_unit(*stax::specialize_graph(*r.graph, call_inputs), 0).unit.source;
  }, nb::arg("fn"), nb::arg("inputs"), nb::arg("hints"), nb::arg("call_inputs"));
  m.def("_testing_cuda_specialized_versions", &stax::cuda_specialized_versions);
  m.def("_testing_clear_faults", [] {
    passes::clear_testing_passes();
    stax::testing::clear_faults();
  });
}

}  // namespace tp::py
