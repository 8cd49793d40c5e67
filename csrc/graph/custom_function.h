// A tp.autograd.Function applied while a capture needs gradients
// (python/tensorplay/autograd/function.py). Its forward's operators are
// recorded as usual under no_grad (they send no gradient: the Function's
// backward replaces their derivative), and one node carries the Function's
// autograd identity:
//
//   custom_function(out_0..out_{k-1}, in_0..in_{m-1}, saved..., fn=id, num_outputs=k, num_inputs=m, name="Sq")
//
// Its results are its first k arguments (the forward's differentiable outputs,
// as aliases); the inputs are the Function's tensor arguments; `saved` are the
// values its backward reads (ctx.save_for_backward, tensors kept on ctx).
// Its derivative is the user's backward, reached through the callback
// registered under `fn`, called with the gradients of the k results (undefined
// where none flowed), the results and the saved values. The joint graph
// (aot/joint_graph.cpp) gives the node no node of its own: the callback, run
// on the joint trace's values, records the user's backward as ordinary
// operators, which the partitioner can save or recompute around. The
// interpreter (eager autograd over a captured graph: backend "eager", the AOT
// layer's fallback) runs it as an autograd Function.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace tp::graph {

// grads (one per result, undefined where none flowed), results, saved values
// -> one gradient (possibly undefined) per Function input.
using CustomBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads,
                                                         const std::vector<Tensor>& outputs,
                                                         const std::vector<Tensor>& saved)>;

// Registers a backward; the id goes into the node's `fn` attribute. Entries
// live as long as the process (a graph, or an autograd node of an interpreted
// call, may still reach them); they hold no tensors.
int64_t register_custom_backward(CustomBackward fn);

// The operator of the node (not in the registry, like getitem: no Python
// binding, no lowering; nothing outside this file and its callers sees it).
const OpDef& custom_function_op();
bool is_custom_function(const OpDef& op);

// The node's results: fresh aliases (no autograd history) of its first
// num_outputs arguments.
std::vector<Tensor> custom_function_results(const std::vector<Tensor>& args, const Attrs& attrs);

// The interpreter's call: the results, and with grad mode on an autograd
// Function node over the Function's inputs that runs the user's backward.
std::vector<Tensor> run_custom_function(const std::vector<Tensor>& args, const Attrs& attrs);

}  // namespace tp::graph
