// NVRTC, the CUDA runtime compiler, loaded at run time like the driver
// (driver.h): from the system (libnvrtc.so.13/.12/...) or from NVIDIA's
// `nvidia-cuda-nvrtc` wheel, whose library directories the Python package
// finds on sys.path and registers here. NVRTC compiles without a GPU, so the
// generated kernel sources are checked on CPU-only machines too.
#pragma once
#include <string>
#include <vector>

namespace tp::cuda {

// Library files tried before the system sonames (set once by tensorplay.cuda).
void add_nvrtc_candidates(const std::vector<std::string>& paths);
bool nvrtc_available();
std::string nvrtc_why_unavailable();
// "13.0" for the loaded library; throws when NVRTC is missing.
std::string nvrtc_version();
// Compiles `source` for sm_<arch> (arch = major*10+minor) and returns the
// CUBIN. Throws tp::Error with NVRTC's log on a compile error.
std::string nvrtc_compile(const std::string& source, const std::string& name, int arch);

}  // namespace tp::cuda
