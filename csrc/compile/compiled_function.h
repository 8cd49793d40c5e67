// tp.compile's run-time object (Sections 2, 3, 11): specialization key, guard
// chain, first-level entry, capture, passes, backend dispatch and fallback.
//
// One call:
//   first-level entry: the same tensor objects with the same version counters
//     and metadata as the last call (and equal scalars), and every free tensor
//     the function read (parameters, globals, closure variables) re-read and
//     found to be the same object at the same version -> run the last artifact;
//   else the specialization key (dtype, sizes, strides, requires_grad of each
//     tensor; value of each Python scalar; grad mode), then the free tensors'
//     metadata -> cached artifact;
//   else capture -> passes -> backend -> register under the key.
// Compiling must be unobservable (Sections 11.3, 12.1): free tensors are graph
// inputs read at every call, results alias inputs exactly where eager's do,
// and the caller gets back eager's output structure (OutputStructure).
#pragma once
#include <optional>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "aot/training_region.h"
#include "compile/options.h"
#include "compile/shape_buckets.h"
#include "graph/graph.h"
#include "graph/tracer.h"
#include "stax/backend/stax_backend.h"

namespace tp::compile {

using ArgValue = std::variant<Tensor, Scalar>;

// How the user's function arranged its tensor results (containers, None, numbers).
// Opaque to the compiler: the binding that made it reads it back. Remembered per
// specialization, so every call returns the structure eager returned.
struct OutputStructure {
  virtual ~OutputStructure() = default;
};

// Calls the user's function with these arguments (tensors may be tracing proxies).
using UserFn = std::function<std::vector<Tensor>(const std::vector<ArgValue>& args)>;
// The same, also reporting the structure of what the function returned.
using StructuredUserFn = std::function<std::vector<Tensor>(const std::vector<ArgValue>& args,
                                                           std::shared_ptr<const OutputStructure>* structure)>;

// A tensor the function read that is neither an argument nor made inside the
// call (a module parameter, a global, a closure variable): re-read at every call.
// `read` returns an undefined Tensor when the owner no longer holds a tensor.
struct FreeTensorSource {
  std::function<Tensor()> read;
  std::string name;  // for recompile reasons and errors, e.g. "self.weight"
  // Read through its owner (attribute, global, closure cell), so a re-bound owner
  // is seen; false: the very object is re-read.
  bool from_owner = true;
  // >= 0: the `.grad` of the call's tensor argument at this index (`p.grad` in an
  // update taking `p`), read through the argument at every call (`read` unused):
  // backward() with set_to_none gives p another gradient object each step.
  int grad_of = -1;
};

// During a capture, the binding's Tensor.grad getter reports each tensor whose
// `.grad` the function read: whether it had one is part of the program
// (`if p.grad is not None:`), so it selects the version (Artifact::grad_reads).
void note_grad_read(const Tensor& t);
// During a capture, the binding's Tensor.data getter reports each alias it made
// and of which tensor: a free tensor that is one is read through that tensor.
void note_data_read(const Tensor& alias, const Tensor& of);
// Given the free tensors a capture found (in graph-input order), says how to re-read
// each. The default re-reads the very object (in-place updates are seen, rebinding
// the owner's attribute is not: only a binding knows the owner).
using FreeTensorLocator = std::function<std::vector<FreeTensorSource>(const std::vector<Tensor>& found)>;

class CompiledFunction {
 public:
  CompiledFunction(UserFn fn, CompileOptions options, std::vector<std::string> arg_names, int num_params);
  CompiledFunction(StructuredUserFn fn, CompileOptions options, std::vector<std::string> arg_names, int num_params);
  std::vector<Tensor> call(const std::vector<ArgValue>& args) { return call(args, nullptr); }
  // `structure` (optional) receives the output structure of the version that ran; it
  // stays valid until the next call.
  std::vector<Tensor> call(const std::vector<ArgValue>& args, const OutputStructure** structure);
  // An error of a compiled call raised by an operator that the captures met only
  // as a part of one composite (nll_loss of cross_entropy): its message renamed
  // for that composite, as the eager binding names it; nullopt otherwise.
  std::optional<std::string> named_for_caller(const char* what) const;
  void set_free_tensor_locator(FreeTensorLocator locator) { locator_ = std::move(locator); }
  // Non-tensor state the capture bakes in that must select the version (a module's
  // training flags): read at every call, part of the first-level entry and the key.
  // The text it returns must stay valid until its next call (the reader keeps it,
  // so a call copies nothing while the state is unchanged).
  void set_state_reader(std::function<const std::string&()> reader) { state_reader_ = std::move(reader); }
  // The function's name, for region names in errors, logs and metrics.
  void set_name(std::string name) { name_ = std::move(name); }
  const CompileOptions& options() const { return options_; }
  int num_params() const { return num_params_; }
  // Arguments the binding appends after the user's for this call (the value
  // inputs of automatic dynamic ints): the arity check allows them.
  void set_extra_args(int n) { extra_args_ = n; }
  // How many versions this function has built (a capture happened during a call
  // when it grew), and whether the most recent one kept dim `d` of its tensor
  // argument `t` (index among the call's tensors) symbolic.
  uint64_t builds() const { return builds_; }
  bool last_build_symbolic(size_t t, size_t d) const {
    return t < last_build_sym_.size() && d < last_build_sym_[t].size() && last_build_sym_[t][d];
  }
  // The graph of the most recent specialization (after passes), for inspection.
  std::shared_ptr<const graph::Graph> last_graph() const { return last_graph_; }
  std::string last_source() const { return last_source_; }
  // The AOT layer's result for the most recent training specialization (null
  // if it ran without gradients): the joint graph's code and the partition.
  struct AotInfo {
    std::string joint_code;
    aot::Partition partition;
  };
  std::shared_ptr<const AotInfo> last_aot() const { return last_aot_; }
  const std::vector<graph::DataGate>& last_gates() const { return last_gates_; }
  const std::vector<int>& last_mutated_inputs() const { return last_mutated_; }
  // Of the most recent Stax compile (tp.compiler.explain): the generated kernels,
  // and why the backend refused the region (empty when it did not).
  const std::vector<stax::KernelInfo>& last_kernels() const { return last_kernels_; }
  const std::string& last_fallback_reason() const { return last_fallback_reason_; }
  size_t num_specializations() const;
  // Shape buckets (options["shape_buckets"], compile/shape_buckets.h): whether the
  // last call ran padded, how many calls did, and why the last unpadded call was refused.
  bool last_call_bucketed() const { return last_call_bucketed_; }
  int64_t bucketed_calls() const { return bucketed_calls_; }
  const std::string& last_bucket_refusal() const { return last_bucket_refusal_; }

