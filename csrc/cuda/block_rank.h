// A source fragment shared by the two-pass ranked compactions (masked_scatter,
// unique): the first pass counts each block's selected positions into counts[];
// the second pass opens with this fragment, which sums the counts of the blocks
// before this one into `var` (a warp-shuffle sum, one shared atomic per warp)
// and names lane/warp/warps for the ballot ranking inside each tile.
#pragma once
#include <string>

namespace tp::cuda {

inline std::string blocks_before_source(const char* var) {
  return std::string(
             "  __shared__ unsigned long long before_block;\n"
             "  __shared__ int per_warp[32];\n"
             "  if (threadIdx.x == 0) before_block = 0ull;\n"
             "  __syncthreads();\n"
             "  unsigned long long mine = 0ull;\n"
             "  for (long long b = threadIdx.x; b < blockIdx.x; b += blockDim.x) mine += (unsigned long long)counts[b];\n"
             "  for (int s = 16; s > 0; s >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, s);\n"
             "  if ((threadIdx.x & 31) == 0 && mine) atomicAdd(&before_block, mine);\n"
             "  __syncthreads();\n"
             "  long long ") +
         var +
         " = (long long)before_block;\n"
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;\n";
}

}  // namespace tp::cuda
