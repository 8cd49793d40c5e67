#include "core/logs.h"

#include <cstdlib>
#include <string>

namespace tp {

bool log_enabled(const char* topic) {
  const char* v = std::getenv("TP_LOGS");
  if (!v) return false;
  std::string s = std::string(",") + v + ",";
  return s.find(std::string(",") + topic + ",") != std::string::npos || s.find(",all,") != std::string::npos;
}

}  // namespace tp
