// Capture by tracing with run-time proxies (Section 3): the function runs once
// on the real inputs while a dispatcher interceptor records every operator call
// into a Graph (and executes it, so Python control flow sees real values).
#pragma once
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/shape_env.h"
#include "graph/sym_shape_rules.h"

namespace tp::graph {

using TraceableFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// A data gate (Section 3, Proposition 3.1): the Python code read a tensor's value
// during capture (`if x.sum() > 0:` calls bool(), `int(t)`, `t.item()`), so the
// captured program is valid only for calls where that read gives the same value.
// `guard` is the reverse slice of the captured graph that computes the read
// tensor from the inputs (arguments, then free tensors): replaying it on a new
// call tells which captured program applies.
struct DataGate {
  std::string kind;   // how Python read it: "bool", "int", "float", "item"; "numel": the
                      // element count of an operator's data-dependent result (nonzero)
  std::string where;  // the user's source line ("file.py:12"), when the binding knows it
  Scalar value;       // what the read gave at capture
  std::shared_ptr<const Graph> guard;
  std::string describe() const;  // "bool(Tensor) at f.py:12"
};

// The value a gate of `kind` reads from a one-element tensor (capture and replay share it).
Scalar read_gate_value(const std::string& kind, const Tensor& t);
// Replays the gate's guard graph on a call's inputs and reads its value.
Scalar replay_gate(const DataGate& gate, const std::vector<Tensor>& inputs);

// The binding's way to name the user's source line ("f.py:12") for a gate the
// tracer records itself (a data-dependent result size); called only then.
void set_source_line_provider(std::string (*fn)());

// During a trace: records a data gate on `t` (its value is computed and returned).
// Not tracing: returns the value without recording. In meta mode (no data) it is
// a CaptureError naming the read.
Scalar record_data_gate(const Tensor& t, const std::string& kind, const std::string& where);

struct TraceResult {
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> outputs;  // the values the function returned on this call
  // With lift_free_tensors: the free tensors the function read, in the order of
  // their placeholders (input_index = inputs.size() + position here).
  std::vector<Tensor> free_tensors;
  // Per free tensor: it shares memory with an input or an intermediate of this trace.
  std::vector<bool> free_aliases_traced;
  // Functionalization: the input_index of each placeholder the function wrote
  // (in place, through a view, or a BatchNorm running statistic). The graph
  // returns their final values after the function's results, in this order; the
  // caller copies them into its tensors. The inputs hold their original data
  // again when trace() returns (the capture's own writes are undone).
  std::vector<int> mutated_inputs;
  // Per operator recorded only as a part of one composite the function called
  // (nll_loss of cross_entropy): that composite's name; "" when it was also
  // called directly or by another composite. A compiled call's error from such
  // an operator names the composite, as eager does (CompiledFunction::call).
  std::map<std::string, std::string> part_of;
  // Eager's error when the function wrote in place into a value that a call
  // before the write saved for its backward (relu_'s result, then `h[:, 0] =
  // 0`): the compiled backward raises it, as eager's does; "" otherwise.
  std::string backward_error;
  // Per result: a view of the placeholder input_index in eager (-1: not), and
  // the view operators from it, so a caller can return a view as eager does.
  // Not a view of an input but of another result (eager's `y, y[0]`): output_index
  // is that result and `steps` lead from it, so both results share memory as in eager.
  struct OutputView {
    int input_index = -1;
    int output_index = -1;
    std::vector<std::pair<const OpDef*, Attrs>> steps;
  };
  std::vector<OutputView> output_views;
  // The last `hidden_outputs` of `outputs` are not the function's: each is an
  // intermediate that several results are views of (eager's `y = x * 2; return
  // y[0], y.view(-1)`), returned so those results are made views of it and share
  // memory as in eager (their output_views name it). Callers drop them. Only
  // with lift_free_tensors (tp.compile's captures).
  size_t hidden_outputs = 0;
  // Per result (hidden ones included): made inside the function under
  // tp.inference_mode (or a view of such a tensor): eager's is an inference tensor.
  std::vector<char> inference_outputs;
  // The data gates the function passed, in order.
  std::vector<DataGate> gates;
  // Random operators (ops/random_functional.h): each draw, in order: the
  // generator it drew from, the counters it took (eager's count, measured at
  // capture), its element count (symbolic in a dynamic capture: the graph's
  // symbols) and the elements per counter, so that a call at other sizes takes
  // ceil(numel / per). Each draw's state is a placeholder after the free
  // tensors, in this order: a caller passes philox_draw_states(...) at every
  // call, which advances each generator exactly as far as eager's calls would
  // and places each draw where eager's would start. The generators are back
  // where they were when trace() returns.
  struct RngInput {
    int64_t generator;
    uint64_t counters;
    SymDim numel = SymDim(int64_t{0});
    int64_t per = 4;
  };
  std::vector<RngInput> rng_inputs;
  // Dynamic shapes: the run-time shape guards of a symbolic capture (the graph's
  // `symbols` name the symbols; empty graph->symbols: the capture is static).
  std::vector<ShapeGuard> shape_guards;
  // Per result, per view step: the step's attributes computed from sizes
  // (evaluate them at the call's symbols before replaying the step).
  std::vector<std::vector<std::map<std::string, std::vector<SymDim>>>> output_view_sym_attrs;
};

// Dynamic shapes: how a capture treats one dim of an input.
struct DimSpec {
  bool symbolic = false;
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};
// Per input (in trace order), per dim. Dims of size 0 or 1 and dims of
// non-contiguous inputs stay static whatever the spec says.
using DynamicSpec = std::vector<std::vector<DimSpec>>;

// `input_names` (optional) name the placeholders (e.g. the Python parameter names).
// execute=false traces in meta mode: outputs get their shapes/dtypes from the
// operators' inference and are never computed (used to expand decompositions).
// A free tensor (read by the function but neither an input nor produced by a
// recorded operator: a parameter, a global, a closure variable) becomes a
// get_attr constant, or with lift_free_tensors an extra placeholder, so that the
// caller can pass its current value at every call (tp.compile does).
TraceResult trace(const TraceableFn& fn, const std::vector<Tensor>& inputs,
                  const std::vector<std::string>& input_names = {}, bool execute = true,
                  bool lift_free_tensors = false, const DynamicSpec* dynamic = nullptr);

// ---- dynamic shapes: what the binding asks during a symbolic capture ----
// True while a capture with symbolic sizes runs on this thread.
bool symbolic_tracing();
// The SymShape of a traced tensor (empty: not symbolic or not traced).
SymShape sym_sizes_of(const Tensor& t);
// Decides `e REL 0` at the hints and records the shape guard (where: the user's line).
bool decide_shape(const SymDim& e, GuardRel rel, const std::string& where);
// A size taken as a plain int: records e == hint and returns the hint.
int64_t specialize_shape(const SymDim& e, const std::string& where);
int64_t shape_hint(const SymDim& e);
// Printable form of a symbolic size, symbols named by origin.
std::string describe_shape(const SymDim& e);
// The binding opens one around each operator call the user's code makes while a
// symbolic capture runs; on close, SymInt attributes no recorded node took are
// specialized (the call's parts computed with their hint values).
class UserCallScope {
 public:
  explicit UserCallScope(UserCall call);
  ~UserCallScope() noexcept(false);
  UserCallScope(const UserCallScope&) = delete;
  UserCallScope& operator=(const UserCallScope&) = delete;

