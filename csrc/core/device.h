#pragma once
#include <cstdint>
#include <string>

namespace tp {
// Kept in every tensor from the start so that a CUDA device slots in later.
struct Device {
  enum class Kind : uint8_t { CPU = 0, CUDA = 1 };
  Kind kind = Kind::CPU;
  int16_t index = 0;
  static Device cpu() { return Device{}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string str() const { return kind == Kind::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};
}  // namespace tp
