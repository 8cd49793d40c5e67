#include "ops/autocast.h"

#include <memory>
#include <unordered_map>

#include "core/grad_mode.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp {
namespace {

constexpr int kKinds = 2;  // Device::Kind::CPU, Device::Kind::CUDA

struct State {
  bool enabled[kKinds] = {false, false};
  // PyTorch's defaults: bfloat16 on the CPU, float16 on CUDA.
  DType dtype[kKinds] = {DType::BFloat16, DType::Float16};
  bool cache = true;
  int nesting = 0;
  int suspended = 0;
  // (enabled on some device type) && !suspended, kept up to date by every
  // setter so the dispatcher reads one bool.
  bool active = false;
  void refresh() { active = (enabled[0] || enabled[1]) && suspended == 0; }
};
thread_local State t_state;

// The cast cache (cache_enabled): a float32 leaf that requires grad (a
// parameter) is cast once per autocast region, not once per use, as PyTorch
// does. Keyed by the tensor object; the entry remembers the autograd version
// so a parameter written in place inside the region is cast again (PyTorch's
// cache does not check; reusing a stale cast would be silently wrong).
struct CacheEntry {
  std::weak_ptr<TensorImpl> source;
  uint64_t version = 0;
  DType dtype = DType::Float32;
  Tensor cast;
};
thread_local std::unordered_map<const TensorImpl*, CacheEntry> t_cache;

int kind_index(Device::Kind k) { return static_cast<int>(k); }

bool eligible(const Tensor& t, Device::Kind kind) {
  // Only floating tensors of the device type are cast; float64 never is (PyTorch's rule).
  return t.defined() && t.device().kind == kind && is_floating(t.dtype()) && t.dtype() != DType::Float64;
}

bool cacheable(const Tensor& t, DType target) {
  return t_state.cache && current_interceptor() == nullptr && GradMode::is_enabled() && t.requires_grad() &&
         t.impl()->grad_fn == nullptr && t.dtype() == DType::Float32 && target != DType::Float32;
}

Tensor cast_to(const Tensor& t, DType target) {
  if (t.dtype() == target) return t;
  if (!cacheable(t, target)) return ops::to_dtype(t, target);
  auto it = t_cache.find(t.impl());
  if (it != t_cache.end()) {
    const CacheEntry& e = it->second;
    if (!e.source.expired() && e.source.lock().get() == t.impl() && e.version == t.autograd_version() &&
        e.dtype == target)
      return e.cast;
  }
  Tensor c = ops::to_dtype(t, target);
  t_cache[t.impl()] = CacheEntry{t.impl_ptr(), t.autograd_version(), target, c};
  return c;
}

// An operator's policy table. cpu / cuda: AutocastPolicy per device type,
// following PyTorch's lists (its CPU lists are shorter: exp, softmax,
// layer_norm, sum run in their input's dtype under CPU autocast; losses,
// prod, linear algebra run in float32; cat/stack/index_copy promote). `python`:
// a composite written in Python (tp.nn.functional), which applies the policy
// itself through `_C._autocast_cast` -- its name is no C++ operator.
struct Entry {
  const char* name;
  AutocastPolicy cpu;
  AutocastPolicy cuda;
  bool python;
};
constexpr AutocastPolicy N = AutocastPolicy::None;
constexpr AutocastPolicy L = AutocastPolicy::LowerPrecision;
constexpr AutocastPolicy F = AutocastPolicy::Float32;
constexpr AutocastPolicy P = AutocastPolicy::Promote;
constexpr AutocastPolicy O = AutocastPolicy::Opaque;

const Entry kPolicies[] = {
    // Lower precision: the matrix products and convolutions (where the 16-bit
    // speed is); einsum and attention-like composites reach them as matmul/bmm.
    {"mm", L, L, false},
    {"bmm", L, L, false},
    {"matmul", L, L, false},
    {"addmm", L, L, false},
    {"baddbmm", L, L, false},
    {"linear", L, L, false},
    {"conv1d", L, L, false},
    {"conv1d.padding", L, L, false},
    {"conv2d", L, L, false},
    {"conv2d.padding", L, L, false},
    {"conv_transpose1d", L, L, false},
    {"conv_transpose2d", L, L, false},
    {"einsum", N, L, false},  // on the CPU its matmuls are cast, its sums are not (as PyTorch's)
    {"conv3d", L, L, true},
    {"prelu", L, L, true},
    {"scaled_dot_product_attention", L, L, true},
    // Float32: where 16 bits lose too much (losses, reductions of products,
    // exp/log and norms on CUDA, linear algebra).
    {"prod", F, F, false},
    {"trace", F, N, false},
    {"cdist", F, F, false},
    {"mse_loss", F, F, false},
    {"nll_loss", F, F, false},
    {"cross_entropy", F, F, false},
    {"binary_cross_entropy", F, N, false},  // CUDA: PyTorch refuses it under autocast; left alone here
    {"binary_cross_entropy_with_logits", F, F, false},
    {"linalg_cholesky", F, N, false},
    {"linalg_eigh", F, N, false},
    {"linalg_lstsq", F, N, false},
    {"linalg_qr", F, N, false},
    {"linalg_slogdet", F, N, false},
    {"linalg_solve", F, N, false},
    {"linalg_svd", F, N, false},
    {"acos", N, F, false},
    {"asin", N, F, false},
    {"cosh", N, F, false},
    {"erfinv", N, F, false},
    {"exp", N, F, false},
    {"expm1", N, F, false},
    {"log", N, F, false},
    {"log10", N, F, false},
    {"log2", N, F, false},
    {"log1p", N, F, false},
    {"reciprocal", N, F, false},
    {"rsqrt", N, F, false},
    {"sinh", N, F, false},
    {"tan", N, F, false},
    {"pow", N, F, false},
    {"softplus", N, F, false},
    {"layer_norm", N, F, false},
    {"native_layer_norm", N, F, false},
    {"norm", N, F, false},
    {"norm.str", N, F, false},
    {"dist", N, F, false},
    {"renorm", N, F, false},
    {"logsumexp", N, F, false},
    {"sum", N, F, false},
    {"cumsum", N, F, false},
    {"cumprod", N, F, false},
    {"softmax", N, F, false},
    {"log_softmax", N, F, false},
    {"group_norm", N, F, true},
    {"cosine_similarity", N, F, true},
    {"l1_loss", F, F, true},
    {"smooth_l1_loss", F, F, true},
    {"huber_loss", F, F, true},
    {"kl_div", F, F, true},
    {"margin_ranking_loss", F, F, true},
    {"hinge_embedding_loss", F, F, true},
    {"soft_margin_loss", F, F, true},
    {"cosine_embedding_loss", F, F, true},
    {"triplet_margin_loss", F, F, true},
    {"poisson_nll_loss", F, F, true},
    {"ctc_loss", F, F, true},
    // Promote: several floating inputs meet; all take the widest of them.
    {"cat", P, P, false},
    {"stack", P, P, false},
    {"index_copy", P, P, false},
    {"addcmul", N, P, false},
    {"addcdiv", N, P, false},
    {"atan2", N, P, false},
    {"cross", N, P, false},
    {"dot", O, P, false},
    {"outer", O, O, false},
    {"index_put", N, P, false},
    {"scatter_add", N, P, false},
    {"tensordot", N, P, true},
};

// softmax/sum/... with an explicit dtype= run as asked (PyTorch's
// fp32_set_opt_dtype: the caller chose the precision).
bool has_explicit_dtype(const Attrs& attrs) {
  const AttrValue* v = attrs.find("dtype");
  return v && std::holds_alternative<DType>(*v);
}
}  // namespace

