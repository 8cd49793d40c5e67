#include "compile/compiled_function.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "compile/backend.h"
#include "compile/dynamic_marks.h"
#include "compile/metrics.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "graph/interpreter.h"
#include "core/grad_mode.h"
#include "core/named_message.h"
#include "core/profiler.h"
#include "core/warning.h"
#include "graph/sym_shape_rules.h"
#include "graph/tracer.h"
#include "ops/autocast.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/random_functional.h"
#include "passes/passes.h"

namespace tp::compile {
namespace {

StructuredUserFn structured(UserFn fn) {
  return [fn = std::move(fn)](const std::vector<ArgValue>& args, std::shared_ptr<const OutputStructure>*) {
    return fn(args);
  };
}

// The part of a tensor the specialization key depends on (raw bytes, compared for equality only).
void append_tensor_key(std::string& k, const Tensor& t) {
  auto put = [&](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  char tag = 'T';
  put(&tag, 1);
  DType dt = t.dtype();
  put(&dt, 1);
  bool rg = t.requires_grad();
  put(&rg, 1);
  int64_t nd = t.dim();
  put(&nd, 8);
  put(t.sizes().data(), 8 * nd);
  put(t.strides().data(), 8 * nd);
  // The device: an artifact generated for CPU memory must never receive a
  // CUDA tensor of the same layout (or the reverse). CPU keys are unchanged.
  if (t.device().kind != Device::Kind::CPU) {
    char dev[2] = {'D', static_cast<char>(t.device().index)};
    put(dev, 2);
  }
}

// Which tensor arguments share memory (a storage): a version captured with
// distinct tensors computes a write into one without its effect on the other, so
// `f(x, x)` must not reuse the version of `f(x, y)` (nor the reverse). Appends
// nothing when no two share, so the usual key is unchanged.
// The first tensor argument before i that shares argument i's storage, or -1.
int earlier_sharing_storage(const std::vector<ArgValue>& args, size_t i) {
  const Tensor* t = std::get_if<Tensor>(&args[i]);
  if (!t || !t->defined()) return -1;
  for (size_t j = 0; j < i; ++j) {
    const Tensor* u = std::get_if<Tensor>(&args[j]);
    if (u && u->defined() && u->impl()->storage.get() == t->impl()->storage.get()) return static_cast<int>(j);
  }
  return -1;
}

void append_autocast_key(std::string& k) {
  const uint32_t code = autocast_state_code();
  for (int b = 0; b < 4; ++b) k.push_back(static_cast<char>((code >> (8 * b)) & 0xff));
}

void append_alias_key(std::string& k, const std::vector<ArgValue>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const int j = earlier_sharing_storage(args, i);
    if (j < 0) continue;
    uint32_t pair[2] = {static_cast<uint32_t>(i), static_cast<uint32_t>(j)};
    k += 'A';
    k.append(reinterpret_cast<const char*>(pair), sizeof(pair));
  }
}

std::string tensor_line(const std::string& name, const Tensor& t) {
  return str(name, ": ", dtype_name(t.dtype()), shape_str(t.sizes()), " strides ", shape_str(t.strides()),
             t.requires_grad() ? " requires_grad" : "", "\n");
}

bool shares_memory(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// Eager's results under inference_mode are inference tensors, and a view of an
// inference tensor is one too; the backend's results are plain tensors until
// marked here (otherwise a compiled call under inference_mode would hand back
// tensors that a later in-place write or autograd accepts where eager refuses).
// A result sharing an input's memory has that input's kind. A result the
// function made inside its own `with tp.inference_mode():` (made_inside[i]) is
// one whatever the caller's mode: otherwise such features went on into autograd
// or an in-place write outside inference_mode, both of which eager refuses.
void mark_inference_results(const std::vector<Tensor>& out, const std::vector<Tensor>& inputs,
                            const std::vector<char>& made_inside) {
  const bool mode = autograd::inference_mode_enabled();
  if (!mode && std::none_of(made_inside.begin(), made_inside.end(), [](char c) { return c != 0; }) &&
      std::none_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return autograd::is_inference(t); }))
    return;
  for (size_t i = 0; i < out.size(); ++i) {
    const Tensor& o = out[i];
    if (!o.defined() || autograd::is_inference(o)) continue;
    if (i < made_inside.size() && made_inside[i]) {
      autograd::meta(o).inference = true;
      continue;
    }
    const Tensor* base = nullptr;
    for (auto& in : inputs)
      if (in.defined() && shares_memory(o, in)) {
        base = &in;
        break;
      }
    if (base ? autograd::is_inference(*base) : mode) autograd::meta(o).inference = true;
  }
}

// The random draws of one call: in a version built from a symbolic graph, a
// draw's counters follow its element count at this call's sizes (eager's
// ceil(numel / per)), and so do the places of the draws after it.
// `g` is the version's graph when it is symbolic, else null (the capture's
// counters: also the backends' example inputs).
std::vector<PhiloxDraw> call_draws(const std::vector<graph::TraceResult::RngInput>& rng, const graph::Graph* g,
                                   const std::vector<Tensor>& all) {
  std::vector<PhiloxDraw> d;
  d.reserve(rng.size());
  std::unordered_map<int, int64_t> values;
  bool have_values = false;
  for (auto& r : rng) {
    uint64_t counters = r.counters;
    if (g && !r.numel.is_const()) {
      if (!have_values) values = graph::symbol_values(*g, all), have_values = true;
      const int64_t n = stax::ir::evaluate(r.numel, values);
      counters = static_cast<uint64_t>((n + r.per - 1) / r.per);
    }
    d.push_back({r.generator, counters});
  }
  return d;
}

}  // namespace

CompiledFunction::CompiledFunction(UserFn fn, CompileOptions options, std::vector<std::string> arg_names,
                                   int num_params)
    : CompiledFunction(structured(std::move(fn)), std::move(options), std::move(arg_names), num_params) {}

CompiledFunction::CompiledFunction(StructuredUserFn fn, CompileOptions options, std::vector<std::string> arg_names,
                                   int num_params)
    : fn_(std::move(fn)),
      options_(std::move(options)),
      arg_names_(std::move(arg_names)),
      num_params_(num_params),
      epoch_(cache_epoch()) {
  const std::string& b = options_.backend;
  TP_CHECK(options_.custom_backend || lookup_backend(b), ValueError,
           "tp.compile: unknown backend '", b, "' (expected 'stax', 'eager', 'aot_eager', a registered name, or a callable)");
  const std::string& m = options_.mode;
  TP_CHECK(m.empty() || m == "default" || m == "reduce-overhead" || m == "max-autotune" ||
               m == "max-autotune-no-cudagraphs",
           ValueError, "tp.compile: unknown mode '", m, "'");
  if (auto it = options_.options.find("shape_buckets"); it != options_.options.end())
    bucket_policy_ = BucketPolicy::parse(it->second);
}

size_t CompiledFunction::num_specializations() const {
  size_t n = 0;
  for (auto& kv : cache_) n += kv.second.size();
  for (auto& kv : symbolic_cache_) n += kv.second.size();
  return n;
}

