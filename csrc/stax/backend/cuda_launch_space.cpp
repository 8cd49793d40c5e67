#include "stax/backend/cuda_launch_space.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace tp::stax {

namespace {

using codegen::CudaForm;
using codegen::CudaLaunch;

// A parameter from the kernels' default values: one shared default joins the
// candidates, several put 0 ("each its own") first.
void add(SearchSpace& s, const std::string& name, const std::set<int64_t>& defaults, std::vector<int64_t> candidates) {
  if (defaults.empty()) return;
  SearchParam p;
  p.name = name;
  const int64_t d = defaults.size() == 1 ? *defaults.begin() : 0;
  if (std::find(candidates.begin(), candidates.end(), d) == candidates.end()) candidates.push_back(d);
  std::sort(candidates.begin(), candidates.end());
  p.values = candidates;
  p.default_index = static_cast<int>(std::find(candidates.begin(), candidates.end(), d) - candidates.begin());
  s.params.push_back(std::move(p));
}

bool split(const CudaLaunch& l) { return l.form == CudaForm::Row && l.scratch_bytes > 0; }

}  // namespace

SearchSpace cuda_launch_space(const codegen::CudaUnit& unit) {
  std::set<int64_t> row_block, row_threads, rows_per_block, flat_block, flat_grid, col_width, col_threads, split_blocks,
      split_threads;
  for (const CudaLaunch& l : unit.launches) {
    if (l.work <= 0) continue;  // never launched
    switch (l.form) {
      case CudaForm::Row:
        if (split(l)) {
          split_blocks.insert(l.work);
          split_threads.insert(l.block_x);
          break;
        }
        (l.register_rows ? row_block : row_threads).insert(l.block_x);
        if (l.work > 1) rows_per_block.insert(1);
        break;
      case CudaForm::Flat:
        flat_block.insert(l.block_x);
        flat_grid.insert(CudaGridKnobs{}.flat_blocks_per_sm);
        break;
      case CudaForm::Column:
        col_width.insert(l.column_width);
        col_threads.insert(int64_t{l.block_x} * l.block_y);
        break;
    }
  }
  SearchSpace s;
  // Descent sweeps the parameters in this order: the ones that change the
  // most (threads, which also decide the work per thread) first.
  add(s, "row_block", row_block, {32, 64, 128, 256, 512});
  add(s, "row_threads", row_threads, {64, 128, 256, 512, 1024});
  add(s, "rows_per_block", rows_per_block, {1, 2, 4, 8});
  add(s, "flat_block", flat_block, {128, 256, 512, 1024});
  add(s, "flat_blocks_per_sm", flat_grid, {2, 4, 8, 16, 32});
  add(s, "column_width", col_width, {8, 16, 32, 64});
  add(s, "column_threads", col_threads, {256, 512, 1024});
  add(s, "split_blocks", split_blocks, {128, 256, 512, 1024, 2048});
  add(s, "split_threads", split_threads, {256, 512, 1024});
  s.validate();
  return s;
}

CudaLaunchChoice cuda_launch_choice(const SearchSpace& space, const SearchPoint& point) {
  if (point.size() != space.params.size())
    throw std::invalid_argument("cuda launch space: a point of the wrong size");
  CudaLaunchChoice c;
  for (size_t i = 0; i < point.size(); ++i) {
    const SearchParam& p = space.params[i];
    const int64_t v = point[i];
    if (v == p.values.at(static_cast<size_t>(p.default_index))) continue;  // the default: the knob stays unset
    const int x = static_cast<int>(v);
    if (p.name == "row_block") c.knobs.row_block = x;
    else if (p.name == "row_threads") c.knobs.row_threads = x;
    else if (p.name == "rows_per_block") c.grid.rows_per_block = x;
    else if (p.name == "flat_block") c.knobs.flat_block = x;
    else if (p.name == "flat_blocks_per_sm") c.grid.flat_blocks_per_sm = x;
    else if (p.name == "column_width") c.knobs.column_width = x;
    else if (p.name == "column_threads") c.knobs.column_threads = x;
    else if (p.name == "split_blocks") c.knobs.split_blocks = x;
    else if (p.name == "split_threads") c.knobs.split_threads = x;
    else throw std::invalid_argument("cuda launch space: unknown parameter '" + p.name + "'");
  }
  if (c.grid.rows_per_block < 1 || c.grid.flat_blocks_per_sm < 1)
    throw std::invalid_argument("cuda launch space: a grid knob below 1");
  return c;
}

unsigned cuda_grid_blocks(const CudaLaunch& l, int sms, const CudaGridKnobs& grid) {
  int64_t g = 1;
  switch (l.form) {
    case CudaForm::Flat: {
      // A grid-stride loop: by default one wave of resident blocks keeps every
      // SM's memory pipeline full (8 blocks of 256 threads per SM).
      const int64_t blocks = (l.work + l.block_x - 1) / l.block_x;
      g = std::min<int64_t>(blocks, static_cast<int64_t>(sms) * grid.flat_blocks_per_sm);
      break;
    }
    case CudaForm::Row: {
      // A split reduction's grid is its split factor (the scratch holds one
      // partial per block); other row kernels stride over rows by gridDim.x.
      const int64_t per = l.scratch_bytes > 0 ? 1 : grid.rows_per_block;
      g = std::min<int64_t>((l.work + per - 1) / per, int64_t(1) << 30);
      break;
    }
    case CudaForm::Column: g = std::min<int64_t>(l.work, int64_t(1) << 30); break;
  }
  return static_cast<unsigned>(std::max<int64_t>(g, 1));
}

}  // namespace tp::stax
