// tp.mark_dynamic / tp.mark_static (dynamic shapes): per tensor object, dims the
// user declared symbolic (with an optional range) or static. Read when a compiled
// function captures with that tensor as an argument.
#pragma once
#include <map>

#include "graph/tracer.h"

namespace tp::compile {

struct DimMark {
  bool dynamic = false;  // false: mark_static
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};

void mark_dim(const Tensor& t, int64_t dim, DimMark mark);
// The marks of t (empty when none).
std::map<int64_t, DimMark> dim_marks(const Tensor& t);

}  // namespace tp::compile