 private:
  // call() = a profiler range around call_unprofiled() = error renaming around call_unnamed().
  std::vector<Tensor> call_unprofiled(const std::vector<ArgValue>& args, const OutputStructure** structure);
  std::vector<Tensor> call_unnamed(const std::vector<ArgValue>& args, const OutputStructure** structure);
  // graph::TraceResult::part_of over every capture (an operator met in two
  // roles maps to "").
  std::map<std::string, std::string> part_of_;
  // What the first-level entry compares for one tensor: the object (alive: a
  // reused address cannot match), its version counter, and everything `.data =`
  // or a metadata change could alter without touching the version.
  struct Stamp {
    const TensorImpl* impl = nullptr;
    std::weak_ptr<TensorImpl> alive;
    const StorageImpl* storage = nullptr;
    uint64_t version = 0;
    int64_t offset = 0;
    DType dtype = DType::Float32;
    bool requires_grad = false;
    Shape sizes, strides;
    static Stamp of(const Tensor& t);
    bool matches(const Tensor& t) const;
  };
  // How each result must alias the call's tensors, as eager's did (decided at capture).
  struct OutputAliasing {
    std::vector<int> same_as_input;   // >= 0: eager returned that input object itself
    std::vector<int> same_as_output;  // >= 0: eager returned the same object as an earlier result
    // A view of an input in eager: the view operators from the input (index) to the result.
    struct ViewStep {
      const OpDef* op;
      Attrs attrs;
      std::map<std::string, std::vector<graph::SymDim>> sym_attrs;  // evaluated per call (dynamic shapes)
    };
    std::vector<int> view_of_input;
    // >= 0: a view of that (fresh) result in eager, `view_steps` from it: the
    // results share memory as eager's do (a write into one shows in the other).
    std::vector<int> view_of_output;
    std::vector<std::vector<ViewStep>> view_steps;
    bool trivial = true;  // every result fresh in eager (the common case: one storage check each)
  };
  // Dynamic shapes: which calls a version built from a symbolic graph serves.
  struct ShapeSpec {
    std::string nonshape_key;  // grad mode, state, scalars, per tensor dtype/requires_grad/ndim
    struct Input {
      // Per dim: >= 0 a static size; < 0 symbol -(d + 1).
      std::vector<int64_t> dims;
      Shape strides;          // exact strides when no dim is symbolic
      bool symbolic = false;  // some dim is: the tensor must be contiguous
      std::string name;
    };
    std::vector<Input> inputs;
    std::vector<graph::SymbolInfo> symbols;
    std::vector<graph::ShapeGuard> guards;
    // The call matches: its symbol values go to `values` (size_var_id(k) -> value).
    // On a miss, `why` (when given) names the failed guard.
    bool matches(const std::vector<Tensor>& tensors, std::unordered_map<int, int64_t>* values,
                 std::string* why) const;
  };
  struct Artifact {
    RegionFn run;
    std::shared_ptr<const ShapeSpec> shape;  // null: static (the exact key selects it)
    std::shared_ptr<const graph::Graph> graph;
    std::string description;  // per-argument metadata, for recompile reasons
    std::vector<FreeTensorSource> free;
    std::string free_key;     // the free tensors' metadata when built
    std::shared_ptr<const OutputStructure> structure;
    OutputAliasing aliasing;
    // The graph's last results before the mutated inputs' values that are not the
    // function's (TraceResult::hidden_outputs): dropped after the aliasing is made.
    size_t hidden_outputs = 0;
    // Per result: an inference tensor in eager whatever the caller's mode
    // (TraceResult::inference_outputs: made under tp.inference_mode inside).
    std::vector<char> inference_results;
    // Per result: not a graph output. A result that is an input (or a view of one)
    // in eager is that input (or the view replayed on it) after the call, so the
    // backend computing its value would be wasted work: `a.mul_(s).add_(b)` wrote
    // the whole of `a` a second time. Empty: every result is a graph output.
    std::vector<char> not_computed;
    // Functionalization: inputs (indices into the call's tensors, free tensors
    // after the arguments) the function writes; the graph returns their final
    // values after the function's results, and the call copies them in.
    std::vector<int> mutated_inputs;
    // Per mutated input: copy its final value in. False for a tensor the function
    // made outside the operators (`tp.tensor([...])` inside it: no owner holds it,
    // each eager call starts from a fresh one, so the write must not persist).
    std::vector<bool> write_back;
    // Per mutated input: the function wrote it with grad mode on (else under
    // no_grad, as an optimizer step does: the write-back is not recorded either).
    std::vector<bool> write_recorded;
    // Data gates (Section 3): this version is valid for calls whose gates, replayed
    // in order on the call's inputs, give these values.
    std::vector<graph::DataGate> gates;
    // Random operators: per generator drawn from, the counters a call reserves;
    // the states are graph inputs after the free tensors (graph/tracer.h).
    std::vector<graph::TraceResult::RngInput> rng;
    // The tensors whose `.grad` the capture read and whether each had one: a
    // version that skipped `p` (its grad was None) must not run once p has a
    // gradient, nor the reverse. The tensor is the call's input `input` (an
    // argument or a free tensor), or else found through `source` (a parameter
    // the function never passed to an operator, since its grad was None).
    struct GradRead {
      int input = -1;
      FreeTensorSource source;
      bool defined = false;
    };
    std::vector<GradRead> grad_reads;
  };
  struct FirstLevel {
    std::vector<Stamp> tensors;  // per argument; impl null for scalars
    std::vector<Scalar> scalars;
    std::vector<Stamp> free;
    bool grad_mode = true;
    DType default_dtype = DType::Float32;
    uint32_t autocast = 0;  // autocast_state_code()
    std::string state;
    const Artifact* artifact = nullptr;
  };

