#include "compile/compiled_function.h"

#include <cstdio>
#include <cstring>

#include "compile/metrics.h"
#include "core/grad_mode.h"
#include "graph/interpreter.h"
#include "graph/tracer.h"
#include "passes/passes.h"
#include "stax/backend/stax_backend.h"

namespace tp::compile {

CompiledFunction::CompiledFunction(UserFn fn, CompileOptions options, std::vector<std::string> arg_names,
                                   int num_params)
    : fn_(std::move(fn)),
      options_(std::move(options)),
      arg_names_(std::move(arg_names)),
      num_params_(num_params),
      epoch_(cache_epoch()) {
  const std::string& b = options_.backend;
  TP_CHECK(options_.custom_backend || b == "stax" || b == "eager" || b == "aot_eager" || find_backend(b), ValueError,
           "tp.compile: unknown backend '", b, "' (expected 'stax', 'eager', 'aot_eager', a registered name, or a callable)");
  const std::string& m = options_.mode;
  TP_CHECK(m.empty() || m == "default" || m == "reduce-overhead" || m == "max-autotune" ||
               m == "max-autotune-no-cudagraphs",
           ValueError, "tp.compile: unknown mode '", m, "'");
}

void CompiledFunction::check_arity(const std::vector<ArgValue>& args) const {
  if (num_params_ >= 0 && static_cast<int>(args.size()) != num_params_)
    throw TypeError(str("compiled function takes ", num_params_, " positional argument", num_params_ == 1 ? "" : "s",
                        " but ", args.size(), " were given"));
}

bool CompiledFunction::first_level_matches(const std::vector<ArgValue>& args) const {
  if (!first_.artifact || args.size() != first_.impls.size() || GradMode::is_enabled() != first_.grad_mode) return false;
  size_t s = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      const TensorImpl* impl = t->impl();
      // Identity + version: the same object, unchanged since the last call. The
      // weak_ptr rules out a new tensor that happens to reuse a freed address.
      if (impl != first_.impls[i] || impl->version() != first_.versions[i] ||
          impl->requires_grad != static_cast<bool>(first_.requires_grad[i]) || first_.alive[i].expired())
        return false;
    } else {
      if (first_.impls[i] != nullptr || s >= first_.scalars.size() || !(std::get<Scalar>(args[i]) == first_.scalars[s]))
        return false;
      ++s;
    }
  }
  return true;
}

void CompiledFunction::remember_first_level(const std::vector<ArgValue>& args, const Artifact* a) {
  first_ = FirstLevel{};
  first_.grad_mode = GradMode::is_enabled();
  for (auto& arg : args) {
    if (const Tensor* t = std::get_if<Tensor>(&arg)) {
      first_.impls.push_back(t->impl());
      first_.alive.push_back(t->impl_ptr());
      first_.versions.push_back(t->version());
      first_.requires_grad.push_back(t->requires_grad());
    } else {
      first_.impls.push_back(nullptr);
      first_.alive.emplace_back();
      first_.versions.push_back(0);
      first_.requires_grad.push_back(0);
      first_.scalars.push_back(std::get<Scalar>(arg));
    }
  }
  first_.artifact = a;
}

std::string CompiledFunction::specialization_key(const std::vector<ArgValue>& args) const {
  // Raw bytes: the key is only compared for equality, never shown.
  std::string k;
  k.reserve(64 * args.size());
  auto put = [&](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  bool grad = GradMode::is_enabled();
  put(&grad, 1);
  for (auto& arg : args) {
    if (const Tensor* t = std::get_if<Tensor>(&arg)) {
      char tag = 'T';
      put(&tag, 1);
      DType dt = t->dtype();
      put(&dt, 1);
      bool rg = t->requires_grad();
      put(&rg, 1);
      int64_t nd = t->dim();
      put(&nd, 8);
      put(t->sizes().data(), 8 * nd);
      put(t->strides().data(), 8 * nd);
    } else {
      const Scalar& s = std::get<Scalar>(arg);
      char tag = 'S';
      put(&tag, 1);
      std::string r = s.repr();
      k += r;
      k += '\0';
    }
  }
  return k;
}

std::string CompiledFunction::describe(const std::vector<ArgValue>& args) const {
  std::string d;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i);
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      d += str(name, ": ", dtype_name(t->dtype()), shape_str(t->sizes()), " strides ", shape_str(t->strides()),
               t->requires_grad() ? " requires_grad" : "", "\n");
    } else {
      d += str(name, " = ", std::get<Scalar>(args[i]).repr(), "\n");
    }
  }
  if (!GradMode::is_enabled()) d += "grad mode: disabled\n";
  return d;
}

static std::string first_difference(const std::string& a, const std::string& b) {
  // Guards are a projection of the key: the first differing line is the failed guard.
  size_t pa = 0, pb = 0;
  while (pa < a.size() && pb < b.size()) {
    size_t ea = a.find('\n', pa), eb = b.find('\n', pb);
    std::string la = a.substr(pa, ea - pa), lb = b.substr(pb, eb - pb);
    if (la != lb) return la + "  (cached version: " + lb + ")";
    pa = ea + 1;
    pb = eb + 1;
  }
  return "argument count or grad mode changed";
}