bool CompiledFunction::ShapeSpec::matches(const std::vector<Tensor>& tensors, std::unordered_map<int, int64_t>* values,
                                          std::string* why) const {
  std::unordered_map<int, int64_t> local;
  std::unordered_map<int, int64_t>& v = values ? *values : local;
  v.clear();
  auto origin = [&](int k) { return symbols[static_cast<size_t>(k)].origin; };
  for (size_t i = 0; i < inputs.size() && i < tensors.size(); ++i) {
    const Input& in = inputs[i];
    const TensorImpl* t = tensors[i].impl();
    if (t->sizes.size() != in.dims.size()) {
      if (why) *why = str(in.name, ".dim() == ", in.dims.size(), " (got ", t->sizes.size(), ")");
      return false;
    }
    for (size_t d = 0; d < in.dims.size(); ++d) {
      const int64_t size = t->sizes[d], want = in.dims[d];
      if (want >= 0) {
        if (size != want) {
          if (why) *why = str(in.name, ".size(", d, ") == ", want, " (got ", size, ")");
          return false;
        }
        continue;
      }
      const int k = static_cast<int>(-want - 1);
      const graph::SymbolInfo& s = symbols[static_cast<size_t>(k)];
      auto [it, fresh] = v.emplace(stax::ir::size_var_id(k), size);
      if (!fresh && it->second != size) {
        if (why) *why = str(in.name, ".size(", d, ") == ", origin(k), " (got ", size, " and ", it->second, ")");
        return false;
      }
      if (size < s.min || size > s.max) {
        if (why)
          *why = size < s.min ? str(in.name, ".size(", d, ") >= ", s.min, " (got ", size, ")")
                              : str(in.name, ".size(", d, ") <= ", s.max, " (got ", size, ")");
        return false;
      }
    }
    if (in.symbolic ? !tensors[i].is_contiguous() : t->strides != in.strides) {
      if (why)
        *why = in.symbolic ? str(in.name, " is contiguous (got strides ", shape_str(t->strides), ")")
                           : str(in.name, ".stride() == ", shape_str(in.strides), " (got ", shape_str(t->strides), ")");
      return false;
    }
  }
  for (const graph::ShapeGuard& g : guards) {
    if (g.holds(v)) continue;
    if (why) {
      std::vector<int> ks;
      stax::ir::collect_sizes(g.expr, ks);
      std::string got;
      for (int k : ks) got += str(got.empty() ? "" : ", ", origin(k), " = ", v.at(stax::ir::size_var_id(k)));
      *why = str(g.describe(symbols), " (got ", got, ")");
    }
    return false;
  }
  return true;
}

std::string CompiledFunction::nonshape_key(const std::vector<ArgValue>& args) const {
  std::string k;
  k.push_back(GradMode::is_enabled() ? '1' : '0');
  k.push_back(static_cast<char>(default_float_dtype()));  // see specialization_key
  append_autocast_key(k);  // see specialization_key
  k += state_;
  k += '\0';
  for (auto& arg : args) {
    if (const Tensor* t = std::get_if<Tensor>(&arg)) {
      k += 'T';
      k += static_cast<char>(t->dtype());
      k += t->requires_grad() ? '1' : '0';
      k += static_cast<char>(t->dim());
    } else {
      k += 'S';
      k += std::get<Scalar>(arg).repr();
      k += '\0';
    }
  }
  append_alias_key(k, args);
  return k;
}

void CompiledFunction::note_sizes(const std::vector<Tensor>& tensors) {
  // Automatic dynamic: a dim whose size differs between captures is symbolic from now on.
  if (seen_sizes_.size() < tensors.size()) seen_sizes_.resize(tensors.size());
  if (changed_dims_.size() < tensors.size()) changed_dims_.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape& now = tensors[i].sizes();
    std::vector<bool>& ch = changed_dims_[i];
    if (ch.size() < now.size()) ch.resize(now.size(), false);
    for (const Shape& before : seen_sizes_[i])
      if (before.size() == now.size())
        for (size_t d = 0; d < now.size(); ++d)
          if (before[d] != now[d]) ch[d] = true;
    seen_sizes_[i].push_back(now);
  }
}

graph::DynamicSpec CompiledFunction::dynamic_spec(const std::vector<Tensor>& tensors) {
  using Mode = CompileOptions::Dynamic;
  graph::DynamicSpec spec;
  if (options_.dynamic == Mode::Off) return spec;
  bool any = false, marked = false;
  spec.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t nd = tensors[i].dim();
    spec[i].resize(static_cast<size_t>(nd));
    std::map<int64_t, DimMark> marks = dim_marks(tensors[i]);
    for (int64_t d = 0; d < nd; ++d) {
      graph::DimSpec& ds = spec[i][static_cast<size_t>(d)];
      ds.symbolic = options_.dynamic == Mode::On ||
                    (i < changed_dims_.size() && static_cast<size_t>(d) < changed_dims_[i].size() &&
                     changed_dims_[i][static_cast<size_t>(d)]);
      auto m = marks.find(d);
      if (m != marks.end()) {
        marked |= m->second.dynamic;
        ds.symbolic = m->second.dynamic;
        ds.min = m->second.min;
        ds.max = m->second.max;
      }
      any |= ds.symbolic;
    }
  }
  // Automatic dynamic with a backend that takes only static graphs: nothing to gain.
  const Backend* b = options_.custom_backend ? nullptr : lookup_backend(options_.backend);
  if (options_.dynamic == Mode::Auto && !marked && !(b && b->symbolic)) any = false;
  if (!any) spec.clear();
  return spec;
}

void CompiledFunction::check_arity(const std::vector<ArgValue>& args) const {
  if (num_params_ >= 0 && static_cast<int>(args.size()) != num_params_ + extra_args_)
    throw TypeError(str("compiled function takes ", num_params_, " positional argument", num_params_ == 1 ? "" : "s",
                        " but ", args.size(), " were given"));
}

CompiledFunction::Stamp CompiledFunction::Stamp::of(const Tensor& t) {
  Stamp s;
  const TensorImpl* i = t.impl();
  s.impl = i;
  s.alive = t.impl_ptr();
  s.storage = i->storage.get();
  s.version = i->version();
  s.offset = i->offset;
  s.dtype = i->dtype;
  s.requires_grad = i->requires_grad;
  s.sizes = i->sizes;
  s.strides = i->strides;
  return s;
}

bool CompiledFunction::Stamp::matches(const Tensor& t) const {
  // Identity + version: the same object, unchanged since the last call. The
  // weak_ptr rules out a new tensor that happens to reuse a freed address.
  // Storage, offset, dtype, sizes and strides: `x.data = other` (and any other
  // metadata change) keeps the object and the version counter of the new memory.
  const TensorImpl* i = t.impl();
  return i == impl && i->storage.get() == storage && i->version() == version && i->requires_grad == requires_grad &&
         i->offset == offset && i->dtype == dtype && i->sizes == sizes && i->strides == strides && !alive.expired();
}

bool CompiledFunction::first_level_matches(const std::vector<ArgValue>& args) const {
  if (!first_.artifact || args.size() != first_.tensors.size() || GradMode::is_enabled() != first_.grad_mode ||
      default_float_dtype() != first_.default_dtype || autocast_state_code() != first_.autocast ||
      state_ != first_.state)
    return false;
  size_t s = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      if (!first_.tensors[i].matches(*t)) return false;
    } else {
      if (first_.tensors[i].impl != nullptr || s >= first_.scalars.size() ||
          !(std::get<Scalar>(args[i]) == first_.scalars[s]))
        return false;
      ++s;
    }
  }
  return true;
}

bool CompiledFunction::read_free(const Artifact& a, std::vector<Tensor>* all) const {
  for (auto& src : a.free) {
    Tensor t;
    if (src.grad_of >= 0) {
      const Tensor& owner = (*all)[static_cast<size_t>(src.grad_of)];
      if (owner.impl()->grad) t = Tensor(owner.impl()->grad);
    } else {
      t = src.read();
    }
    if (!t.defined()) return false;
    all->push_back(std::move(t));
  }
  return true;
}

namespace {
// What the binding reports during one capture: `.grad` reads, and `.data` aliases
// with the tensor each was taken of.
struct CaptureReads {
  std::vector<Tensor> grads;
  std::vector<std::pair<Tensor, Tensor>> data;
};
thread_local CaptureReads* t_capture_reads = nullptr;

// Collects the reads of one capture (restores an enclosing one's log).
struct CaptureReadLog {
  CaptureReads* outer;
  bool active = true;
  explicit CaptureReadLog(CaptureReads* log) : outer(t_capture_reads) { t_capture_reads = log; }
  void stop() {
    if (active) t_capture_reads = outer;
    active = false;
  }
  ~CaptureReadLog() { stop(); }
};
}  // namespace

void note_grad_read(const Tensor& t) {
  // (Only a tensor that requires grad, or has a gradient, can gain or lose one:
  // the capture's intermediates never do.)
  if (t_capture_reads && t.defined() && (t.requires_grad() || t.impl()->grad)) t_capture_reads->grads.push_back(t);
}

void note_data_read(const Tensor& alias, const Tensor& of) {
  if (t_capture_reads && alias.defined()) t_capture_reads->data.emplace_back(alias, of);
}

