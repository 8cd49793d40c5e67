// Capture by tracing with run-time proxies (Section 3): the function runs once
// on the real inputs while a dispatcher interceptor records every operator call
// into a Graph (and executes it, so Python control flow sees real values).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tp::graph {

using TraceableFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct TraceResult {
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> outputs;  // the values the function returned on this call
};

// `input_names` (optional) name the placeholders (e.g. the Python parameter names).
// execute=false traces in meta mode: outputs get their shapes/dtypes from the
// operators' inference and are never computed (used to expand decompositions).
TraceResult trace(const TraceableFn& fn, const std::vector<Tensor>& inputs,
                  const std::vector<std::string>& input_names = {}, bool execute = true);

// True while a trace is being recorded on this thread (the binding refuses
// data-dependent reads such as item() then: a capture failure, Section 11.3).
bool is_tracing();

}  // namespace tp::graph
