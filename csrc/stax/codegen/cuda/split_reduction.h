// The split form of a reduction over all elements (issue 12): a one-row
// kernel whose first nest is its only reduction (x.sum(), x.mean(), a loss)
// used to run as one block of 1024 threads, a single SM for the whole tensor.
// Split, it runs on up to kSplitMaxBlocks blocks: each block reduces a
// grid-stride share of the items and publishes its partial in module-scope
// device memory; the last block to arrive (an atomic counter) combines the
// partials in block order, so the result does not depend on which block
// finished last (deterministic), and runs the kernel's remaining nests (mean's
// division) alone. One launch, no scratch buffer for the host to allocate.
// The scratch is per kernel and module: launches of one region must not
// overlap (true on one stream; concurrent streams would need a buffer slot).
#pragma once
#include <cstdint>
#include <string>

namespace tp::stax::codegen {

constexpr int kSplitThreads = 512;
constexpr int kSplitMaxBlocks = 1024;

// Blocks for a reduction of `items` work items (vector groups or scalars);
// 0 keeps the one-block form (too few items to gain from more blocks).
int split_reduction_blocks(int64_t items);

// Module-scope declarations for kernel `name`: the partials and the counter.
std::string split_reduction_globals(const std::string& name, const std::string& acc_type, int blocks);

// Printed after the block's own combine, with every thread holding `acc`:
// blocks other than the last to arrive return; the last one leaves the total
// in `acc` for all its threads and resets the counter for the next launch.
std::string split_reduction_combine(const std::string& name, const std::string& acc, const std::string& acc_type,
                                    const std::string& init, const std::string& functor, const std::string& shared,
                                    const std::string& indent);

}  // namespace tp::stax::codegen
