// The split form of a reduction over all elements (issue 12): a one-row
// kernel whose first nest is its only reduction (x.sum(), x.mean(), a loss)
// used to run as one block of 1024 threads, a single SM for the whole tensor.
// Split, it runs on up to kSplitMaxBlocks blocks: each block reduces a
// grid-stride share of the items and publishes its partial in a scratch
// buffer; the last block to arrive (an atomic counter in the same buffer)
// combines the partials in block order, so the result does not depend on which
// block finished last (deterministic), and runs the kernel's remaining nests
// (mean's division) alone. The scratch is per launch: the kernel takes it as
// its last argument, and the host allocates it from the stream-ordered caching
// allocator on the launch's stream with the counter word zeroed, so one region
// called on two streams at once never shares partials or counter (it was
// module-scope __device__ memory, shared by concurrent launches, before).
#pragma once
#include <cstdint>
#include <string>

namespace tp::stax::codegen {

constexpr int kSplitThreads = 512;
constexpr int kSplitMaxBlocks = 1024;
// The scratch layout: the arrival counter (4 bytes, zeroed by the host before
// each launch), then the partials from this offset (aligned for double).
constexpr int kSplitPartialsOffset = 16;

// Blocks for a reduction of `items` work items (vector groups or scalars);
// 0 keeps the one-block form (too few items to gain from more blocks).
int split_reduction_blocks(int64_t items);

// Bytes of scratch a launch of `blocks` blocks needs (counter + partials).
int64_t split_reduction_scratch_bytes(int acc_bytes, int blocks);

// The kernel's extra (last) parameter.
std::string split_reduction_param();

// Printed after the block's own combine, with every thread holding `acc`:
// blocks other than the last to arrive return; the last one leaves the total
// in `acc` for all its threads.
std::string split_reduction_combine(const std::string& acc, const std::string& acc_type, const std::string& init,
                                    const std::string& functor, const std::string& shared, const std::string& indent);

}  // namespace tp::stax::codegen
