// philox_random (ops/random_functional.h): a random draw whose randomness is an
// input. The kernel runs the eager operator itself on a private generator
// positioned at (seed, first + offset), so an interpreted region draws the very
// numbers eager draws: same Philox counters, same transform, by construction.
#include <string>

#include "ops/dispatch.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/random_functional.h"
#include "ops/registry.h"

namespace tp {
namespace {

// A generator of the table that lives for one draw.
class ScratchGenerator {
 public:
  ScratchGenerator(uint64_t key, uint64_t first) : id_(generator_create(GeneratorState{key, first})) {}
  ~ScratchGenerator() { generator_destroy(id_); }
  ScratchGenerator(const ScratchGenerator&) = delete;
  ScratchGenerator& operator=(const ScratchGenerator&) = delete;
  int64_t id() const { return id_; }

 private:
  int64_t id_;
};

const OpDef& eager_op(const std::string& distribution) {
  static const OpDef& rand = get_op("rand");
  static const OpDef& randn = get_op("randn");
  static const OpDef& randint = get_op("randint.low");
  static const OpDef& randperm = get_op("randperm");
  if (distribution == "uniform") return rand;
  if (distribution == "normal") return randn;
  if (distribution == "randint") return randint;
  if (distribution == "randperm") return randperm;
  throw ValueError(str("philox_random: unknown distribution '", distribution,
                       "' (expected 'uniform', 'normal', 'randint' or 'randperm')"));
}

std::vector<TensorMeta> philox_random_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in.size() == 1 && in[0].defined && in[0].dtype == DType::Int64 && in[0].sizes == Shape{2}, TypeError,
           op.name, ": expected the generator state as an int64 tensor of 2 elements [seed, counter], got ",
           in.empty() || !in[0].defined ? std::string("None") : dtype_name(in[0].dtype) + shape_str(in[0].sizes));
  eager_op(attrs.get_str("distribution"));
  Shape size = attrs.get<std::vector<int64_t>>("size");
  return {TensorMeta::contiguous(std::move(size), attrs.get<DType>("dtype"))};
}

std::vector<Tensor> philox_random_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                      const std::vector<TensorMeta>&) {
  Tensor st = as_contiguous(in[0]);
  const int64_t* s = st.data_as<int64_t>();
  const uint64_t key = static_cast<uint64_t>(s[0]);
  const uint64_t first = static_cast<uint64_t>(s[1]) + static_cast<uint64_t>(attrs.get_int("offset"));
  const std::string& dist = attrs.get_str("distribution");
  const std::vector<int64_t>& size = attrs.get<std::vector<int64_t>>("size");
  ScratchGenerator gen(key, first);
  Attrs a{{"dtype", attrs.get<DType>("dtype")}, {"generator", gen.id()}};
  if (dist == "randperm") {
    a.set("n", size.at(0));
  } else {
    a.set("size", size);
    if (dist == "randint") {
      a.set("low", attrs.get_int("low"));
      a.set("high", attrs.get_int("high"));
    }
  }
  return run_kernel(eager_op(dist), {}, a);
}

}  // namespace

Tensor reserve_philox_state(int64_t gen, uint64_t counters) {
  const PhiloxRange r = generator_reserve(gen, counters);
  Tensor t = Tensor::empty({2}, DType::Int64);
  t.data_as<int64_t>()[0] = static_cast<int64_t>(r.key);
  t.data_as<int64_t>()[1] = static_cast<int64_t>(r.first);
  return t;
}

Tensor peek_philox_state(int64_t gen) {
  const GeneratorState g = generator_get_state(gen);
  Tensor t = Tensor::empty({2}, DType::Int64);
  t.data_as<int64_t>()[0] = static_cast<int64_t>(g.seed);
  t.data_as<int64_t>()[1] = static_cast<int64_t>(g.offset);
  return t;
}

std::vector<Tensor> philox_draw_states(const std::vector<PhiloxDraw>& draws, bool reserve) {
  std::vector<Tensor> out(draws.size());
  std::vector<bool> done(draws.size(), false);
  for (size_t k = 0; k < draws.size(); ++k) {
    if (done[k]) continue;
    const int64_t gen = draws[k].generator;
    uint64_t total = 0;
    for (size_t j = k; j < draws.size(); ++j)
      if (draws[j].generator == gen) total += draws[j].counters;
    Tensor base = reserve ? reserve_philox_state(gen, total) : peek_philox_state(gen);
    const int64_t key = base.data_as<int64_t>()[0];
    uint64_t next = static_cast<uint64_t>(base.data_as<int64_t>()[1]);
    for (size_t j = k; j < draws.size(); ++j) {
      if (draws[j].generator != gen) continue;
      Tensor t = Tensor::empty({2}, DType::Int64);
      t.data_as<int64_t>()[0] = key;
      t.data_as<int64_t>()[1] = static_cast<int64_t>(next);
      next += draws[j].counters;
      out[j] = std::move(t);
      done[j] = true;
    }
  }
  return out;
}

void register_random_functional_ops() {
  // Internal (no schema, no Python binding): only the tracer makes it. kAllDTypes:
  // the eager operator it runs widens and narrows 16-bit dtypes itself.
  register_op({.name = "philox_random", .tags = kAllDTypes, .num_inputs = 1, .infer = &philox_random_infer,
               .cpu = &philox_random_cpu});
}

}  // namespace tp