bool CompiledFunction::grads_match(const Artifact& a, const std::vector<Tensor>& all, std::string* why) const {
  for (const auto& g : a.grad_reads) {
    Tensor t = g.input >= 0 ? (static_cast<size_t>(g.input) < all.size() ? all[static_cast<size_t>(g.input)] : Tensor())
                            : g.source.read();
    const bool defined = t.defined() && t.impl()->grad != nullptr;
    if (t.defined() && defined == g.defined) continue;
    if (why)
      *why = !t.defined() ? str(g.source.name, " is no longer a tensor")
                          : str(g.source.name, ".grad is ", defined ? "a tensor" : "None",
                                " now (it was ", g.defined ? "a tensor" : "None", " when captured)");
    return false;
  }
  return true;
}

void CompiledFunction::remember_first_level(const std::vector<ArgValue>& args, const std::vector<Tensor>& all,
                                            const Artifact* a) {
  first_ = FirstLevel{};
  first_.grad_mode = GradMode::is_enabled();
  first_.default_dtype = default_float_dtype();
  first_.autocast = autocast_state_code();
  first_.state = state_;
  size_t n = 0;
  for (auto& arg : args) {
    if (const Tensor* t = std::get_if<Tensor>(&arg)) {
      first_.tensors.push_back(Stamp::of(*t));
      ++n;
    } else {
      first_.tensors.emplace_back();
      first_.scalars.push_back(std::get<Scalar>(arg));
    }
  }
  for (size_t i = n; i < all.size(); ++i) first_.free.push_back(Stamp::of(all[i]));
  first_.artifact = a;
}

std::string CompiledFunction::specialization_key(const std::vector<ArgValue>& args) const {
  // Raw bytes: the key is only compared for equality, never shown.
  std::string k;
  k.reserve(64 * args.size());
  bool grad = GradMode::is_enabled();
  k.push_back(grad ? '1' : '0');
  // The default float dtype decides the dtype of factories (tp.zeros(3)), of Python floats meeting
  // integer tensors and of integer true division; the capture bakes it in, so
  // tp.set_default_dtype(tp.float64) between calls must select another version.
  k.push_back(static_cast<char>(default_float_dtype()));
  // tp.autocast's state (per device type: on/off and dtype): the capture records
  // the casts it made, so a version captured outside autocast must not serve a
  // call inside it (it would compute in float32), nor the reverse.
  append_autocast_key(k);
  k += state_;
  k += '\0';
  for (auto& arg : args) {
    if (const Tensor* t = std::get_if<Tensor>(&arg)) {
      append_tensor_key(k, *t);
    } else {
      k += 'S';
      k += std::get<Scalar>(arg).repr();
      k += '\0';
    }
  }
  append_alias_key(k, args);
  return k;
}

std::string CompiledFunction::free_key(const std::vector<Tensor>& all, size_t first_free) {
  std::string k;
  for (size_t i = first_free; i < all.size(); ++i) append_tensor_key(k, all[i]);
  return k;
}

std::string CompiledFunction::describe(const std::vector<ArgValue>& args, const std::vector<FreeTensorSource>& free,
                                       const std::vector<Tensor>& all) const {
  std::string d;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i);
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      d += tensor_line(name, *t);
    } else {
      d += str(name, " = ", std::get<Scalar>(args[i]).repr(), "\n");
    }
  }
  size_t n = all.size() - std::min(all.size(), free.size());
  for (size_t k = 0; k < free.size() && n + k < all.size(); ++k) d += tensor_line(free[k].name, all[n + k]);
  // Python state the capture baked in: module training flags (modules() order) or an optimizer's layout.
  auto arg_name = [&](size_t a) { return a < arg_names_.size() ? arg_names_[a] : "arg" + std::to_string(a); };
  for (size_t i = 1; i < args.size(); ++i) {  // the aliasing part of the key (append_alias_key)
    const int j = earlier_sharing_storage(args, i);
    if (j >= 0) d += str(arg_name(i), " shares memory with ", arg_name(static_cast<size_t>(j)), "\n");
  }
  if (!state_.empty()) d += "captured Python state (module training flags and forward hook ids in modules() order, or optimizer state): " + state_ + "\n";
  if (!GradMode::is_enabled()) d += "grad mode: disabled\n";
  if (default_float_dtype() != DType::Float32) d += str("default dtype: ", dtype_name(default_float_dtype()), "\n");
  if (const std::string ac = autocast_state_describe(); !ac.empty()) d += str("autocast: ", ac, "\n");
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
  // One description has an extra line (e.g. "b shares memory with a"): that is the difference.
  if (pa < a.size()) return a.substr(pa, a.find('\n', pa) - pa) + "  (cached version: no such line)";
  if (pb < b.size()) return "(not so now)  cached version: " + b.substr(pb, b.find('\n', pb) - pb);
  return "argument count or grad mode changed";
}

int CompiledFunction::int_option(const char* name, int fallback) const {
  auto it = options_.options.find(name);
  if (it == options_.options.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    throw ValueError(str("tp.compile: options['", name, "'] must be an int, got '", it->second, "'"));
  }
}

int CompiledFunction::max_gate_artifacts() const { return int_option("max_gate_artifacts", 8); }

// Versions of one function before further misses run eagerly: a value that
// changes every call (a module's call counter, an int step argument used as a
// size) would otherwise capture and compile on every call.
int CompiledFunction::max_versions() const { return int_option("max_versions", 16); }

void CompiledFunction::warn_fallback(const std::string& reason) {
  // Once per compiled function, like a graph-break report: the user learns that
  // the call runs eagerly and why; the warnings module (or options
  // {"warn_fallback": "0"}) silences it.
  if (warned_fallback_) return;
  warned_fallback_ = true;
  auto it = options_.options.find("warn_fallback");
  if (it != options_.options.end() && (it->second == "0" || it->second == "False" || it->second == "false")) return;
  warn(str("tp.compile: running eagerly instead of generated code: ", reason));
}

std::set<std::string> CompiledFunction::disabled_passes() const { return compile::disabled_passes(options_); }