 private:
  UserCall call_;
  UserCall* prev_;
};

// True while a trace is being recorded on this thread (the binding refuses
// data-dependent reads such as item() then: a capture failure, Section 11.3).
bool is_tracing();

// Whether the exception leaving the traced function is the user's own (not a
// capture failure): the binding that calls the function says so for each
// exception it sees leave, so the outermost call's verdict stands. Eager would have raised it after the
// same in-place writes (a BatchNorm's running statistics, a counter) and
// random draws, which the capture ran for real: the trace keeps them instead
// of putting the inputs and generators back as after a capture failure. Inside
// a RestoreWritesOnError scope (a capture its caller retries, which would write
// twice) they are put back as before.
void note_user_exception(bool users);
struct RestoreWritesOnError {
  RestoreWritesOnError();
  ~RestoreWritesOnError();
  RestoreWritesOnError(const RestoreWritesOnError&) = delete;
  RestoreWritesOnError& operator=(const RestoreWritesOnError&) = delete;
};

// During a trace: whether eager autograd would record `t` (computed through
// differentiable operators called with grad mode on from a tensor that requires
// grad). The capture's tensors carry no history themselves. Outside a trace:
// t.requires_grad().
bool traced_requires_grad(const Tensor& t);

// During a trace: `t` is the view x.detach() made (the binding records detach as
// a view under no_grad); a write through it into a leaf that requires grad is
// allowed, as in eager, where the detached tensor has no autograd relation to x.
void note_detached(const Tensor& t);

// The number of data gates the running trace has recorded (0 when none runs).
size_t trace_gate_count();
// The number of random operators the running trace has recorded (0 when none runs).
size_t trace_random_count();

// While a custom Function's backward is traced into a joint graph (the
// binding's callback, graph/custom_function.h): a tensor it reads that is not a
// value of the trace raises CaptureError naming `who` (0-d constants excepted),
// instead of becoming a constant of the compiled backward.
class CustomBackwardScope {
 public:
  explicit CustomBackwardScope(const std::string& who);
  ~CustomBackwardScope();
  CustomBackwardScope(const CustomBackwardScope&) = delete;
  CustomBackwardScope& operator=(const CustomBackwardScope&) = delete;

 private:
  std::string who_;
  const std::string* prev_;
};

// During a trace: whether `t`'s value may differ at a later call of the captured
// function: it is an input or free tensor, is computed from one (or from a random
// draw, whose generator state is an input), or is unknown to the trace. False
// for values computed only from constants (tp.zeros(...) inside the function),
// and when no trace runs. The binding refuses to copy such a value outside the
// operators (a device move), which the graph would otherwise keep as a stale copy.
bool depends_on_call(const Tensor& t);

// During a trace: whether `t` is a tensor an operator of the trace made (not a
// view, not an input or free tensor), so that its storage is the captured
// program's alone. The binding lets an out= resize (a storage swap the trace
// does not record) through only for such a tensor. False when no trace runs.
bool is_own_value(const Tensor& t);

// During a trace: `t` stands for `src`'s value in the operators recorded from
// now on (its earlier uses keep the old one). For an own value (is_own_value)
// only: a view or an input would be recomputed from or written back to its base.
void rebind_value(const Tensor& t, const Tensor& src);

// During a trace: whether `t` is computed by operators from `roots` (at least one
// of them) and constants only. The binding returns a 0-d result computed from
// item() values as a Python number, as eager's arithmetic on floats gives one.
bool computed_only_from(const Tensor& t, const std::vector<Tensor>& roots);

}  // namespace tp::graph
