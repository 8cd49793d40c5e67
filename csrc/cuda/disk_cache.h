// CUBINs of the eager CUDA kernels on disk, under the code cache directory
// (stax/runtime/cache_dir.h: $TP_CACHE_DIR, vetted private) in "cuda/", named
// by the SHA-256 of (source, sm_XY, NVRTC version, driver version): a new process skips
// NVRTC (~0.2 s per kernel). Best effort: any problem leaves the in-memory
// cache working alone.
#pragma once
#include <optional>
#include <string>

namespace tp::cuda {

std::string cubin_key(const std::string& source, int arch);
std::optional<std::string> load_cubin(const std::string& key);
void store_cubin(const std::string& key, const std::string& cubin);
// Launch-configuration tuning results (stax/backend/cuda_region.cpp), one
// small text file per (kernel source, device name), beside the CUBINs.
std::string tuning_key(const std::string& source, const std::string& device_name);
std::optional<std::string> load_tuning(const std::string& key);
void store_tuning(const std::string& key, const std::string& value);

}  // namespace tp::cuda