RegionFn CompiledFunction::run_backend(std::shared_ptr<graph::Graph> g, const std::vector<Tensor>& tensors,
                                       const std::string& grad_reason, const std::vector<int>& written_inputs,
                                       std::string* source, const std::vector<std::pair<int, int>>& write_into,
                                       std::shared_ptr<aot::JointGraph> joint,
                                       std::shared_ptr<const std::vector<std::vector<int>>> results_from_results,
                                       std::shared_ptr<const std::vector<std::vector<int>>> results_eager_reads,
                                       std::string backward_error) {
  std::shared_ptr<const graph::Graph> cg = g;
  Backend custom;
  const Backend* backend = nullptr;
  if (options_.custom_backend) {
    custom = user_backend(options_.custom_backend);
    backend = &custom;
  } else {
    backend = lookup_backend(options_.backend);
  }
  TP_CHECK(backend, ValueError, "tp.compile: unknown backend '", options_.backend, "'");
  const std::string region_key = str(name_.empty() ? "compiled function" : name_,
                                     num_specializations() > 0 ? str(" #", num_specializations() + 1) : "");
  const std::string region = "'" + region_key + "'";
  auto warn = [this](const std::string& why) { warn_fallback(why); };
  source->clear();
  last_aot_.reset();
  if (grad_reason.empty() || !backend->behind_aot) {
    // Inference (or the "eager" backend, which runs the captured graph with
    // autograd recording when the call needs gradients).
    // Only here: behind the AOT layer the forward graph returns the written
    // values among its saved tensors, and the write must be recorded.
    return backend->compile(BackendRequest{cg, tensors, options_, region, source, warn, &last_kernels_,
                                           &last_fallback_reason_, write_into});
  }
  // Training: the AOT layer (csrc/aot) traces the joint graph, cuts it into a
  // forward and a backward graph, and the backend compiles each of them.
  const Backend b = *backend;
  const CompileOptions opts = options_;
  auto forward_source = std::make_shared<std::string>();
  auto forward_kernels = std::make_shared<std::vector<stax::KernelInfo>>();
  auto forward_reason = std::make_shared<std::string>();
  aot::RegionCompiler compile = [b, opts, region, warn, forward_source, forward_kernels, forward_reason](std::shared_ptr<const graph::Graph> part,
                                                                const std::vector<Tensor>& examples,
                                                                const std::string& which) {
    std::string src;
    // The backward compiles at the first backward call, possibly after the
    // compiled function is gone: its fallback warning does not reach back.
    std::function<void(const std::string&)> w = warn;
    if (which != "forward")
      w = [opts](const std::string& why) {
        auto it = opts.options.find("warn_fallback");
        if (it == opts.options.end() || (it->second != "0" && it->second != "False" && it->second != "false"))
          tp::warn(str("tp.compile: running eagerly instead of generated code: ", why));
      };
    const bool fwd = which == "forward";
    RegionFn fn = b.compile(BackendRequest{part, examples, opts, str(region, " (", which, ")"), &src, w,
                                           fwd ? forward_kernels.get() : nullptr, fwd ? forward_reason.get() : nullptr, {}});
    if (which == "forward") *forward_source = src;
    return fn;
  };
  aot::AotOptions ao;
  ao.region = region;
  ao.log = log_enabled("aot");
  ao.backward_ahead = options_.strict_native;
  ao.backward_first = b.builds_in_background && !options_.strict_native;
  ao.written_inputs = written_inputs;
  ao.joint = std::move(joint);
  ao.results_from_results = std::move(results_from_results);
  ao.results_eager_reads = std::move(results_eager_reads);
  ao.backward_error = std::move(backward_error);
  auto budget = options_.options.find("activation_memory_budget");
  if (budget != options_.options.end()) {
    // An int is bytes; a float in [0, 1] a fraction of what the unconstrained cut saves.
    const std::string& v = budget->second;
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    // A float text is a fraction (1.5 is no byte count: rounding it down
    // would recompute everything); a byte count past int64 means "no limit".
    const bool is_float = v.find_first_of(".eEnN") != std::string::npos;
    TP_CHECK(end && *end == '\0' && !v.empty() && d >= 0 && std::isfinite(d) && (!is_float || d <= 1.0), ValueError,
             "tp.compile: options['activation_memory_budget'] must be a byte count or a fraction in [0, 1], got '", v,
             "'");
    if (is_float) ao.partition.budget_fraction = d;
    else ao.partition.budget_bytes = d >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(d);
  }
  aot::AotResult r;
  try {
    r = aot::compile_training_region(cg, tensors, compile, ao);
  } catch (const BackendError&) {
    throw;  // strict_native, or a backend that refuses: the user asked for it
  } catch (const Error& e) {
    // The joint graph could not be traced or cut (a derivative formula the tracer
    // cannot record): eager autograd over the captured graph is still correct.
    if (options_.strict_native) throw BackendError(str("tp.compile(strict_native=True): region ", region, ": ", e.what()));
    metrics().fallback_count++;
    last_fallback_reason_ = str("the AOT layer failed for region ", region, " (", e.what(), ")");
    warn_fallback(last_fallback_reason_ + "; running it with eager autograd");
    return [cg](const std::vector<Tensor>& in) { return graph::interpret(*cg, in); };
  }
  *source = *forward_source;
  last_kernels_ = *forward_kernels;
  last_fallback_reason_ = *forward_reason;
  Metrics& m = metrics();
  m.aot_regions++;
  m.saved_bytes += r.partition.saved_bytes;
  record_saved_bytes(region_key, r.partition.saved_bytes);
  last_aot_ = std::make_shared<const AotInfo>(AotInfo{r.joint_code, r.partition});
  return r.run;
}

