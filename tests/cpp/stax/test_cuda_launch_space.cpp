// A CUDA region's launch choices as a search space (stax/backend/
// cuda_launch_space.h): which knobs a unit's kernels expose, their defaults,
// the mapping of a point back to printer / grid knobs, and the grids. No GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "ops/ops.h"
#include "stax/backend/cuda_launch_space.h"
#include "stax/backend/cuda_region.h"
#include "stax/codegen/cuda/split_reduction.h"

namespace tp::stax {
namespace {

using codegen::CudaForm;
using codegen::CudaLaunch;

CudaLaunch launch(CudaForm form, int64_t work, int bx, int by = 1) {
  CudaLaunch l;
  l.form = form;
  l.work = work;
  l.block_x = bx;
  l.block_y = by;
  return l;
}

std::vector<std::string> names(const SearchSpace& s) {
  std::vector<std::string> n;
  for (const SearchParam& p : s.params) n.push_back(p.name);
  return n;
}

const SearchParam& param(const SearchSpace& s, const std::string& name) {
  for (const SearchParam& p : s.params)
    if (p.name == name) return p;
  throw std::out_of_range(name);
}

int64_t default_of(const SearchSpace& s, const std::string& name) {
  const SearchParam& p = param(s, name);
  return p.values[static_cast<size_t>(p.default_index)];
}

// Dynamic shapes: a symbolic launch is re-made from the call's sizes.
std::unordered_map<int, int64_t> sizes2(int64_t s0, int64_t s1) {
  return {{ir::size_var_id(0), s0}, {ir::size_var_id(1), s1}};
}

TEST(CudaLaunchAt, RowBlockCoversTheCallsItems) {
  CudaLaunch l = launch(CudaForm::Row, 37, 32);
  l.symbolic = true;
  l.work_expr = ir::size_var(0);
  l.block_max = 512;
  l.items_expr = ir::floordiv(ir::size_var(1), 4);  // vector groups of a row
  CudaLaunch a = codegen::cuda_launch_at(l, sizes2(1000, 8));
  EXPECT_EQ(a.work, 1000);
  EXPECT_EQ(a.block_x, 32);  // at least a warp
  a = codegen::cuda_launch_at(l, sizes2(3, 1000));
  EXPECT_EQ(a.block_x, 256);
  a = codegen::cuda_launch_at(l, sizes2(3, 100000));
  EXPECT_EQ(a.block_x, 512);  // capped; the kernel strides
  // Register rows: K = 4 groups a thread, the block covers groups / K.
  l.cache_k = 4;
  EXPECT_EQ(codegen::cuda_launch_at(l, sizes2(3, 8192)).block_x, 512);
  EXPECT_EQ(codegen::cuda_launch_at(l, sizes2(3, 4096)).block_x, 256);
  EXPECT_EQ(codegen::cuda_launch_at(l, sizes2(3, 13)).block_x, 32);
  // A static launch is returned as printed.
  CudaLaunch st = launch(CudaForm::Row, 37, 128);
  EXPECT_EQ(codegen::cuda_launch_at(st, sizes2(5, 5)).block_x, 128);
  EXPECT_EQ(codegen::cuda_launch_at(st, sizes2(5, 5)).work, 37);
}

TEST(CudaLaunchAt, SplitFactorFollowsTheItemsAndFlatWorkTheProduct) {
  CudaLaunch l = launch(CudaForm::Row, 1, codegen::kSplitThreads);
  l.symbolic = true;
  l.work_expr = 1;
  l.split_auto = true;
  l.split_items = ir::size_var(0) * ir::size_var(1);
  EXPECT_EQ(codegen::cuda_launch_at(l, sizes2(2, 3)).work, 1);  // too few items: one block
  EXPECT_EQ(codegen::cuda_launch_at(l, sizes2(4096, 4096)).work, codegen::split_reduction_blocks(4096 * 4096));
  CudaLaunch f = launch(CudaForm::Flat, 100, 256);
  f.symbolic = true;
  f.work_expr = ir::size_var(0) * ir::size_var(1);
  const CudaLaunch a = codegen::cuda_launch_at(f, sizes2(7, 9));
  EXPECT_EQ(a.work, 63);
  EXPECT_EQ(cuda_grid_blocks(a, 132, CudaGridKnobs{}), 1u);
  EXPECT_EQ(cuda_grid_blocks(codegen::cuda_launch_at(f, sizes2(32768, 2048)), 132, CudaGridKnobs{}), 132u * 8);
}

TEST(CudaLaunchSpace, OnlyTheKnobsOfTheFormsPresent) {
  codegen::CudaUnit u;
  u.launches.push_back(launch(CudaForm::Flat, 1000, 256));
  SearchSpace s = cuda_launch_space(u);
  EXPECT_EQ(names(s), (std::vector<std::string>{"flat_block", "flat_blocks_per_sm"}));
  EXPECT_EQ(default_of(s, "flat_block"), 256);
  EXPECT_EQ(default_of(s, "flat_blocks_per_sm"), 8);

  CudaLaunch reg = launch(CudaForm::Row, 64, 128);
  reg.register_rows = true;
  CudaLaunch col = launch(CudaForm::Column, 9, 8, 128);
  col.column_width = 8;
  CudaLaunch split = launch(CudaForm::Row, 62, codegen::kSplitThreads);
  split.scratch_bytes = codegen::split_reduction_scratch_bytes(8, 62);
  u.launches = {reg, col, split, launch(CudaForm::Row, 1, 1024)};
  s = cuda_launch_space(u);
  EXPECT_EQ(names(s), (std::vector<std::string>{"row_block", "row_threads", "rows_per_block", "column_width",
                                                "column_threads", "split_blocks", "split_threads"}));
  EXPECT_EQ(default_of(s, "row_block"), 128);
  EXPECT_EQ(default_of(s, "row_threads"), 1024);  // the one-row kernel
  EXPECT_EQ(default_of(s, "column_width"), 8);
  EXPECT_EQ(default_of(s, "column_threads"), 1024);
  EXPECT_EQ(default_of(s, "split_blocks"), 62);    // the size's own factor joins the candidates
  EXPECT_EQ(param(s, "split_blocks").values, (std::vector<int64_t>{62, 128, 256, 512, 1024, 2048}));
  EXPECT_EQ(default_of(s, "split_threads"), codegen::kSplitThreads);
}

TEST(CudaLaunchSpace, OneRowKernelsHaveNoRowsPerBlockAndEmptyLaunchesNoKnobs) {
  codegen::CudaUnit u;
  u.launches = {launch(CudaForm::Row, 1, 1024), launch(CudaForm::Flat, 0, 256)};
  EXPECT_EQ(names(cuda_launch_space(u)), std::vector<std::string>{"row_threads"});
}

TEST(CudaLaunchSpace, KernelsDisagreeingOnADefaultKeepTheirOwn) {
  codegen::CudaUnit u;
  CudaLaunch a = launch(CudaForm::Row, 64, 64), b = launch(CudaForm::Row, 64, 256);
  a.register_rows = b.register_rows = true;
  u.launches = {a, b};
  SearchSpace s = cuda_launch_space(u);
  EXPECT_EQ(default_of(s, "row_block"), 0);
  EXPECT_EQ(param(s, "row_block").values.front(), 0);
  // 0 is "each kernel its own block": the printer's knob stays unset.
  EXPECT_EQ(cuda_launch_choice(s, s.default_point()).knobs.row_block, 0);
}

TEST(CudaLaunchSpace, TheDefaultPointLeavesEveryKnobUnset) {
  codegen::CudaUnit u;
  CudaLaunch reg = launch(CudaForm::Row, 64, 128);
  reg.register_rows = true;
  CudaLaunch col = launch(CudaForm::Column, 9, 16, 64);
  col.column_width = 32;
  u.launches = {reg, col, launch(CudaForm::Flat, 100, 256)};
  SearchSpace s = cuda_launch_space(u);
  CudaLaunchChoice c = cuda_launch_choice(s, s.default_point());
  EXPECT_EQ(c.knobs, codegen::CudaKnobs{});
  EXPECT_EQ(c.grid, CudaGridKnobs{});

  // Any other value reaches its knob.
  SearchPoint p = s.default_point();
  for (size_t i = 0; i < s.params.size(); ++i) p[i] = s.params[i].values.back();
  c = cuda_launch_choice(s, p);
  EXPECT_EQ(c.knobs.row_block, 512);
  EXPECT_EQ(c.grid.rows_per_block, 8);
  EXPECT_EQ(c.knobs.flat_block, 1024);
  EXPECT_EQ(c.grid.flat_blocks_per_sm, 32);
  EXPECT_EQ(c.knobs.column_width, 64);
  EXPECT_EQ(c.knobs.column_threads, 0);  // 1024 is column_threads' default: unset
  EXPECT_EQ(c.knobs.row_threads, 0);     // no such kernel
  EXPECT_THROW(cuda_launch_choice(s, SearchPoint{1}), std::invalid_argument);
}

TEST(CudaLaunchSpace, DefaultGridsAreTheOnesBeforeTheKnobs) {
  // Flat: min(blocks needed, 8 per SM); row and column: one block per item of work.
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Flat, 1 << 20, 256), 132, {}), 132u * 8);
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Flat, 1000, 256), 132, {}), 4u);
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Row, 32768, 512), 132, {}), 32768u);
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Column, 257, 32, 32), 132, {}), 257u);
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Row, int64_t(1) << 40, 512), 132, {}), 1u << 30);

  CudaGridKnobs g;
  g.flat_blocks_per_sm = 2;
  g.rows_per_block = 4;
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Flat, 1 << 20, 256), 132, g), 264u);
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Row, 32770, 512), 132, g), 8193u);  // rounded up
  CudaLaunch split = launch(CudaForm::Row, 256, 512);
  split.scratch_bytes = codegen::split_reduction_scratch_bytes(8, 256);
  EXPECT_EQ(cuda_grid_blocks(split, 132, g), 256u);  // a split's grid is its factor
  EXPECT_EQ(cuda_grid_blocks(launch(CudaForm::Column, 257, 32, 32), 132, g), 257u);
}