  bool first_level_matches(const std::vector<ArgValue>& args) const;
  bool read_free(const Artifact& a, std::vector<Tensor>* all) const;
  // Whether every tensor whose `.grad` the version's capture read still has (or
  // still lacks) one; `why` names the first that changed.
  bool grads_match(const Artifact& a, const std::vector<Tensor>& all, std::string* why = nullptr) const;
  void remember_first_level(const std::vector<ArgValue>& args, const std::vector<Tensor>& all, const Artifact* a);
  std::string specialization_key(const std::vector<ArgValue>& args) const;
  std::string nonshape_key(const std::vector<ArgValue>& args) const;
  // Dynamic shapes: per tensor argument, per dim, how the next capture treats it.
  graph::DynamicSpec dynamic_spec(const std::vector<Tensor>& tensors);
  void note_sizes(const std::vector<Tensor>& tensors);
  static std::string free_key(const std::vector<Tensor>& all, size_t first_free);
  std::string describe(const std::vector<ArgValue>& args, const std::vector<FreeTensorSource>& free,
                       const std::vector<Tensor>& all) const;
  std::unique_ptr<Artifact> build(const std::vector<ArgValue>& args, std::vector<Tensor>* inputs,
                                  const graph::DynamicSpec* dynamic);
  RegionFn run_backend(std::shared_ptr<graph::Graph> g, const std::vector<Tensor>& tensors,
                       const std::string& grad_reason, const std::vector<int>& written_inputs, std::string* source,
                       const std::vector<std::pair<int, int>>& write_into = {},
                       std::shared_ptr<aot::JointGraph> joint = nullptr,
                       std::shared_ptr<const std::vector<std::vector<int>>> results_from_results = nullptr,
                       std::shared_ptr<const std::vector<std::vector<int>>> results_eager_reads = nullptr,
                       std::string backward_error = {});
  std::vector<Tensor> run(const Artifact& a, const std::vector<Tensor>& all) const;
  void warn_fallback(const std::string& reason);
  std::set<std::string> disabled_passes() const;  // options["disable_passes"]
  int int_option(const char* name, int fallback) const;
  int max_gate_artifacts() const;
  int max_versions() const;
  void check_arity(const std::vector<ArgValue>& args) const;
  // Shape buckets: true when the call ran padded (`result` holds its results).
  bool bucketed_call(const std::vector<ArgValue>& args, const OutputStructure** structure, std::vector<Tensor>* result);