std::unique_ptr<CompiledFunction::Artifact> CompiledFunction::build(const std::vector<ArgValue>& args,
                                                                     std::vector<Tensor>* inputs,
                                                                     const graph::DynamicSpec* dynamic) {
  const std::vector<Tensor> tensors = *inputs;
  auto a = std::make_unique<Artifact>();
  std::vector<std::string> tensor_names;
  std::vector<size_t> tensor_pos;
  for (size_t i = 0; i < args.size(); ++i)
    if (std::holds_alternative<Tensor>(args[i])) {
      tensor_pos.push_back(i);
      tensor_names.push_back(i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i));
    }
  // Capture: run the user's function on the real inputs (run-time proxies),
  // with Python scalars substituted back in place. Free tensors become extra inputs.
  // A call that needs gradients through the AOT layer is captured symbolically
  // too (its joint graph is then traced with the same symbols, below); not for
  // callable backends (they take no symbolic graph).
  const Backend* backend = options_.custom_backend ? nullptr : lookup_backend(options_.backend);
  if (dynamic && GradMode::is_enabled() && !backend)
    for (auto& t : tensors)
      if (t.requires_grad()) dynamic = nullptr;
  CaptureReads reads;
  CaptureReadLog read_log(&reads);
  const std::vector<Tensor>& grad_reads = reads.grads;
  graph::TraceResult tr = graph::trace(
      [&](const std::vector<Tensor>& proxies) {
        std::vector<ArgValue> v = args;
        for (size_t k = 0; k < tensor_pos.size(); ++k) v[tensor_pos[k]] = proxies[k];
        return fn_(v, &a->structure);
      },
      tensors, tensor_names, /*execute=*/true, /*lift_free_tensors=*/true, dynamic);
  read_log.stop();
  metrics().captures++;
  for (auto& [op, composite] : tr.part_of) {
    auto [it, inserted] = part_of_.try_emplace(op, composite);
    if (!inserted && it->second != composite) it->second.clear();
  }
  // Passes, the joint graph and backends work on the captured graph, whose
  // casts are recorded: nothing after the capture may cast again.
  AutocastSuspend no_autocast;
  std::shared_ptr<graph::Graph> g = std::move(tr.graph);
  // Called under no_grad, the function may turn recording on inside (`with
  // enable_grad():`): the nodes recorded then are differentiable, so the version
  // is a training region like one called with grad mode on, run with recording on.
  // (Read before any pass adds nodes, which are marked enabled by default.)
  bool grad_inside = false;
  if (!GradMode::is_enabled())
    for (auto& n : g->nodes())
      if (n->opcode == graph::Opcode::CallFunction && n->grad_enabled) grad_inside = true;

  // How to re-read each free tensor at the next calls.
  if (locator_) {
    a->free = locator_(tr.free_tensors);
    TP_CHECK(a->free.size() == tr.free_tensors.size(), Error, "free-tensor locator returned ", a->free.size(),
             " sources for ", tr.free_tensors.size(), " tensors");
  } else {
    for (auto& t : tr.free_tensors) a->free.push_back({[t] { return t; }, "free tensor", false});
  }
  // A free tensor that is a tensor argument's gradient (`p.sub_(lr * p.grad)` with p
  // an argument) has no owner path: read through the argument at every call (it
  // used to be re-read as the capture's gradient object, stale after the next
  // backward) and written back like one (`p.grad.zero_()`).
  for (size_t k = 0; k < a->free.size(); ++k) {
    if (a->free[k].from_owner) continue;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined() && tensors[i].impl()->grad.get() == tr.free_tensors[k].impl()) {
        a->free[k].grad_of = static_cast<int>(i);
        a->free[k].from_owner = true;
        a->free[k].name = tensor_names[i] + ".grad";
        break;
      }
  }
  // A free tensor that is `w.data` of a tensor the capture never traced (an EMA
  // update `q.data.lerp_(p.data, 0.1)`, `w.data.add_(...)`) is a new alias with no
  // owner path: its write was dropped (no write-back) and each call read the
  // capture's alias. It is read as `.data` of `w`, found through w's path, at
  // every call (one alias kept while w's memory is the same) and written back.
  for (size_t k = 0; k < a->free.size() && locator_; ++k) {
    // (One that shares memory with an input or intermediate stays refused below:
    // two placeholders of one memory cannot express the write.)
    if (a->free[k].from_owner || tr.free_aliases_traced[k]) continue;
    const Tensor* of = nullptr;
    for (auto& [alias, w] : reads.data)
      if (alias.impl() == tr.free_tensors[k].impl()) of = &w;
    if (!of) continue;
    std::vector<FreeTensorSource> found = locator_({*of});
    if (found.empty() || !found[0].from_owner) continue;
    auto owner = std::make_shared<FreeTensorSource>(std::move(found[0]));
    auto last = std::make_shared<std::pair<Tensor, Tensor>>(*of, tr.free_tensors[k]);  // (w, its alias)
    a->free[k].read = [owner, last] {
      Tensor w = owner->read();
      if (!w.defined()) return w;
      const Tensor& d = last->second;
      if (last->first.impl() != w.impl() || d.impl()->storage != w.impl()->storage || d.offset() != w.offset() ||
          d.sizes() != w.sizes() || d.strides() != w.strides() || d.dtype() != w.dtype())
        *last = {w, autograd::data_alias(w)};
      return last->second;
    };
    a->free[k].name = owner->name + ".data";
    a->free[k].from_owner = true;
  }
  for (size_t k = 0; k < a->free.size(); ++k)
    if (!a->free[k].from_owner && tr.free_aliases_traced[k])
      throw CaptureError(str("cannot capture a tensor that shares memory with an input or intermediate but was made "
                             "outside the operators (", dtype_name(tr.free_tensors[k].dtype()),
                             shape_str(tr.free_tensors[k].sizes()),
                             ", e.g. by .detach() or .data) inside a compiled function yet"));
  // Lifted placeholders are named by where the tensor lives (`self.weight` -> self_weight).
  for (auto& n : g->nodes())
    if (n->opcode == graph::Opcode::Placeholder && n->input_index >= static_cast<int>(tensors.size()) &&
        n->input_index - tensors.size() < a->free.size() && a->free[n->input_index - tensors.size()].from_owner)
      g->rename(n.get(), a->free[n->input_index - tensors.size()].name);
  std::vector<Tensor> all = tensors;
  all.insert(all.end(), tr.free_tensors.begin(), tr.free_tensors.end());
  a->free_key = free_key(all, tensors.size());
  {
    // The `.grad` reads: by input where the tensor is one, else located as a free tensor is.
    std::set<const TensorImpl*> seen;
    std::vector<Tensor> elsewhere;
    for (const Tensor& t : grad_reads) {
      if (!seen.insert(t.impl()).second) continue;
      Artifact::GradRead gr;
      gr.defined = t.impl()->grad != nullptr;
      // A gradient the function went on to use is a free tensor, re-read through
      // its owner (or the argument) at every call: gone, the version is missed anyway.
      bool used = false;
      for (size_t k = 0; k < tr.free_tensors.size() && gr.defined && !used; ++k)
        used = tr.free_tensors[k].impl() == t.impl()->grad.get() && a->free[k].from_owner;
      if (used) continue;
      for (size_t j = 0; j < all.size() && gr.input < 0; ++j)
        if (all[j].impl() == t.impl()) gr.input = static_cast<int>(j);
      if (gr.input >= 0) {
        const size_t j = static_cast<size_t>(gr.input);
        gr.source.name = j < tensors.size() ? tensor_names[j] : a->free[j - tensors.size()].name;
      } else {
        elsewhere.push_back(t);
      }
      a->grad_reads.push_back(std::move(gr));
    }
    if (!elsewhere.empty()) {
      std::vector<FreeTensorSource> found;
      if (locator_) found = locator_(elsewhere);
      for (size_t k = 0; k < elsewhere.size(); ++k)
        if (k >= found.size()) found.push_back({[t = elsewhere[k]] { return t; }, "a tensor", false});
      size_t k = 0;
      for (auto& gr : a->grad_reads)
        if (gr.input < 0) gr.source = std::move(found[k++]);
    }
  }

  // Aliasing of the results in eager (this run), from the graph before passes
  // rewrite it: the backend's results are made to alias the same way.
  OutputAliasing& al = a->aliasing;
  size_t nout = tr.outputs.size();
  a->hidden_outputs = tr.hidden_outputs;
  a->inference_results = tr.inference_outputs;
  al.same_as_input.assign(nout, -1);
  al.same_as_output.assign(nout, -1);
  al.view_of_input.assign(nout, -1);
  al.view_of_output.assign(nout, -1);
  al.view_steps.resize(nout);
  for (size_t i = 0; i < nout; ++i) {
    const Tensor& o = tr.outputs[i];
    for (size_t j = 0; j < all.size() && al.same_as_input[i] < 0; ++j)
      if (all[j].impl() == o.impl()) al.same_as_input[i] = static_cast<int>(j);
    for (size_t k = 0; k < i && al.same_as_output[i] < 0 && al.same_as_input[i] < 0; ++k)
      if (tr.outputs[k].impl() == o.impl()) al.same_as_output[i] = static_cast<int>(k);
    if (al.same_as_input[i] >= 0 || al.same_as_output[i] >= 0) {
      al.trivial = false;
      continue;
    }
    bool view = false;
    for (auto& in : all) view |= shares_memory(in, o);
    if (!view) {
      const graph::TraceResult::OutputView& ov = tr.output_views.at(i);
      if (ov.output_index < 0) continue;
      al.trivial = false;
      al.view_of_output[i] = ov.output_index;
      for (size_t k = 0; k < ov.steps.size(); ++k)
        al.view_steps[i].push_back({ov.steps[k].first, ov.steps[k].second,
                                    k < tr.output_view_sym_attrs.at(i).size() ? tr.output_view_sym_attrs[i][k]
                                                                              : std::map<std::string, std::vector<graph::SymDim>>{}});
      continue;
    }
    al.trivial = false;
    // The chain of view operators back to the input it reads (the tracer's record:
    // after functionalization the graph holds values, not views).
    al.view_of_input[i] = -2;  // unknown: leave the backend's result as it is
    const graph::TraceResult::OutputView& ov = tr.output_views.at(i);
    if (ov.input_index >= 0) {
      al.view_of_input[i] = ov.input_index;
      for (size_t k = 0; k < ov.steps.size(); ++k)
        al.view_steps[i].push_back({ov.steps[k].first, ov.steps[k].second,
                                    k < tr.output_view_sym_attrs.at(i).size() ? tr.output_view_sym_attrs[i][k]
                                                                              : std::map<std::string, std::vector<graph::SymDim>>{}});
    }
  }
  a->mutated_inputs = tr.mutated_inputs;
  {
    const graph::Node* out = g->output_node();
    for (size_t k = 0; k < a->mutated_inputs.size(); ++k) {
      const graph::Arg& v = out->args.at(nout + k);
      const graph::Node* n = std::holds_alternative<graph::Node*>(v) ? std::get<graph::Node*>(v) : nullptr;
      a->write_recorded.push_back(!n || n->grad_enabled);
    }
  }
  for (int idx : a->mutated_inputs) {
    size_t k = static_cast<size_t>(idx);
    a->write_back.push_back(k < tensors.size() || !locator_ || a->free[k - tensors.size()].from_owner);
    if (a->write_back.back()) continue;
    // Results that are that tensor (or views of it) are the graph's values instead.
    for (size_t i = 0; i < nout; ++i) {
      if (al.same_as_input[i] == idx) al.same_as_input[i] = -1;
      if (al.view_of_input[i] == idx) al.view_of_input[i] = -2;
    }
  }
  {
    // Results the call takes from the inputs themselves leave the graph: their
    // values are the inputs' (the mutated ones' final values are still graph
    // outputs, written back once) and the dead view chains go with DCE below.
    graph::Node* out = g->output_node();
    std::vector<graph::Arg> kept;
    a->not_computed.assign(nout, 0);
    bool any = false;
    for (size_t i = 0; i < nout; ++i) {
      a->not_computed[i] = al.same_as_input[i] >= 0 || al.view_of_input[i] >= 0;
      any |= a->not_computed[i] != 0;
      if (!a->not_computed[i]) kept.push_back(out->args.at(i));
    }
    if (any) {
      kept.insert(kept.end(), out->args.begin() + static_cast<std::ptrdiff_t>(nout), out->args.end());
      out->args = std::move(kept);
      g->recompute_users();
    } else {
      a->not_computed.clear();
    }
  }
  const size_t graph_nout = nout - static_cast<size_t>(std::count(a->not_computed.begin(), a->not_computed.end(), 1));
  a->gates = tr.gates;
  a->rng = tr.rng_inputs;

  // Which results eager computes from which (the graph before CSE merges equal values).
  auto results_from_results =
      std::make_shared<const std::vector<std::vector<int>>>(aot::results_computed_from_results(*g));
  std::shared_ptr<const std::vector<std::vector<int>>> results_eager_reads;
  {
    std::vector<bool> input_rg;
    for (const Tensor& t : all) input_rg.push_back(t.defined() && t.requires_grad());
    results_eager_reads =
        std::make_shared<const std::vector<std::vector<int>>>(aot::results_eager_reads(*g, input_rg));
  }
  passes::PassOptions po;
  po.decompose = false;
  po.disabled = disabled_passes();
  passes::run_default_passes(*g, po);
  // Nodes the passes made get their symbolic shapes (or the capture becomes static).
  if (std::string why; g->is_symbolic() && !graph::propagate_sym_shapes(*g, &why)) {
    if (log_enabled("guards") || log_enabled("recompiles"))
      std::fprintf(stderr, "[tp.compile] the capture is made static after the graph passes: %s\n", why.c_str());
    graph::make_static(*g);
  }
  if (log_enabled("graph")) {
    std::fprintf(stderr, "[tp.compile] captured graph:\n%s\n", g->code().c_str());
    for (size_t k = 0; k < a->gates.size(); ++k)
      std::fprintf(stderr, "[tp.compile] data gate %zu: %s == %s; guard-replay subgraph:\n%s\n", k,
                   a->gates[k].describe().c_str(), a->gates[k].value.repr().c_str(), a->gates[k].guard->code().c_str());
  }
  std::shared_ptr<aot::JointGraph> joint;  // dynamic shapes in training: the symbolic joint graph
  std::vector<graph::ShapeGuard> joint_guards;
  std::string grad_reason;
  if (GradMode::is_enabled() || grad_inside)
    for (size_t i = 0; i < all.size() && grad_reason.empty(); ++i)
      if (all[i].requires_grad())
        grad_reason = i < tensors.size() ? "input '" + tensor_names[i] + "'" : "'" + a->free[i - tensors.size()].name + "'";
  // Dynamic shapes: a symbolic graph goes to a backend that takes one (stax under
  // an explicit dynamic=True / mark_dynamic too: it falls back to the interpreter
  // until Stax lowers symbolic graphs); otherwise it is the static capture it
  // also is at its hints.
  if (g->is_symbolic()) {
    const bool explicit_dynamic = options_.dynamic == CompileOptions::Dynamic::On || [&] {
      for (auto& t : tensors)
        for (auto& [d, m] : dim_marks(t))
          if (m.dynamic) return true;
      return false;
    }();
    bool keep = backend && (backend->symbolic || (options_.backend == "stax" && explicit_dynamic));
    // An activation memory budget stays symbolic: the AOT layer plans the
    // checkpointing on the byte sizes at the hints (a choice of what to save;
    // the gradients do not depend on it), so the budget holds at those sizes.
    if (!grad_reason.empty() && backend && backend->behind_aot && symbolic_training_refusals_ >= 2) {
      keep = false;
      if (log_enabled("guards") || log_enabled("recompiles") || log_enabled("aot"))
        std::fprintf(stderr, "[tp.compile] the training capture is made static: its joint graph was refused "
                             "twice before\n");
    }
    if (keep && !grad_reason.empty() && backend && backend->behind_aot) {
      // Training: the joint graph with the same symbols, partitioned once for
      // every size. A derivative formula that baked in a size (or any other
      // reason trace_joint_symbolic gives) makes the version static.
      std::vector<Tensor> ex = all;
      for (Tensor& t : philox_draw_states(call_draws(a->rng, nullptr, {}), false)) ex.push_back(std::move(t));
      std::vector<bool> needs(ex.size());
      for (size_t i = 0; i < ex.size(); ++i) needs[i] = ex[i].defined() && ex[i].requires_grad();
      std::string why;
      try {
        joint = aot::trace_joint_symbolic(*g, ex, needs, &joint_guards, &why);
      } catch (const std::exception& e) {
        // Not only Error: any failure of the symbolic trace makes the version
        // static; the static path traces it again and reports a real failure.
        why = e.what();
      }
      if (!joint) {
        keep = false;
        ++symbolic_training_refusals_;
        if (log_enabled("guards") || log_enabled("recompiles") || log_enabled("aot"))
          std::fprintf(stderr, "[tp.compile] the training capture is made static: %s\n", why.c_str());
      }
    }
    if (!keep) {
      graph::make_static(*g);
    } else {
      auto spec = std::make_shared<ShapeSpec>();
      spec->nonshape_key = nonshape_key(args);
      spec->symbols = g->symbols;
      spec->guards = tr.shape_guards;
      // The joint trace re-records the forward's decisions and adds its formulas'.
      for (auto& jg : joint_guards) {
        bool dup = false;
        for (auto& sg : spec->guards) dup |= sg.rel == jg.rel && sg.expr == jg.expr;
        if (!dup) spec->guards.push_back(jg);
      }
      spec->inputs.resize(tensors.size());
      for (size_t i = 0; i < tensors.size(); ++i) {
        spec->inputs[i].name = tensor_names[i];
        spec->inputs[i].strides = tensors[i].strides();
        for (int64_t s : tensors[i].sizes()) spec->inputs[i].dims.push_back(s);
      }
      for (auto& up : g->nodes()) {
        const graph::Node* p = up.get();
        if (p->opcode != graph::Opcode::Placeholder || p->input_index < 0 ||
            p->input_index >= static_cast<int>(tensors.size()))
          continue;
        ShapeSpec::Input& in = spec->inputs[static_cast<size_t>(p->input_index)];
        for (size_t d = 0; d < p->sym_sizes.size() && d < in.dims.size(); ++d) {
          const graph::SymDim& e = p->sym_sizes[d];
          if (e.is_const()) continue;
          TP_CHECK(e.is_size(), Error, "internal: input dim ", d, " of ", in.name, " is ", e.to_string(),
                   ", not a bare symbol");
          in.dims[d] = -1 - e.size_index();
          in.symbolic = true;
        }
      }
      a->shape = std::move(spec);
      if (log_enabled("graph") || log_enabled("guards")) {
        std::string syms, guards;
        for (auto& s : g->symbols) syms += str(syms.empty() ? "" : ", ", s.origin, " in [", s.min, ", ",
                                               s.max == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(s.max), "]");
        for (auto& sg : a->shape->guards) guards += "\n  " + sg.describe(g->symbols);
        std::fprintf(stderr, "[tp.compile] symbolic sizes: %s; shape guards:%s\n", syms.c_str(),
                     guards.empty() ? " none" : guards.c_str());
      }
    }
  }
  a->graph = g;
  a->description = describe(args, a->free, all);
  std::string source;
  last_kernels_.clear();
  last_fallback_reason_.clear();
  std::vector<Tensor> examples = all;  // + the generators' states as they stand (the first call's draw)
  for (Tensor& t : philox_draw_states(call_draws(a->rng, nullptr, {}), false)) examples.push_back(std::move(t));
  // In-place reuse candidates: each written input the call copies its final
  // value into (write_back), at graph output nout + k. The backend decides
  // where that is legal; run() sees it as a result that is the input itself.
  std::vector<std::pair<int, int>> write_into;
  for (size_t k = 0; k < a->mutated_inputs.size(); ++k)
    if (a->write_back[k]) write_into.push_back({static_cast<int>(graph_nout + k), a->mutated_inputs[k]});
  a->run = run_backend(g, examples, grad_reason, a->mutated_inputs, &source, write_into, std::move(joint),
                       std::move(results_from_results), std::move(results_eager_reads), tr.backward_error);
  if (grad_inside && !grad_reason.empty())
    a->run = [inner = std::move(a->run)](const std::vector<Tensor>& in) {
      AutoGradMode on(true);  // the region's nodes outside the enable_grad block stay undifferentiated
      return inner(in);
    };
  last_graph_ = g;
  last_source_ = source;
  last_gates_ = a->gates;
  last_mutated_ = a->mutated_inputs;
  *inputs = std::move(all);
  return a;
}

