#include "stax/runtime/manifest.h"

#include "core/error.h"

namespace tp::stax::runtime {
namespace {

constexpr const char* kHeader = "tp-stax-manifest-v1\n";

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Reads "<label> <value>\n" at *pos; false if the text is not exactly that.
bool take_field(const std::string& text, size_t* pos, const std::string& label, std::string* value) {
  const std::string prefix = label + " ";
  if (text.compare(*pos, prefix.size(), prefix) != 0) return false;
  const size_t begin = *pos + prefix.size();
  const size_t end = text.find('\n', begin);
  if (end == std::string::npos) return false;
  *value = text.substr(begin, end - begin);
  *pos = end + 1;
  return true;
}

}  // namespace

std::string format_manifest(const KernelManifest& m) {
  return str(kHeader, "key ", m.key, "\nsize ", m.size, "\nsha256 ", m.sha256, "\n");
}

std::optional<KernelManifest> parse_manifest(const std::string& text) {
  const std::string header = kHeader;
  if (text.compare(0, header.size(), header) != 0) return std::nullopt;
  size_t pos = header.size();
  KernelManifest m;
  std::string size;
  if (!take_field(text, &pos, "key", &m.key) || !take_field(text, &pos, "size", &size) ||
      !take_field(text, &pos, "sha256", &m.sha256) || pos != text.size()) {
    return std::nullopt;
  }
  if (!is_hex64(m.key) || !is_hex64(m.sha256)) return std::nullopt;
  if (size.empty() || size.size() > 19 || size.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  m.size = std::stoull(size);
  return m;
}

}  // namespace tp::stax::runtime
