// The operator registry: one OpDef per operator, declared once, holding
// everything every layer needs to know about it:
//   - infer: shape/dtype inference that never touches data (eager, tracing and
//     later symbolic shapes share it),
//   - cpu: the eager kernel,
//   - backward: the derivative, written with tensor operators so that it can
//     later be traced into a joint graph (symbolic_backward: its form for a
//     joint graph over symbolic sizes, where the two differ),
//   - decompose: optional rewrite into simpler operators (used by graph passes),
//   - tags: what kind of operator it is (the lowering and passes key off these).
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/attrs.h"

namespace tp {

enum OpTag : uint32_t {
  kPointwise = 1u << 0,
  kReduction = 1u << 1,
  kView = 1u << 2,       // output aliases input 0
  kFactory = 1u << 3,    // no tensor inputs
  kRandom = 1u << 4,
  kInplace = 1u << 5,    // writes input 0
  kComposite = 1u << 6,  // has a decomposition that passes may apply
  kNondeterministicShape = 1u << 7,
  // The eager kernel handles every dtype itself (data movement dispatched on
  // itemsize). Without it, the dispatcher runs the kernel in the compute dtype
  // (int8..int32/uint8 -> int64, float16/bfloat16 -> float32) and converts back.
  kAllDTypes = 1u << 8,
  // The result lives on another device than the input (`_to_device`): the
  // dispatcher runs its kernel without the CUDA routing, and no compiled
  // region can hold it (a region's buffers live on one device).
  kDeviceMove = 1u << 9,
};

struct OpDef;
using InferFn = std::vector<TensorMeta> (*)(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs);
using KernelFn = std::vector<Tensor> (*)(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                         const std::vector<TensorMeta>& out_meta);

// Everything a derivative formula may read. Saved tensors carry no autograd history.
struct BackwardArgs {
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  const std::vector<Tensor>& grad_outputs;  // same count as outputs; undefined if no gradient flowed
  const Attrs& attrs;
  const std::vector<bool>& needs_grad;  // per input
};
using BackwardFn = std::vector<Tensor> (*)(const BackwardArgs& a);  // one (possibly undefined) grad per input
using DecomposeFn = std::vector<Tensor> (*)(const std::vector<Tensor>& in, const Attrs& attrs);

// Which of its inputs and outputs a derivative formula reads by value (hands to
// an operator), given which inputs need a gradient: bit i of `inputs` stands
// for BackwardArgs::inputs[i], bit i of `outputs` for outputs[i]. Autograd keeps
// only those alive; of every other value the node keeps sizes, strides, dtype
// and device (enough for reduce_grad, zeros of the input's shape, ...), and a
// formula that passes one to an operator anyway raises (a wrong declaration
// fails loudly). Inputs past the 64th are always kept.
struct SavedSet {
  uint64_t inputs = 0;
  uint64_t outputs = 0;
  bool input(size_t i) const { return i >= 64 || ((inputs >> i) & 1u) != 0; }
  bool output(size_t i) const { return i >= 64 || ((outputs >> i) & 1u) != 0; }
};
using SavedFn = SavedSet (*)(const std::vector<bool>& needs_grad);

struct OpDef {
  const char* name = "";
  // PyTorch-style signature, e.g. "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
  // (ops/schema.h). Tensor parameters are the inputs in order; every other
  // parameter is the Attrs entry of the same name. The Python binding is
  // generated from it. Empty: the op is internal (no generated binding).
  const char* schema = "";
  uint32_t tags = 0;
  int num_inputs = 1;  // -1: variadic
  InferFn infer = nullptr;
  KernelFn cpu = nullptr;
  BackwardFn backward = nullptr;
  // The derivative as a symbolic joint trace (dynamic shapes in training)
  // records it, where `backward` computes a number from the example's sizes
  // (mean's 1/N) or builds a tensor of a size the tracer cannot follow
  // (arange(x.size(d))): the same value, with such counts computed by the graph
  // at every call. Null: `backward` is size-independent as written.
  BackwardFn symbolic_backward = nullptr;
  // Rewrite into simpler operators. An op with a decomposition and no `cpu`
  // kernel is an implicit composite: the dispatcher runs the decomposition
  // itself, so autograd and tracing only ever see its parts.
  DecomposeFn decompose = nullptr;
  // What `backward` reads by value (SavedSet). Null: everything is kept, the
  // safe default for an operator whose formula nobody has audited. An in-place
  // operator without its own declaration uses its out-of-place twin's.
  SavedFn saved = nullptr;
  // An operator whose recorded form is another one with more outputs: when
  // eager autograd records a call, it runs that operator (same inputs and
  // attributes) and hands back its output 0, so the node keeps what the other
  // operator's formula reads (layer_norm -> native_layer_norm keeps the row
  // statistics instead of recomputing them in the backward, as PyTorch does).
  // Tracing, unrecorded calls and CUDA calls still see this operator.
  const char* recorded_as = nullptr;
  // For pointwise ops: the lowering looks operators up by name; this names the
  // scalar math the code generator emits (e.g. "exp"); empty if none.
  const char* pointwise_fn = "";
  // tp.autocast's category of this operator per device type (index: Device::Kind,
  // values: AutocastPolicy in ops/autocast.h; 0 = runs in its inputs' dtypes).
  // Set from one table (ops/autocast.cpp) while the builtin operators register.
  uint8_t autocast[2] = {0, 0};
  bool has(OpTag t) const { return (tags & t) != 0; }
  bool is_implicit_composite() const { return cpu == nullptr && decompose != nullptr; }
};

// Registration happens in static initializers of each operator family's .cpp.
const OpDef& register_op(OpDef def);
const OpDef* find_op(const std::string& name);
const OpDef& get_op(const std::string& name);  // throws if missing
// The same for a literal: no temporary std::string, so `const OpDef& op =
// get_op("x")` is not flagged as a possibly dangling reference (GCC 13).
const OpDef& get_op(const char* name);

// The OpDef of `name`, looked up once per call site (the C++ operator API uses it).
#define TP_OP(name)                               \
  ([]() -> const ::tp::OpDef& {                   \
    static const ::tp::OpDef& op_ = ::tp::get_op(name); \
    return op_;                                   \
  }())
std::vector<const OpDef*> all_ops();
// Sets the SavedSet declaration of an operator registered before (called while
// the builtin operators register: ops/saved_values.cpp).
void declare_saved(const char* name, SavedFn fn);
// The same for tp.autocast's policy of an operator on one device type (ops/autocast.cpp).
void declare_autocast(const char* name, int device_kind, uint8_t policy);
struct Schema;
// The parsed schema of an op (null when it has none). Parsed and checked
// against the OpDef (name, number of tensor inputs) at registration.
const Schema* op_schema(const OpDef& op);

}  // namespace tp