RegionFn CompiledFunction::run_backend(std::shared_ptr<graph::Graph> g, const std::vector<Tensor>& tensors,
                                       bool needs_grad, std::string* source) {
  std::shared_ptr<const graph::Graph> cg = g;
  auto eager = [cg](const std::vector<Tensor>& in) { return graph::interpret(*cg, in); };
  if (needs_grad) {
    // No compiled training yet: run the captured graph operator by operator
    // with autograd recording, which gives correct gradients.
    return eager;
  }
  if (options_.custom_backend) return options_.custom_backend(cg, tensors);
  if (const CustomBackend* b = find_backend(options_.backend)) return (*b)(cg, tensors);
  // "aot_eager" is the eager prefix plus the AOT layer (Section 11.4); until
  // the AOT layer exists it is the same prefix as "eager".
  if (options_.backend == "eager" || options_.backend == "aot_eager") return eager;

  // Stax: a copy with composites decomposed into the primitives it lowers.
  auto sg = g->clone();
  passes::PassOptions po;
  po.decompose = true;
  passes::run_default_passes(*sg, po);
  try {
    auto region = stax::compile_region(*sg);
    Metrics& m = metrics();
    m.compile_count++;
    m.generated_kernel_count += region->kernel_count();
    (region->disk_hit() ? m.cache_hits : m.cache_misses)++;
    *source = region->source();
    if (log_enabled("code"))
      std::fprintf(stderr, "[tp.compile] generated code (%s):\n%s\n", region->source_path().c_str(),
                   region->source().c_str());
    return [region](const std::vector<Tensor>& in) { return region->run(in); };
  } catch (const BackendError& e) {
    if (options_.strict_native) throw;
    metrics().fallback_count++;
    if (log_enabled("recompiles") || log_enabled("graph"))
      std::fprintf(stderr, "[tp.compile] falling back to eager: %s\n", e.what());
    return eager;
  }
}

CompiledFunction::Artifact CompiledFunction::build(const std::vector<ArgValue>& args,
                                                   const std::vector<Tensor>& tensors) {
  std::vector<std::string> tensor_names;
  std::vector<size_t> tensor_pos;
  for (size_t i = 0; i < args.size(); ++i)
    if (std::holds_alternative<Tensor>(args[i])) {
      tensor_pos.push_back(i);
      tensor_names.push_back(i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i));
    }
  // Capture: run the user's function on the real inputs (run-time proxies),
  // with Python scalars substituted back in place.
  graph::TraceResult tr = graph::trace(
      [&](const std::vector<Tensor>& proxies) {
        std::vector<ArgValue> a = args;
        for (size_t k = 0; k < tensor_pos.size(); ++k) a[tensor_pos[k]] = proxies[k];
        return fn_(a);
      },
      tensors, tensor_names);
  metrics().captures++;
  std::shared_ptr<graph::Graph> g = std::move(tr.graph);
  passes::PassOptions po;
  po.decompose = false;
  passes::run_default_passes(*g, po);
  if (log_enabled("graph")) std::fprintf(stderr, "[tp.compile] captured graph:\n%s\n", g->code().c_str());
  bool needs_grad = false;
  if (GradMode::is_enabled())
    for (auto& t : tensors) needs_grad |= t.requires_grad();
  Artifact a;
  a.graph = g;
  a.description = describe(args);
  std::string source;
  a.run = run_backend(g, tensors, needs_grad, &source);
  last_graph_ = g;
  last_source_ = source;
  return a;
}

std::vector<Tensor> CompiledFunction::call(const std::vector<ArgValue>& args) {
  // Called while an enclosing compiled function is being captured: inline the
  // body so its operators land in the enclosing graph (running our own
  // artifact here would hide them from the tracer).
  if (graph::is_tracing()) {
    check_arity(args);
    return fn_(args);
  }
  if (epoch_ != cache_epoch()) {
    cache_.clear();
    first_ = FirstLevel{};
    epoch_ = cache_epoch();
  }
  std::vector<Tensor> tensors;
  tensors.reserve(args.size());
  for (auto& a : args)
    if (const Tensor* t = std::get_if<Tensor>(&a)) tensors.push_back(*t);
  if (first_level_matches(args)) {
    metrics().first_level_hits++;
    return first_.artifact->run(tensors);
  }
  check_arity(args);
  std::string key = specialization_key(args);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    metrics().specialization_hits++;
  } else {
    if (!cache_.empty()) {
      metrics().recompiles++;
      if (log_enabled("recompiles")) {
        // Report against the version used last: that is the guard chain the call just failed.
        const Artifact* last = first_.artifact ? first_.artifact : cache_.begin()->second.get();
        std::fprintf(stderr, "[tp.compile] recompiling: guard failed: %s\n",
                     first_difference(describe(args), last->description).c_str());
      }
    }
    auto art = std::make_unique<Artifact>(build(args, tensors));
    it = cache_.emplace(std::move(key), std::move(art)).first;
  }
  remember_first_level(args, it->second.get());
  return it->second->run(tensors);
}

}  // namespace tp::compile
