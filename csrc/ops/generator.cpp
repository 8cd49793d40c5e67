#include "ops/generator.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "core/error.h"

namespace tp {
namespace {
constexpr uint64_t kDefaultSeed = 67280421310721ull;  // the default seed PyTorch users expect

struct Gen {
  uint64_t seed = kDefaultSeed;
  uint64_t next = 0;
};

// One lock for the table and every generator: reserving counters is a few
// instructions, far below the cost of the kernel that uses them.
struct Table {
  std::mutex mu;
  std::map<int64_t, Gen> gens{{kDefaultGenerator, Gen{}}};
  int64_t next_id = 1;
};
Table& table() {
  static Table t;
  return t;
}

Gen& find(Table& t, int64_t id) {
  auto it = t.gens.find(id);
  TP_CHECK(it != t.gens.end(), ValueError, "Generator: unknown generator id ", id,
           " (the generator was destroyed or never created)");
  return it->second;
}
}  // namespace

int64_t generator_create() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  const int64_t id = t.next_id++;
  t.gens.emplace(id, Gen{});
  return id;
}

int64_t generator_create(GeneratorState initial) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  const int64_t id = t.next_id++;
  t.gens.emplace(id, Gen{initial.seed, initial.offset});
  return id;
}

namespace {
std::atomic<uint64_t> g_epoch{0};
}
uint64_t generator_epoch() { return g_epoch.load(std::memory_order_relaxed); }

void generator_destroy(int64_t id) {
  if (id == kDefaultGenerator) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  t.gens.erase(id);
}

void generator_manual_seed(int64_t id, uint64_t seed) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  Gen& g = find(t, id);
  g.seed = seed;
  g.next = 0;
  g_epoch.fetch_add(1, std::memory_order_relaxed);
}

uint64_t generator_seed(int64_t id) {
  std::random_device rd;
  const uint64_t seed = (uint64_t{rd()} << 32) ^ rd();
  generator_manual_seed(id, seed);
  return seed;
}

uint64_t generator_initial_seed(int64_t id) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return find(t, id).seed;
}

GeneratorState generator_get_state(int64_t id) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  Gen& g = find(t, id);
  return {g.seed, g.next};
}

void generator_set_state(int64_t id, GeneratorState s) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  Gen& g = find(t, id);
  g.seed = s.seed;
  g.next = s.offset;
  g_epoch.fetch_add(1, std::memory_order_relaxed);
}

namespace {
thread_local ReservationObserver* t_observer = nullptr;
}

ScopedReservationObserver::ScopedReservationObserver(ReservationObserver* o) : prev_(t_observer) { t_observer = o; }
ScopedReservationObserver::~ScopedReservationObserver() { t_observer = prev_; }

PhiloxRange generator_reserve(int64_t id, uint64_t n) {
  PhiloxRange r;
  {
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    Gen& g = find(t, id);
    r = {g.seed, g.next};
    g.next += n;
  }
  if (t_observer) t_observer->reserved(id, r, n);
  return r;
}

int64_t generator_attr(const Attrs& attrs) { return attrs.get_optional_int("generator").value_or(kDefaultGenerator); }

}  // namespace tp