  StructuredUserFn fn_;
  CompileOptions options_;
  std::vector<std::string> arg_names_;
  std::string name_;
  int num_params_;  // -1: unknown / variadic
  int extra_args_ = 0;
  uint64_t builds_ = 0;
  std::vector<std::vector<bool>> last_build_sym_;  // per tensor argument, per dim
  FreeTensorLocator locator_;
  std::function<const std::string&()> state_reader_;
  std::string state_;  // what state_reader_ gave for the current call
  // Specialization key -> the versions built under it (several when free tensors' metadata differ).
  std::unordered_map<std::string, std::vector<std::unique_ptr<Artifact>>> cache_;
  // Versions built from symbolic graphs, by nonshape_key (their ShapeSpec selects).
  std::unordered_map<std::string, std::vector<std::unique_ptr<Artifact>>> symbolic_cache_;
  // Automatic dynamic: the sizes of the tensor arguments of each capture so far,
  // and per argument, per dim, whether it changed between them.
  std::vector<std::vector<Shape>> seen_sizes_;
  std::vector<std::vector<bool>> changed_dims_;
  FirstLevel first_;
  // call()'s tensor vector, kept between calls (emptied before each returns);
  // a call made while one runs uses its own.
  std::vector<Tensor> all_scratch_;
  bool all_busy_ = false;
  uint64_t epoch_;
  bool warned_fallback_ = false;
  int gated_versions_ = 0;  // versions built with data gates (capped by max_gate_artifacts)
  std::shared_ptr<const OutputStructure> eager_structure_;
  std::shared_ptr<const OutputStructure> inline_structure_;
  std::shared_ptr<const graph::Graph> last_graph_;
  std::string last_source_;
  std::shared_ptr<const AotInfo> last_aot_;
  // Dynamic shapes in training: symbolic joint graphs refused so far. After two
  // (a formula that bakes in a size refuses every time; a hint collision once),
  // the function's training captures stay static without trying again.
  int symbolic_training_refusals_ = 0;
  std::vector<graph::DataGate> last_gates_;
  std::vector<int> last_mutated_;
  std::vector<stax::KernelInfo> last_kernels_;
  std::string last_fallback_reason_;
  // Shape buckets: the policy, the verdict per unpadded specialization key, the first
  // call's sizes (automatic dynamic buckets the dims that changed since), and a flag
  // set while the padded call runs (it must take the static path at the bucket sizes).
  BucketPolicy bucket_policy_;
  std::unordered_map<std::string, std::shared_ptr<const BucketPlan>> bucket_plans_;
  std::vector<Shape> bucket_first_sizes_;
  // (tensor argument, dim) refused once -> why: not bucketed from then on.
  std::map<std::pair<int, int64_t>, std::string> bucket_dropped_;
  bool in_bucket_call_ = false;
  bool last_call_bucketed_ = false;
  int64_t bucketed_calls_ = 0;
  std::string last_bucket_refusal_;
};

}  // namespace tp::compile
