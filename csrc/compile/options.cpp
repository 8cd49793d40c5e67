#include "compile/options.h"

#include "core/logs.h"

namespace tp::compile {
bool log_enabled(const char* topic) { return tp::log_enabled(topic); }

}  // namespace tp::compile
