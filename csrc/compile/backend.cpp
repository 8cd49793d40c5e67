#include "compile/backend.h"

#include <algorithm>

#include <cstdio>
#include <map>
#include <mutex>

#include "compile/device_split.h"
#include "compile/metrics.h"
#include "graph/interpreter.h"
#include "passes/passes.h"
#include "cuda/graph.h"
#include "stax/backend/cuda_graph_region.h"
#include "stax/backend/cuda_region.h"
#include "stax/backend/cuda_specialize.h"
#include "stax/backend/attention_fusion.h"
#include "stax/backend/gemm_epilogue.h"
#include "stax/backend/stax_backend.h"
#include "stax/lowering/registry.h"

namespace tp::compile {
namespace {

RegionFn interpret(const BackendRequest& r) {
  std::shared_ptr<const graph::Graph> g = r.graph;
  return [g](const std::vector<Tensor>& in) { return graph::interpret(*g, in); };
}

// Stax: composites decomposed into the primitives it lowers, then generated
// code; a region it cannot lower runs eagerly (or raises under strict_native).
RegionFn stax_compile(const BackendRequest& r) {
  // Moves between devices (a region's buffers live on one device): one region
  // per device and stage, the moves between them. A symbolic graph with a move
  // is still refused below (lower_as_extern) and runs interpreted.
  if (!r.graph->is_symbolic() && graph::has_device_moves(*r.graph)) return compile_device_split(r, &stax_compile);
  auto sg = r.graph->clone();
  passes::PassOptions po;
  po.decompose = true;
  // Composites Stax lowers natively stay whole; in a symbolic graph only those
  // whose rule takes symbolic sizes (layer_norm there decomposes when that is
  // size-independent, so it still fuses).
  // The CUDA printer has no Welford or pair reductions: there they decompose.
  const bool on_cuda = std::any_of(r.examples.begin(), r.examples.end(), [](const Tensor& t) {
    return t.defined() && t.device().kind == Device::Kind::CUDA;
  });
  if (on_cuda) {
    // A symbolic graph keeps mean whole (its lowering reads the count at run time).
    const bool symbolic = sg->is_symbolic();
    po.keep_whole = [symbolic](const std::string& op) { return stax::cuda_keeps_whole(op, symbolic); };
    stax::cuda_prepare_symbolic(*sg);
    // Before decomposition (gelu is still one node): GEMM + bias/activation -> one cuBLASLt call.
    stax::fuse_attention(*sg);  // matmul-softmax-matmul -> one fused kernel
    stax::fuse_gemm_epilogues(*sg);
  } else if (sg->is_symbolic())
    po.keep_whole = [](const std::string& op) {
      return stax::keeps_whole_for_stax(op) && stax::handles_symbolic_shapes(op);
    };
  else
    po.keep_whole = &stax::keeps_whole_for_stax;
  po.disabled = disabled_passes(r.options);
  passes::run_default_passes(*sg, po);
  // The region's C++ build runs in the background (Section 11.2), waited for
  // at its first run: the AOT layer compiles the backward first, so its build
  // overlaps the forward's. Under strict_native the build is waited for here,
  // so that its failure raises at the call that compiles.
  stax::RegionOptions ro = stax::region_options(r.options.options);
  ro.background_build = !r.options.strict_native;
  ro.write_into = r.write_into;
  // A failed build seen at the first run: the region runs eagerly from then on.
  auto fall_back = [graph = r.graph, warn = r.warn_fallback, region_name = r.region](const BackendError& e) {
    metrics().fallback_count++;
    if (log_enabled("recompiles") || log_enabled("graph") || log_enabled("explain"))
      std::fprintf(stderr, "[tp.compile] region %s falls back to eager: %s\n", region_name.c_str(), e.what());
    if (warn) warn(e.what());
    return RegionFn([graph](const std::vector<Tensor>& in) { return graph::interpret(*graph, in); });
  };
  try {
    // CUDA inputs: the same graph printed for the GPU (stax/backend/cuda_region.h).
    if (const int dev = stax::cuda_region_device(r.examples); dev >= 0) {
      stax::check_cuda_region_results(*r.graph, dev);  // the captured metas, before the passes
      const stax::RegionOptions cro = stax::cuda_region_options(r.options.options, r.options.mode);
      // CUDA Graphs (Section 9.9): reduce-overhead, and max-autotune as in
      // PyTorch (max-autotune-no-cudagraphs is the tuning alone).
      const bool graphs =
          (r.options.mode == "reduce-overhead" || r.options.mode == "max-autotune") && cuda::graphs_available();
      const bool log_code = log_enabled("code");
      auto finish = [dev, graphs, log_code, name = r.region](const std::shared_ptr<stax::CudaRegion>& region,
                                                             std::string* source) -> RegionFn {
        metrics().compile_count++;
        metrics().generated_kernel_count += region->kernel_count();
        if (source) *source += region->source();
        if (log_code)
          std::fprintf(stderr, "[tp.compile] generated CUDA code for %s:\n%s\n", name.c_str(), region->source().c_str());
        if (graphs) {
          auto graphed = std::make_shared<stax::CudaGraphRegion>(region, dev, name);
          return [graphed](const std::vector<Tensor>& in) { return graphed->run(in); };
        }
        return [region](const std::vector<Tensor>& in) { return region->run(in); };
      };
      std::shared_ptr<stax::CudaRegion> region;
      try {
        region = stax::compile_cuda_region(*sg, dev, cro, r.examples);
      } catch (const BackendError& e) {
        if (!sg->is_symbolic()) throw;
        // The symbolic print was refused: specialize (a static build per call
        // layout, prepared as a static CUDA graph is) rather than run eagerly.
        if (log_enabled("recompiles") || log_enabled("graph") || log_enabled("explain"))
          std::fprintf(stderr, "[tp.compile] region %s: symbolic CUDA region refused (%s); compiled per size instead\n",
                       r.region.c_str(), e.what());
        const std::set<std::string> disabled = disabled_passes(r.options);
        auto spec = std::make_shared<stax::SpecializingCudaRegion>(
            r.graph, [dev, cro, disabled, finish](const graph::Graph& g, const std::vector<Tensor>& examples) {
              auto s = g.clone();
              passes::PassOptions spo;
              spo.decompose = true;
              spo.disabled = disabled;
              spo.keep_whole = [](const std::string& op) { return stax::cuda_keeps_whole(op, false); };
              stax::fuse_attention(*s);
              stax::fuse_gemm_epilogues(*s);
              passes::run_default_passes(*s, spo);
              return finish(stax::compile_cuda_region(*s, dev, cro, examples), nullptr);
            });
        spec->prepare(r.examples);  // the example's version now: its refusal falls back below
        return [spec](const std::vector<Tensor>& in) { return spec->run(in); };
      }
      return finish(region, r.source);
    }
    auto region = stax::compile_region(*sg, ro);
    if (r.kernels) *r.kernels = region->kernels();
    if (log_enabled("inplace") || log_enabled("explain")) {
      for (const auto& [out, in] : region->inplace_outputs())
        std::fprintf(stderr, "[tp.compile] in-place: region %s computes output %d into input %d\n", r.region.c_str(),
                     out, in);
      for (const std::string& why : region->inplace_rejected())
        std::fprintf(stderr, "[tp.compile] in-place: region %s copies %s\n", r.region.c_str(), why.c_str());
    }
    if (log_enabled("explain")) {  // the static part of tp.compiler.explain (no timings)
      std::fprintf(stderr, "[tp.compile] explain: region %s with %zu kernel(s)\n", r.region.c_str(),
                   region->kernels().size());
      for (const stax::KernelInfo& k : region->kernels())
        std::fprintf(stderr, "[tp.compile]   %s: %s; reads %lld B, writes %lld B, %lld flops\n", k.name.c_str(),
                     k.origin.c_str(), static_cast<long long>(k.bytes_read), static_cast<long long>(k.bytes_written),
                     static_cast<long long>(k.flops));
    }
    Metrics& m = metrics();
    m.compile_count++;
    m.generated_kernel_count += region->kernel_count();
    if (r.source) *r.source += region->source();
    const bool log_code = log_enabled("code");
    auto built = [region, log_code, name = r.region] {
      region->wait_built();
      (region->disk_hit() ? metrics().cache_hits : metrics().cache_misses)++;
      if (log_code)
        std::fprintf(stderr, "[tp.compile] generated code for %s (%s):\n%s\n", name.c_str(),
                     region->source_path().c_str(), region->source().c_str());
    };
    if (!ro.background_build) {
      built();
      return [region](const std::vector<Tensor>& in) { return region->run(in); };
    }
    struct FirstRun {
      std::once_flag once;
      RegionFn fallback;
    };
    auto first = std::make_shared<FirstRun>();
    return [region, first, built, fall_back](const std::vector<Tensor>& in) {
      std::call_once(first->once, [&] {
        try {
          built();
        } catch (const BackendError& e) {
          first->fallback = fall_back(e);
        }
      });
      return first->fallback ? first->fallback(in) : region->run(in);
    };
  } catch (const BackendError& e) {
    if (r.fallback_reason) *r.fallback_reason = e.what();
    if (log_enabled("explain"))
      std::fprintf(stderr, "[tp.compile] explain: region %s not compiled: %s\n", r.region.c_str(), e.what());
    if (r.options.strict_native)
      throw BackendError(str("tp.compile(strict_native=True): region ", r.region, ": ", e.what()));
    metrics().fallback_count++;
    if (log_enabled("recompiles") || log_enabled("graph"))
      std::fprintf(stderr, "[tp.compile] region %s falls back to eager: %s\n", r.region.c_str(), e.what());
    if (r.warn_fallback) r.warn_fallback(e.what());
    return interpret(r);
  }
}

std::mutex g_mutex;
std::map<std::string, Backend>& registry() {
  static std::map<std::string, Backend> b = {
      {"stax", Backend{&stax_compile, true, true, stax_lowers_symbolic_graphs()}},
      {"eager", Backend{&interpret, false, false, true}},
      {"aot_eager", Backend{&interpret, true, false, true}},
  };
  return b;
}

}  // namespace

// The Stax lowering of symbolic graphs is the other half of dynamic shapes; until
// it lands, a symbolic region under stax is interpreted.
bool stax_lowers_symbolic_graphs() { return true; }

std::set<std::string> disabled_passes(const CompileOptions& options) {
  auto it = options.options.find("disable_passes");
  return it == options.options.end() ? std::set<std::string>{} : passes::parse_pass_list(it->second);
}

Backend user_backend(CustomBackend fn) {
  return Backend{[fn = std::move(fn)](const BackendRequest& r) { return fn(r.graph, r.examples); }, true};
}

const Backend* lookup_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

void register_backend(const std::string& name, CustomBackend backend) {
  TP_CHECK(name != "stax" && name != "eager" && name != "aot_eager", ValueError,
           "register_backend: '", name, "' is a built-in backend");
  std::lock_guard<std::mutex> lock(g_mutex);
  registry()[name] = user_backend(std::move(backend));
}

}  // namespace tp::compile
