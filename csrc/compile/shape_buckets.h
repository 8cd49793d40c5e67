// Shape bucketing (Section 10, Proposition 10.3): options={"shape_buckets": "pow2"}
// (or a list of sizes) pads each dynamic dim of size n to its bucket B >= n and
// runs the version compiled statically at B, then slices the results back to n,
// so a range of sizes shares one artifact with bounded waste.
//
// Padding is only sound for a program that never lets a padded position reach an
// unpadded one. `analyze_padding` decides it per call shape on a capture made at
// the bucket sizes with the bucketed dims symbolic: a padded dim is a bare size
// symbol, so the symbolic shapes label, for every value, the dims that carry
// padding. Anything not known to keep those rows independent refuses (the call
// then takes the ordinary static / dynamic path) and the refusal names the
// operator and why.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/tracer.h"

namespace tp::compile {

// options["shape_buckets"]: "pow2" (next power of two >= n, at least `floor`), or
// a list of sizes "[8, 32, 128]" (the smallest >= n; above the last: no bucket).
struct BucketPolicy {
  bool pow2 = false;
  std::vector<int64_t> sizes;  // ascending
  int64_t floor = 8;
  bool enabled() const { return pow2 || !sizes.empty(); }
  // The bucket of size n; -1 when n has none.
  int64_t bucket(int64_t n) const;
  // Throws ValueError naming the option on anything else.
  static BucketPolicy parse(const std::string& text);
};

// The verdict for one call shape (the exact specialization key of the unpadded call).
struct BucketPlan {
  bool safe = false;
  std::string refusal;             // why not, naming the operator
  std::vector<Shape> padded;       // per tensor argument: the sizes it runs at
  std::vector<bool> is_padded;     // per tensor argument: some dim grows
  // Per result: (dim, size n) to narrow it to; and when eager's result is a view
  // of an argument, the view steps replayed on that argument instead.
  struct Result {
    std::vector<std::pair<int64_t, int64_t>> narrow;
    int view_of = -1;
    int same_as = -1;  // eager returned the same object as this earlier result
    std::vector<std::pair<const OpDef*, Attrs>> steps;
  };
  std::vector<Result> results;
  // Refused along these padded dims only (tensor argument, dim): a retry without them may pad.
  std::vector<std::pair<int, int64_t>> drop;
  // Per tensor argument: the padded input buffer reused by every call of this shape,
  // and the view of its leading corner the call's data is copied into.
  mutable std::vector<Tensor> buffer, corner;
  std::vector<int> mutated;  // tensor arguments the function writes (the unpadded part is copied back)
};

// `tr`: the capture at the padded sizes with the bucketed dims symbolic; `unpadded`:
// the call's tensor arguments; `padded`: what the capture ran on; `names`: the
// arguments' names for messages.
BucketPlan analyze_padding(const graph::TraceResult& tr, const std::vector<Tensor>& unpadded,
                           const std::vector<Tensor>& padded, const std::vector<std::string>& names);

// A zero-filled contiguous tensor of `sizes` holding `x` in its leading corner.
Tensor pad_to(const Tensor& x, const Shape& sizes);

}  // namespace tp::compile
