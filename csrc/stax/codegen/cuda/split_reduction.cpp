#include "stax/codegen/cuda/split_reduction.h"

#include <algorithm>

namespace tp::stax::codegen {

int split_reduction_blocks(int64_t items) {
  // About 8 items per thread before a block is added: a million floats (4
  // lanes) spread over 62 blocks, large tensors over all kSplitMaxBlocks.
  const int64_t per_block = int64_t{kSplitThreads} * 8;
  const int64_t blocks = std::min<int64_t>((items + per_block - 1) / per_block, kSplitMaxBlocks);
  return blocks >= 4 ? static_cast<int>(blocks) : 0;
}

int64_t split_reduction_scratch_bytes(int acc_bytes, int blocks) {
  return kSplitPartialsOffset + int64_t{acc_bytes} * blocks;
}

std::string split_reduction_param() { return "unsigned char* __restrict__ tp_scratch"; }

std::string split_reduction_combine(const std::string& acc, const std::string& acc_type, const std::string& init,
                                    const std::string& functor, const std::string& shared, const std::string& ind) {
  const std::string part = "((volatile " + acc_type + "*)(tp_scratch + " + std::to_string(kSplitPartialsOffset) + "))";
  std::string s;
  s += ind + "{\n";
  s += ind + "  __shared__ bool tp_last;\n";
  s += ind + "  if (threadIdx.x == 0) {\n";
  s += ind + "    " + part + "[blockIdx.x] = " + acc + ";\n";
  s += ind + "    __threadfence();  // the partial is visible before the arrival is counted\n";
  s += ind + "    tp_last = atomicAdd((unsigned*)tp_scratch, 1u) == gridDim.x - 1;\n";
  s += ind + "  }\n";
  s += ind + "  __syncthreads();\n";
  s += ind + "  if (!tp_last) return;\n";
  s += ind + "  __threadfence();  // the other blocks' partials, counted before, are read after\n";
  s += ind + "  " + acc + " = " + init + ";\n";
  s += ind + "  for (unsigned tp_b = threadIdx.x; tp_b < gridDim.x; tp_b += blockDim.x)\n";
  s += ind + "    " + acc + " = " + functor + "(" + acc + ", " + part + "[tp_b]);\n";
  s += ind + "  " + acc + " = tp_block_reduce(" + acc + ", " + functor + ", " + shared + ");\n";
  s += ind + "}\n";
  return s;
}

}  // namespace tp::stax::codegen
