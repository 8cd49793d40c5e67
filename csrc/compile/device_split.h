// A captured graph whose values live on more than one device: a `_to_device`
// move inside a compiled function (`x.cuda()`, `y.cpu()`). A compiled region's
// buffers live on one device, so the graph is cut into one region per device
// and stage, and the moves run between them: the code on each side of a move
// is generated as usual instead of the whole graph being interpreted.
#pragma once
#include "compile/backend.h"

namespace tp::compile {

// The region of `r` (a static graph with moves) as per-device regions, each
// compiled by `compile_part` (a BackendRequest on its subgraph, without
// moves), chained with the moves. A part whose input reaches it at a call in
// another layout than it was compiled for runs through the interpreter for
// that call (the subgraph's eager form), so a layout the capture did not
// foresee is slower, never wrong.
RegionFn compile_device_split(const BackendRequest& r, const BackendFn& compile_part);

}  // namespace tp::compile