bool autocast_enabled(Device::Kind kind) { return t_state.enabled[kind_index(kind)]; }
void set_autocast_enabled(Device::Kind kind, bool enabled) {
  t_state.enabled[kind_index(kind)] = enabled;
  t_state.refresh();
}
DType autocast_dtype(Device::Kind kind) { return t_state.dtype[kind_index(kind)]; }
void set_autocast_dtype(Device::Kind kind, DType dtype) {
  TP_CHECK(dtype == DType::Float16 || dtype == DType::BFloat16, ValueError,
           "autocast: the lower-precision dtype must be float16 or bfloat16, got ", dtype_name(dtype));
  t_state.dtype[kind_index(kind)] = dtype;
}
bool autocast_cache_enabled() { return t_state.cache; }
void set_autocast_cache_enabled(bool enabled) { t_state.cache = enabled; }
int autocast_increment_nesting() { return ++t_state.nesting; }
int autocast_decrement_nesting() {
  if (t_state.nesting > 0) --t_state.nesting;
  return t_state.nesting;
}
void clear_autocast_cache() { t_cache.clear(); }
bool autocast_active() { return t_state.active; }

void autocast_push_suspend() {
  ++t_state.suspended;
  t_state.refresh();
}
void autocast_pop_suspend() {
  if (t_state.suspended > 0) --t_state.suspended;
  t_state.refresh();
}
int autocast_swap_suspended(int depth) {
  const int old = t_state.suspended;
  t_state.suspended = depth < 0 ? 0 : depth;
  t_state.refresh();
  return old;
}
AutocastSuspend::AutocastSuspend() { autocast_push_suspend(); }
AutocastSuspend::~AutocastSuspend() { autocast_pop_suspend(); }

