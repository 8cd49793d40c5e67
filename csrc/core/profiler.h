// The profiler's recorder (tp.profiler, python/tensorplay/profiler/): timed,
// nested ranges of what a program ran. The layers above open a Range where
// their work starts:
//   - the dispatcher, once per operator call ("op", the operator's name);
//   - the autograd engine, once per backward node ("backward");
//   - a compiled function's call ("compiled") and each run of a Stax region
//     ("region") and of an extern step inside it ("extern": a GEMM, a sort);
//   - tp.profiler.record_function, a user's named range ("user").
// Each range knows its parent (the innermost range open on its thread when it
// began), so a table can split a range's time into its own (self) time and its
// children's, as PyTorch's profiler does.
//
// When no profile is active a Range costs one relaxed atomic load: callers
// test active() before building a name.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tp::profiler {

struct Config {
  bool record_shapes = false;   // keep each op's input sizes and dtypes
  bool profile_memory = false;  // keep each range's change in live host memory
};

struct Event {
  std::string name;
  std::string kind;  // "op", "backward", "compiled", "region", "extern", "user"
  uint64_t id = 0;
  uint64_t parent = 0;  // 0: no enclosing range on its thread
  uint64_t thread = 0;  // a small number per thread, in order of first use
  int64_t start_ns = 0, end_ns = 0;  // since the profile started
  std::vector<std::vector<int64_t>> shapes;  // record_shapes: per input ([] for a 0-d or absent one)
  std::vector<std::string> dtypes;          // record_shapes: per input ("" when absent)
  int64_t memory_delta = 0;  // profile_memory: live host bytes at the end minus at the start
};

namespace detail {
extern std::atomic<bool> g_active;
}
inline bool active() { return detail::g_active.load(std::memory_order_relaxed); }

// Begins a profile (ValueError when one is already active: they do not nest).
void start(const Config& config);
// Ends the profile and hands over its events in the order they ended. Ranges
// still open (a record_function left open) are dropped.
std::vector<Event> stop();

// One range, recorded when it is destroyed. Construct it only when active();
// a range that outlives its profile (or began before it) records nothing.
class Range {
 public:
  Range(const char* kind, std::string name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  // record_shapes: the sizes and dtypes of the call's inputs.
  void set_inputs(const std::vector<Tensor>& inputs);
  uint64_t id() const { return event_.id; }

 private:
  Event event_;
  uint64_t session_ = 0;
  int64_t memory_start_ = 0;
  bool record_shapes_ = false;
};

// record_function's ranges, opened and closed by the handle open_user_range
// returns (0 when no profile is active). Closing an outer range closes the
// inner ones left open on the same thread.
uint64_t open_user_range(std::string name);
void close_user_range(uint64_t id);

}  // namespace tp::profiler
