#include "core/parallel.h"

#include <omp.h>

namespace tp {
int num_threads() { return omp_get_max_threads(); }
void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }
bool in_parallel_region() { return omp_in_parallel(); }
}  // namespace tp