std::vector<Tensor> CompiledFunction::run(const Artifact& a, const std::vector<Tensor>& all) const {
  // The graph holds the casts autocast made at capture; running its operators
  // through an active autocast again would cast the parts of listed composites
  // a second time (softmax inside attention) and differ from eager.
  AutocastSuspend no_autocast;
  std::vector<Tensor> out;
  if (a.rng.empty()) {
    out = a.run(all);
  } else {
    // Random operators: reserve this call's counters, as eager's calls would.
    std::vector<Tensor> in = all;
    for (Tensor& t : philox_draw_states(call_draws(a.rng, a.shape ? a.graph.get() : nullptr, all), true))
      in.push_back(std::move(t));
    out = a.run(in);
  }
  if (!a.mutated_inputs.empty()) {
    // The side effects eager has: each written input receives its final value
    // (copy_ bumps its version counter, as eager's in-place writes do).
    const size_t n = out.size() - a.mutated_inputs.size();
    TP_CHECK(out.size() >= a.mutated_inputs.size(), Error, "compiled function: the backend returned ", out.size(),
             " results, fewer than the ", a.mutated_inputs.size(), " mutated inputs");
    for (size_t k = 0; k < a.mutated_inputs.size(); ++k) {
      if (!a.write_back[k]) continue;
      Tensor dst = all.at(a.mutated_inputs[k]);
      const Tensor& v = out[n + k];
      // In-place reuse: the backend computed the final value into the input's own
      // memory (it hands back the input, or the same elements of its storage).
      // The data is there; only the version bump of eager's write remains.
      // Backends are given the pairs only for calls whose writes are not
      // recorded, so the recorded path below never sees such a result.
      // A value that requires grad written into a tensor that does not makes it
      // require grad, as eager's in-place write does (a buffer given a new state).
      const bool recorded = GradMode::is_enabled() && a.write_recorded[k] &&
                            (dst.requires_grad() || (v.defined() && v.requires_grad()));
      const bool in_place = v.defined() && v.impl()->storage == dst.impl()->storage && v.data() == dst.data() &&
                            v.sizes() == dst.sizes() && v.strides() == dst.strides() && v.dtype() == dst.dtype();
      if (in_place && !recorded) {
        dst.bump_version();
        metrics().inplace_writes++;
        continue;
      }
      if (recorded) {
        // Recorded, as eager's write is: the input's history continues through the
        // new value (and a leaf that requires grad refuses the write as in eager).
        ops::copy_(dst, out[n + k]);
      } else {
        AutoGradMode no_grad(false);  // a write-back of state (running statistics, buffers)
        ops::copy_(dst, out[n + k]);
      }
    }
    out.resize(n);
  }
  if (!a.not_computed.empty()) {
    // Back to one slot per result; the ones the graph does not compute are filled below.
    std::vector<Tensor> full(a.not_computed.size());
    size_t j = 0;
    for (size_t i = 0; i < full.size(); ++i)
      if (!a.not_computed[i]) {
        TP_CHECK(j < out.size(), Error, "compiled function: the backend returned ", out.size(), " results, too few");
        full[i] = std::move(out[j++]);
      }
    TP_CHECK(j == out.size(), Error, "compiled function: the backend returned ", out.size(), " results, expected ", j);
    out = std::move(full);
  }
  const OutputAliasing& al = a.aliasing;
  TP_CHECK(al.same_as_input.size() == out.size(), Error, "compiled function: the backend returned ", out.size(),
           " results, the captured graph has ", al.same_as_input.size());
  // A result must alias an input exactly where eager's did: a backend may hand
  // back an input (`x + 0` simplified to `x`) or a fresh copy of a view.
  std::unordered_map<int, int64_t> sym_values;
  bool have_sym_values = false;
  // A capture made static (graph::make_static) keeps its views' symbolic
  // attributes, but its graph has no symbols left to evaluate them with: the
  // recorded values are this version's own.
  const bool symbolic = a.graph && a.graph->is_symbolic();
  auto replay_views = [&](Tensor v, const std::vector<OutputAliasing::ViewStep>& steps) {
    if (!have_sym_values && symbolic) sym_values = graph::symbol_values(*a.graph, all);
    have_sym_values = true;
    for (auto& s : steps)
      v = call_op(*s.op, {v},
                  s.sym_attrs.empty() || !symbolic ? s.attrs : graph::evaluate_attrs(s.attrs, s.sym_attrs, sym_values))
              .at(0);
    return v;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    if (al.same_as_input[i] >= 0) {
      out[i] = all[al.same_as_input[i]];
    } else if (al.same_as_output[i] >= 0) {
      out[i] = out[al.same_as_output[i]];
    } else if (al.view_of_input[i] >= 0) {
      const Tensor& base = all[al.view_of_input[i]];
      if (!out[i].defined() || !shares_memory(out[i], base)) out[i] = replay_views(base, al.view_steps[i]);
    } else if (al.view_of_input[i] == -1) {
      for (auto& in : all)
        if (out[i].defined() && shares_memory(out[i], in)) {
          out[i] = ops::clone(out[i]);
          break;
        }
    }
  }
  // Results that are views of other results in eager, their bases first (a view
  // of a view of a result: the chain ends at a result, and there are no cycles).
  if (!al.trivial && !al.view_of_output.empty()) {
    std::vector<char> done(out.size(), 0);
    std::function<void(size_t)> resolve = [&](size_t i) {
      if (done[i]) return;
      done[i] = 1;
      int j = al.view_of_output[i];
      if (j < 0) return;
      resolve(static_cast<size_t>(j));
      // A view of that very result, as eager's (`r._base is h`), not a view of
      // the backend's buffer that merely shares its memory.
      const TensorImpl* base = out[j].impl()->view_base ? out[j].impl()->view_base.get() : out[j].impl();
      if (!shares_memory(out[i], out[j]) || out[i].impl()->view_base.get() != base)
        out[i] = replay_views(out[j], al.view_steps[i]);
    };
    for (size_t i = 0; i < out.size(); ++i) resolve(i);
  }
  if (a.hidden_outputs) out.resize(out.size() - a.hidden_outputs);  // bases of results' views, not results
  mark_inference_results(out, all, a.inference_results);
  return out;
}