uint32_t autocast_state_code() {
  if (!t_state.active) return 0;
  uint32_t code = 0;
  for (int k = 0; k < kKinds; ++k)
    if (t_state.enabled[k]) code |= (1u | (static_cast<uint32_t>(t_state.dtype[k]) << 1)) << (8 * k);
  return code;
}

std::string autocast_state_describe() {
  if (!t_state.active) return "";
  std::string d;
  static const char* const names[kKinds] = {"cpu", "cuda"};
  for (int k = 0; k < kKinds; ++k)
    if (t_state.enabled[k]) d += str(d.empty() ? "" : ", ", names[k], " ", dtype_name(t_state.dtype[k]));
  return d;
}

AutocastPolicy autocast_policy(const std::string& name, Device::Kind kind) {
  for (const Entry& e : kPolicies)
    if (name == e.name) return kind == Device::Kind::CPU ? e.cpu : e.cuda;
  return AutocastPolicy::None;
}

Device::Kind autocast_device_of(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind == Device::Kind::CUDA) return Device::Kind::CUDA;
  return Device::Kind::CPU;
}

std::vector<Tensor> autocast_cast_inputs(AutocastPolicy policy, Device::Kind kind, const std::vector<Tensor>& inputs) {
  if (policy == AutocastPolicy::None || policy == AutocastPolicy::Opaque || !t_state.enabled[kind_index(kind)])
    return inputs;
  const DType lower = t_state.dtype[kind_index(kind)];
  DType target = lower;
  if (policy == AutocastPolicy::Float32) {
    target = DType::Float32;
  } else if (policy == AutocastPolicy::Promote) {
    // The widest floating input, starting from the autocast dtype (PyTorch
    // raises for float16 beside bfloat16; their promotion, float32, is the safe answer).
    for (const Tensor& t : inputs)
      if (eligible(t, kind) && t.dtype() != target) target = promote_types(target, t.dtype());
  }
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(eligible(t, kind) ? cast_to(t, target) : t);
  return out;
}

std::vector<Tensor> autocast_call(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                  bool* handled) {
  const Device::Kind kind = autocast_device_of(inputs);
  const auto policy = static_cast<AutocastPolicy>(op.autocast[kind_index(kind)]);
  if (policy == AutocastPolicy::None || !t_state.enabled[kind_index(kind)] ||
      (policy == AutocastPolicy::Float32 && has_explicit_dtype(attrs))) {
    *handled = false;
    return {};
  }
  std::vector<Tensor> cast = autocast_cast_inputs(policy, kind, inputs);
  *handled = true;
  // The operator, its decomposition and its autograd recording run without
  // autocast: its parts see the dtypes chosen here (one cast at the outer
  // operator, as PyTorch's autocast key is excluded below a listed op).
  AutocastSuspend suspend;
  return call_op(op, cast, attrs);
}

void declare_autocast_policies() {
  for (const Entry& e : kPolicies) {
    if (e.python) continue;  // applied by the Python composite itself
    declare_autocast(e.name, 0, static_cast<uint8_t>(e.cpu));
    declare_autocast(e.name, 1, static_cast<uint8_t>(e.cuda));
  }
}

}  // namespace tp
