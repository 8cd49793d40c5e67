#include "compile/options.h"

#include <cstdlib>
#include <mutex>

namespace tp::compile {
namespace {
std::mutex g_mutex;
std::map<std::string, CustomBackend>& backends() {
  static std::map<std::string, CustomBackend> b;
  return b;
}
}  // namespace

void register_backend(const std::string& name, CustomBackend backend) {
  TP_CHECK(name != "stax" && name != "eager" && name != "aot_eager", ValueError,
           "register_backend: '", name, "' is a built-in backend");
  std::lock_guard<std::mutex> lock(g_mutex);
  backends()[name] = std::move(backend);
}

const CustomBackend* find_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = backends().find(name);
  return it == backends().end() ? nullptr : &it->second;
}

bool log_enabled(const char* topic) {
  const char* v = std::getenv("TP_LOGS");
  if (!v) return false;
  std::string s = std::string(",") + v + ",";
  return s.find(std::string(",") + topic + ",") != std::string::npos || s.find(",all,") != std::string::npos;
}

}  // namespace tp::compile