std::optional<std::string> CompiledFunction::named_for_caller(const char* what) const {
  size_t i = 0;
  while (what[i] && (std::isalnum(static_cast<unsigned char>(what[i])) || what[i] == '_' || what[i] == '.')) ++i;
  if (i == 0 || what[i] != ':') return std::nullopt;
  auto it = part_of_.find(std::string(what, i));
  if (it == part_of_.end() || it->second.empty()) return std::nullopt;
  return named_message(what, it->second);
}

std::vector<Tensor> CompiledFunction::call(const std::vector<ArgValue>& args, const OutputStructure** structure) {
  // tp.profiler: the call as one range; its regions, externs and any eager
  // fallback's operators are its children.
  if (profiler::active() && !graph::is_tracing()) [[unlikely]] {
    profiler::Range range("compiled", "tp.compile: " + (name_.empty() ? std::string("<function>") : name_));
    return call_unprofiled(args, structure);
  }
  return call_unprofiled(args, structure);
}

// The message of an operator's error names the composite the user called when
// the failing operator is one of its parts (off the hot path: only a raised
// error pays).
std::vector<Tensor> CompiledFunction::call_unprofiled(const std::vector<ArgValue>& args,
                                                      const OutputStructure** structure) {
  try {
    return call_unnamed(args, structure);
  } catch (const CaptureError&) {
    throw;
  } catch (const BackendError&) {
    throw;
  } catch (const IndexError& e) {
    if (auto m = named_for_caller(e.what())) throw IndexError(*m);
    throw;
  } catch (const ValueError& e) {
    if (auto m = named_for_caller(e.what())) throw ValueError(*m);
    throw;
  } catch (const TypeError& e) {
    if (auto m = named_for_caller(e.what())) throw TypeError(*m);
    throw;
  }
}

