#pragma once

namespace tp {

// Whether TP_LOGS (comma separated topics, or "all") names `topic`. Every
// layer logs through this one switch (compile/options.h lists the topics).
bool log_enabled(const char* topic);

}  // namespace tp
