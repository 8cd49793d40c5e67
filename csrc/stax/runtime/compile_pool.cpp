#include "stax/runtime/compile_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

#include "core/warning.h"

namespace tp::stax::runtime {
namespace {

// The shared state of one run_parallel call; stealing workers hold it by
// shared_ptr, so one that comes late finds nothing left to claim.
struct ParallelRun {
  ParallelRun(size_t count, std::function<void(size_t)> fn) : n(count), task(std::move(fn)), errors(count), warnings(count) {}
  const size_t n;
  const std::function<void(size_t)> task;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::vector<std::exception_ptr> errors;
  std::vector<std::vector<std::string>> warnings;
};

// Runs task i of `run`. `defer`: keep its warnings (a worker), for the caller.
void run_one(ParallelRun& run, size_t i, bool defer) {
  std::exception_ptr error;
  std::vector<std::string> warnings;
  {
    std::unique_ptr<DeferredWarnings> deferred(defer ? new DeferredWarnings() : nullptr);
    try {
      run.task(i);
    } catch (...) {
      error = std::current_exception();
    }
    if (deferred) warnings = deferred->take();
  }
  std::lock_guard<std::mutex> lock(run.mu);
  run.errors[i] = error;
  run.warnings[i] = std::move(warnings);
  ++run.done;
  run.cv.notify_all();
}

// Runs with tasks no one has claimed yet, for idle workers to steal from.
std::mutex g_runs_mutex;
std::vector<std::weak_ptr<ParallelRun>> g_runs;

std::shared_ptr<ParallelRun> stealable_run() {
  std::lock_guard<std::mutex> lock(g_runs_mutex);
  std::shared_ptr<ParallelRun> found;
  // Forget runs that ended or have every task claimed (remove_if: no element
  // is moved onto itself, which would empty a weak_ptr).
  g_runs.erase(std::remove_if(g_runs.begin(), g_runs.end(),
                              [&](const std::weak_ptr<ParallelRun>& w) {
                                std::shared_ptr<ParallelRun> r = w.lock();
                                if (!r || r->next.load() >= r->n) return true;
                                if (!found) found = std::move(r);
                                return false;
                              }),
               g_runs.end());
  return found;
}

// How long a worker with nothing queued waits before it steals a task of a
// running run_parallel. Builds are often submitted in bursts (a training
// step's backward, then its forward a few ms later); a queued build goes
// before any stolen task, so the region waited for first is not held up.
constexpr auto kStealGrace = std::chrono::milliseconds(40);

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void push(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  void wake_idle() {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      std::shared_ptr<ParallelRun> steal;
      {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_ && jobs_.empty()) {
          if (stealable_run() == nullptr) {
            cv_.wait(lock);  // woken by push() or by a new run (wake_idle)
            continue;
          }
          if (cv_.wait_for(lock, kStealGrace) == std::cv_status::timeout && jobs_.empty() && !stop_) {
            steal = stealable_run();
            if (steal) break;
          }
        }
        if (!steal) {
          if (jobs_.empty()) return;  // stopping, nothing left
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
      }
      if (job) {
        job();
        continue;
      }
      const size_t i = steal->next.fetch_add(1);  // one task, then back to the queue
      if (i < steal->n) run_one(*steal, i, /*defer=*/true);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Leaked on purpose: workers must not be joined during static destruction
// (after the interpreter and the libraries they use may be gone). A child of
// fork() has none of the parent's threads: it starts a pool of its own.
std::mutex g_pool_mutex;
Pool* g_pool = nullptr;

void forget_pool_in_child() {
  new (&g_pool_mutex) std::mutex();  // the parent may have held it while forking
  new (&g_runs_mutex) std::mutex();
  new (&g_runs) std::vector<std::weak_ptr<ParallelRun>>();  // the parent's runs are not ours (leaks their refs)
  g_pool = nullptr;
}

Pool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_pool == nullptr) {
    static const int registered = pthread_atfork(nullptr, nullptr, &forget_pool_in_child);
    (void)registered;
    g_pool = new Pool(std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8));
  }
  return *g_pool;
}

}  // namespace

void submit_build(std::function<void()> task) { pool().push(std::move(task)); }

int compile_pool_size() { return pool().size(); }

void run_parallel(size_t n, const std::function<void(size_t)>& task) {
  if (n == 0) return;
  auto run = std::make_shared<ParallelRun>(n, task);
  if (n > 1) {
    {
      std::lock_guard<std::mutex> lock(g_runs_mutex);
      g_runs.push_back(run);
    }
    pool().wake_idle();
  }
  // The caller claims every task no worker has started, its own warnings going the usual way.
  for (size_t i = run->next.fetch_add(1); i < n; i = run->next.fetch_add(1)) run_one(*run, i, /*defer=*/false);
  {
    std::unique_lock<std::mutex> lock(run->mu);
    run->cv.wait(lock, [&] { return run->done == n; });  // only tasks already running remain
  }
  for (const auto& ws : run->warnings)
    for (const std::string& w : ws) warn(w);
  for (const auto& e : run->errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tp::stax::runtime