std::vector<Tensor> CompiledFunction::call_unnamed(const std::vector<ArgValue>& args,
                                                   const OutputStructure** structure) {
  // Called while an enclosing compiled function is being captured: inline the
  // body so its operators land in the enclosing graph (running our own
  // artifact here would hide them from the tracer).
  if (graph::is_tracing()) {
    check_arity(args);
    std::shared_ptr<const OutputStructure> s;
    auto r = fn_(args, &s);
    inline_structure_ = std::move(s);
    if (structure) *structure = inline_structure_.get();
    return r;
  }
  if (epoch_ != cache_epoch()) {
    cache_.clear();
    symbolic_cache_.clear();
    seen_sizes_.clear();
    changed_dims_.clear();
    bucket_plans_.clear();
    bucket_dropped_.clear();
    first_ = FirstLevel{};
    epoch_ = cache_epoch();
  }
  std::vector<Tensor> own;
  const bool reuse = !all_busy_;
  std::vector<Tensor>& all = reuse ? all_scratch_ : own;
  struct Release {
    std::vector<Tensor>& v;
    bool* busy;
    ~Release() {
      v.clear();
      if (busy) *busy = false;
    }
  } release{all, reuse ? &all_busy_ : nullptr};
  all_busy_ = true;
  all.reserve(args.size());
  for (auto& a : args)
    if (const Tensor* t = std::get_if<Tensor>(&a)) all.push_back(*t);
  const size_t n = all.size();
  if (state_reader_) {
    const std::string& now = state_reader_();
    if (now != state_) state_ = now;
  }
  if (bucket_policy_.enabled() && !in_bucket_call_) {
    // Shape buckets: a padding-safe call runs padded through the path below.
    std::vector<Tensor> r;
    if (bucketed_call(args, structure, &r)) return r;
  }
  if (first_level_matches(args)) {
    const Artifact* a = first_.artifact;
    bool hit = a->free.empty();
    if (!hit && read_free(*a, &all)) {
      hit = true;
      for (size_t k = 0; k < first_.free.size() && hit; ++k) hit = first_.free[k].matches(all[n + k]);
    }
    if (hit && !a->grad_reads.empty()) hit = grads_match(*a, all);
    if (hit) {
      metrics().first_level_hits++;
      if (structure) *structure = a->structure.get();
      if (a->mutated_inputs.empty()) return run(*a, all);
      // The write-back bumped versions: stamp them, so the next call still enters
      // here -- unless a data gate may read what was written (then gates replay).
      auto r = run(*a, all);
      if (a->gates.empty()) remember_first_level(args, all, a);
      return r;
    }
    all.resize(n);
  }
  check_arity(args);
  std::string key = specialization_key(args);
  auto exact = cache_.find(key);
  const Artifact* found = nullptr;
  std::string gate_miss;   // the data gate whose value no cached version has
  std::string shape_miss;  // the shape guard a symbolic version failed
  {
    // The versions whose free tensors match, each with the call's tensors.
    std::vector<std::pair<const Artifact*, std::vector<Tensor>>> cands;
    if (exact != cache_.end())
      for (auto& v : exact->second) {
        std::vector<Tensor> cur(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
        if (read_free(*v, &cur) && free_key(cur, n) == v->free_key && grads_match(*v, cur))
          cands.push_back({v.get(), std::move(cur)});
      }
    if (cands.empty() && !symbolic_cache_.empty()) {
      // Dynamic shapes: versions whose shape spec and guards admit the call's sizes.
      auto sym = symbolic_cache_.find(nonshape_key(args));
      if (sym != symbolic_cache_.end()) {
        const bool log = log_enabled("recompiles");
        std::string why;
        for (auto it = sym->second.rbegin(); it != sym->second.rend(); ++it) {
          const Artifact* v = it->get();
          std::vector<Tensor> cur(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
          if (!v->shape->matches(cur, nullptr, log ? &why : nullptr)) {
            if (shape_miss.empty()) shape_miss = why;
            continue;
          }
          if (read_free(*v, &cur) && free_key(cur, n) == v->free_key && grads_match(*v, cur))
            cands.push_back({v, std::move(cur)});
        }
      }
    }
    // Guard replay: versions that passed the same gates with the same values ran
    // the same Python code up to the next gate, so they share its guard; replay it
    // once per level and keep the versions that saw the value it gives now.
    for (size_t level = 0; !cands.empty(); ++level) {
      const Artifact* c0 = cands[0].first;
      if (c0->gates.size() <= level) {
        found = c0;
        all = std::move(cands[0].second);
        break;
      }
      Scalar value;
      {
        AutoGradMode no_grad(false);
        AutocastSuspend no_autocast;  // the guard's graph holds its casts already
        value = graph::replay_gate(c0->gates[level], cands[0].second);
      }
      metrics().gate_replays++;
      std::string seen;
      std::vector<std::pair<const Artifact*, std::vector<Tensor>>> next;
      for (auto& c : cands) {
        if (c.first->gates.size() <= level) continue;
        seen += (seen.empty() ? "" : ", ") + c.first->gates[level].value.repr();
        if (c.first->gates[level].value == value) next.push_back(std::move(c));
      }
      if (next.empty())
        gate_miss = str(c0->gates[level].describe(), " gave ", value.repr(), " (cached versions saw ", seen, ")");
      cands = std::move(next);
    }
  }
  if (found) {
    metrics().specialization_hits++;
  } else {
    const int cap = max_gate_artifacts();
    if (!gate_miss.empty() && gated_versions_ >= cap) {
      // Too many gate values: every further one would capture and compile again.
      metrics().fallback_count++;
      if (log_enabled("recompiles"))
        std::fprintf(stderr, "[tp.compile] not recompiling: data gate %s; %d versions (max_gate_artifacts)\n",
                     gate_miss.c_str(), cap);
      warn_fallback(str("data gate ", gate_miss, " and this function already has ", cap,
                        " versions for other gate values (options={'max_gate_artifacts': N}); running it eagerly"));
      std::shared_ptr<const OutputStructure> s;
      auto r = fn_(args, &s);
      eager_structure_ = std::move(s);
      if (structure) *structure = eager_structure_.get();
      return r;
    }
    if (const int most = max_versions(); most > 0 && num_specializations() >= static_cast<size_t>(most)) {
      metrics().fallback_count++;
      if (log_enabled("recompiles"))
        std::fprintf(stderr, "[tp.compile] not recompiling: %d versions (max_versions)\n", most);
      warn_fallback(str("this function already has ", most, " compiled versions and the call matches none of them "
                        "(options={'max_versions': N} raises the limit; TP_LOGS=recompiles says what changes "
                        "between calls); running it eagerly"));
      std::shared_ptr<const OutputStructure> s;
      auto r = fn_(args, &s);
      eager_structure_ = std::move(s);
      if (structure) *structure = eager_structure_.get();
      return r;
    }
    all.resize(n);
    // Automatic dynamic: dims whose size changed since earlier captures become symbolic.
    // A padded call (shape buckets) is compiled statically at the bucket sizes.
    if (options_.dynamic == CompileOptions::Dynamic::Auto && gate_miss.empty() && !in_bucket_call_) note_sizes(all);
    graph::DynamicSpec dyn = in_bucket_call_ ? graph::DynamicSpec{} : dynamic_spec(all);
    if (num_specializations() > 0) {
      metrics().recompiles++;
      if (log_enabled("recompiles") && !gate_miss.empty()) {
        std::fprintf(stderr, "[tp.compile] recompiling: data gate changed: %s\n", gate_miss.c_str());
      } else if (log_enabled("recompiles") && !shape_miss.empty()) {
        std::fprintf(stderr, "[tp.compile] recompiling: guard failed: %s\n", shape_miss.c_str());
      } else if (log_enabled("recompiles")) {
        // Report against the version used last: that is the guard chain the call just failed.
        const Artifact* last = first_.artifact;
        for (auto it = cache_.begin(); !last && it != cache_.end(); ++it)
          if (!it->second.empty()) last = it->second.front().get();
        std::vector<Tensor> cur = all;
        std::string why;
        if (last && read_free(*last, &cur))
          std::fprintf(stderr, "[tp.compile] recompiling: guard failed: %s\n",
                       (grads_match(*last, cur, &why) ? first_difference(describe(args, last->free, cur),
                                                                         last->description) : why).c_str());
        else
          std::fprintf(stderr, "[tp.compile] recompiling: guard failed: a free tensor (parameter, global or "
                               "closure variable) is no longer a tensor\n");
      }
    }
    std::unique_ptr<Artifact> art;
    {
      std::optional<profiler::Range> range;
      if (profiler::active()) range.emplace("compile", "tp.compile: capture and compile");
      art = build(args, &all, dyn.empty() ? nullptr : &dyn);  // appends the free tensors the capture read
    }
    found = art.get();
    ++builds_;
    last_build_sym_.assign(n, {});
    if (art->shape)
      for (size_t i = 0; i < n && i < art->shape->inputs.size(); ++i)
        for (int64_t d : art->shape->inputs[i].dims) last_build_sym_[i].push_back(d < 0);
    if (!art->gates.empty()) ++gated_versions_;
    if (art->shape) symbolic_cache_[art->shape->nonshape_key].push_back(std::move(art));
    else cache_[key].push_back(std::move(art));
  }
  remember_first_level(args, all, found);
  if (structure) *structure = found->structure.get();
  if (found->mutated_inputs.empty()) return run(*found, all);
  auto r = run(*found, all);
  // The write-back bumped versions: stamp them, so the next call enters the first
  // level -- unless a data gate may read what was written (then gates replay).
  if (found->gates.empty()) remember_first_level(args, all, found);
  return r;
}

}  // namespace tp::compile
