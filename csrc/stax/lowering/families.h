// The built-in lowering families, registered explicitly by the registry (not
// by static initializers, which a static library's unreferenced objects would
// drop). One file each.
#pragma once
#include <map>
#include <string>

#include "stax/lowering/registry.h"

namespace tp::stax {

using LoweringTable = std::map<std::string, LoweringFn>;
void register_pointwise_lowerings(LoweringTable& t);   // pointwise.cpp
void register_view_lowerings(LoweringTable& t);        // views.cpp
void register_reduction_lowerings(LoweringTable& t);   // reductions.cpp
void register_norm_lowerings(LoweringTable& t);        // norms.cpp
void register_factory_lowerings(LoweringTable& t);     // factories.cpp
void register_movement_lowerings(LoweringTable& t);    // movement.cpp
void register_indexing_lowerings(LoweringTable& t);    // indexing.cpp
void register_window_lowerings(LoweringTable& t);      // windows.cpp
void register_random_lowerings(LoweringTable& t);      // random.cpp
void register_scatter_lowerings(LoweringTable& t);     // scatters.cpp
void register_mean_lowerings(LoweringTable& t);        // means.cpp
// Loop rules that accept an omitted optional tensor operand (layer_norm's weight=None).
bool norm_lowering_takes_absent(const std::string& op);  // norms.cpp

}  // namespace tp::stax