TEST(CudaLaunchSpace, PointsRoundTripThroughTheirTextForm) {
  codegen::CudaUnit u;
  u.launches = {launch(CudaForm::Flat, 1000, 256)};
  SearchSpace s = cuda_launch_space(u);
  SearchPoint p{512, 16};
  EXPECT_EQ(s.describe(p), "flat_block=512 flat_blocks_per_sm=16");
  EXPECT_EQ(s.parse(s.describe(p)), p);
}

// The result check of max-autotune candidates (it runs on the host copies, so
// it is tested here on CPU tensors).
Tensor vec(std::vector<double> v, DType dt = DType::Float64) {
  Tensor t = Tensor::empty(Shape{static_cast<int64_t>(v.size())}, DType::Float64);
  for (size_t i = 0; i < v.size(); ++i) t.data_as<double>()[i] = v[i];
  return ops::to_dtype(t, dt);
}

TEST(CudaLaunchResults, RoundingOfAnotherOrderPassesAWrongElementDoesNot) {
  const double nan = std::nan("");
  const double inf = INFINITY;
  EXPECT_EQ(launch_results_differ({vec({1, 2, 1000})}, {vec({1 + 1e-6, 2, 1000})}), "");
  // Near zero, the output's largest magnitude sets the scale (a reordered sum of cancelling terms).
  EXPECT_EQ(launch_results_differ({vec({1e-9, 1000})}, {vec({2e-9, 1000})}), "");
  EXPECT_NE(launch_results_differ({vec({1, 2, 3})}, {vec({1, 2.1, 3})}), "");
  EXPECT_NE(launch_results_differ({vec({1, 2, 3})}, {vec({1, 2})}), "");
  EXPECT_NE(launch_results_differ({vec({1, 2})}, {vec({1, 2}), vec({3})}), "");
  EXPECT_EQ(launch_results_differ({vec({nan, inf, -inf})}, {vec({nan, inf, -inf})}), "");
  EXPECT_NE(launch_results_differ({vec({nan, 1})}, {vec({0, 1})}), "");
  EXPECT_NE(launch_results_differ({vec({inf, 1})}, {vec({-inf, 1})}), "");
  // float32: a relative 1e-4; 16-bit: one rounding step (2^-8) passes, ten do not.
  EXPECT_EQ(launch_results_differ({vec({1, 3}, DType::Float32)}, {vec({1.00001, 3}, DType::Float32)}), "");
  EXPECT_NE(launch_results_differ({vec({1, 3}, DType::Float32)}, {vec({1.01, 3}, DType::Float32)}), "");
  EXPECT_EQ(launch_results_differ({vec({1, 0.5}, DType::BFloat16)}, {vec({1.0078125, 0.5}, DType::BFloat16)}), "");
  EXPECT_NE(launch_results_differ({vec({1, 0.5}, DType::BFloat16)}, {vec({1.25, 0.5}, DType::BFloat16)}), "");
  // Integers and booleans exactly.
  EXPECT_NE(launch_results_differ({vec({1, 7}, DType::Int64)}, {vec({1, 8}, DType::Int64)}), "");
  EXPECT_EQ(launch_results_differ({vec({0, 1}, DType::Bool)}, {vec({0, 1}, DType::Bool)}), "");
  EXPECT_NE(launch_results_differ({vec({0, 1}, DType::Bool)}, {vec({1, 1}, DType::Bool)}), "");
}

}  // namespace
}  // namespace tp::stax
