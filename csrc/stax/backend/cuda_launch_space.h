// The launch choices of one CUDA region as a search space (Section 9.6,
// mode="max-autotune"; the search itself is launch_search.h). Only knobs the
// region's printed kernels really have become parameters:
//  - register-row kernels: `row_block` (threads; the vector groups each thread
//    keeps in registers follow from it);
//  - other row kernels: `row_threads`;
//  - row kernels of several rows (not split): `rows_per_block` — the grid is
//    rows / rows_per_block blocks, each walking its rows (the printed row loop
//    already strides by gridDim.x, so this is a launch choice, not a source one);
//  - flat kernels: `flat_block` (threads) and `flat_blocks_per_sm` (the grid-
//    stride loop's grid, hence the elements per thread);
//  - column kernels: `column_width` (outputs per block row) and
//    `column_threads`;
//  - split reductions: `split_blocks` (the split factor) and `split_threads`.
// Each parameter's default is what the printer and the host pick today; a
// parameter whose kernels disagree on the default gets the value 0 ("each
// kernel its own default"). A point at its defaults maps to CudaKnobs{} and
// the default grid: the exact source and launches of the default path.
#pragma once
#include <string>

#include "stax/backend/launch_search.h"
#include "stax/codegen/cuda/cuda_printer.h"

namespace tp::stax {

// Launch choices made on the host (they do not change the printed source).
struct CudaGridKnobs {
  int flat_blocks_per_sm = 8;  // flat kernels: grid = min(blocks needed, SMs x this)
  int rows_per_block = 1;      // row kernels (not split): grid = ceil(rows / this)
  bool operator==(const CudaGridKnobs&) const = default;
};

struct CudaLaunchChoice {
  codegen::CudaKnobs knobs;
  CudaGridKnobs grid;
};

// The max-autotune space of a region whose default print is `unit`.
SearchSpace cuda_launch_space(const codegen::CudaUnit& unit);

// A point of that space as printer and grid knobs (a parameter at its default
// leaves its knob at the printer's / host's own choice).
CudaLaunchChoice cuda_launch_choice(const SearchSpace& space, const SearchPoint& point);

// Blocks of a launch on a device with `sms` multiprocessors.
unsigned cuda_grid_blocks(const codegen::CudaLaunch& launch, int sms, const CudaGridKnobs& grid);

}  // namespace tp::stax
