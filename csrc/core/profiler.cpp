#include "core/profiler.h"

#include <chrono>
#include <mutex>

#include "core/host_allocator.h"

namespace tp::profiler {
namespace detail {
std::atomic<bool> g_active{false};
}
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Session {
  std::mutex mutex;  // guards everything below; taken once per finished range
  uint64_t id = 0;   // which profile is running (0: none yet); ranges of an older one are dropped
  Config config;
  int64_t origin_ns = 0;
  std::vector<Event> events;
  std::atomic<uint64_t> next_range{1};
  std::atomic<uint64_t> next_thread{1};
};
Session& session() {
  static Session* s = new Session();  // never destroyed: ranges may close during exit
  return *s;
}

// The ranges open on this thread, innermost last: a new range's parent.
struct ThreadState {
  uint64_t number = 0;
  std::vector<uint64_t> open;
};
ThreadState& thread_state() {
  thread_local ThreadState t;
  if (t.number == 0) t.number = session().next_thread.fetch_add(1);
  return t;
}

// A user range (record_function) is not a C++ scope: it lives here between its open and close.
struct UserRange {
  uint64_t id;
  std::unique_ptr<Range> range;
};
thread_local std::vector<UserRange> t_user_ranges;

}  // namespace

void start(const Config& config) {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  TP_CHECK(!detail::g_active.load(), ValueError,
           "profiler: a profile is already running (profiles do not nest; stop the other one first)");
  ++s.id;
  s.config = config;
  s.events.clear();
  s.origin_ns = steady_ns();
  detail::g_active.store(true);
}

std::vector<Event> stop() {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  detail::g_active.store(false);
  std::vector<Event> out;
  out.swap(s.events);
  return out;
}

Range::Range(const char* kind, std::string name) {
  Session& s = session();
  ThreadState& t = thread_state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!detail::g_active.load(std::memory_order_relaxed)) return;  // stopped meanwhile: session_ stays 0
    session_ = s.id;
    event_.start_ns = steady_ns() - s.origin_ns;
    if (s.config.profile_memory) memory_start_ = static_cast<int64_t>(host_live_bytes());
    record_shapes_ = s.config.record_shapes;
  }
  event_.kind = kind;
  event_.name = std::move(name);
  event_.id = s.next_range.fetch_add(1, std::memory_order_relaxed);
  event_.thread = t.number;
  event_.parent = t.open.empty() ? 0 : t.open.back();
  t.open.push_back(event_.id);
}

void Range::set_inputs(const std::vector<Tensor>& inputs) {
  if (session_ == 0 || !record_shapes_) return;
  for (const Tensor& x : inputs) {
    if (x.defined()) {
      event_.shapes.emplace_back(x.sizes().begin(), x.sizes().end());
      event_.dtypes.emplace_back(dtype_name(x.dtype()));
    } else {
      event_.shapes.emplace_back();
      event_.dtypes.emplace_back();
    }
  }
}

Range::~Range() {
  if (session_ == 0) return;
  ThreadState& t = thread_state();
  // Ranges close innermost first; a user range closed out of order removes only itself.
  for (size_t i = t.open.size(); i-- > 0;) {
    if (t.open[i] == event_.id) {
      t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!detail::g_active.load(std::memory_order_relaxed) || s.id != session_) return;
  event_.end_ns = steady_ns() - s.origin_ns;
  if (s.config.profile_memory) event_.memory_delta = static_cast<int64_t>(host_live_bytes()) - memory_start_;
  s.events.push_back(std::move(event_));
}

uint64_t open_user_range(std::string name) {
  if (!active()) return 0;
  auto r = std::make_unique<Range>("user", std::move(name));
  const uint64_t id = r->id();
  if (id == 0) return 0;
  t_user_ranges.push_back({id, std::move(r)});
  return id;
}

void close_user_range(uint64_t id) {
  if (id == 0) return;
  for (size_t i = t_user_ranges.size(); i-- > 0;) {
    if (t_user_ranges[i].id != id) continue;
    // Inner ranges left open (an exception skipped their close) end with this one, innermost first.
    while (t_user_ranges.size() > i) t_user_ranges.pop_back();
    return;
  }
}

}  // namespace tp::profiler
