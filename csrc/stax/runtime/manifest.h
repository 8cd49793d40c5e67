// The manifest of a cached kernel: which key it belongs to and the size and
// SHA-256 of the kernel.so that was built for it. Written (temp file +
// rename) after kernel.so and checked before anything is loaded, so a
// truncated, corrupted, zeroed or swapped library is rebuilt instead of
// crashing or silently computing the wrong thing. The key inside binds the
// manifest to its directory: moving a whole entry (library and manifest) under
// another key is detected too. Integrity, not authenticity: whoever can write
// the directory could write both files, which is why the directories and
// files must also belong to the user (see cache_dir.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tp::stax::runtime {

struct KernelManifest {
  std::string key;     // 64 hex chars, the entry's cache key
  uint64_t size = 0;   // bytes of kernel.so
  std::string sha256;  // 64 hex chars, of kernel.so's bytes
};

inline constexpr const char* kManifestName = "kernel.manifest";
inline constexpr size_t kMaxManifestBytes = 4096;

// "tp-stax-manifest-v1\nkey <key>\nsize <n>\nsha256 <hex>\n"
std::string format_manifest(const KernelManifest& m);

// Strict inverse of format_manifest (nullopt on anything else).
std::optional<KernelManifest> parse_manifest(const std::string& text);

}  // namespace tp::stax::runtime
