#include "stax/runtime/compile_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>
#include <vector>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <thread>

#include "core/warning.h"


namespace tp::stax::runtime {
namespace {

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
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
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

namespace {
// The shared state of one run_parallel call; helpers hold it by shared_ptr, so
// a helper dequeued after the call returned finds nothing left to claim.
struct ParallelRun {
  explicit ParallelRun(size_t n) : errors(n), warnings(n) {}
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::vector<std::exception_ptr> errors;
  std::vector<std::vector<std::string>> warnings;
};

// Claims and runs tasks until none is left. `defer`: keep warnings (a worker).
void drain(ParallelRun& run, const std::function<void(size_t)>& task, size_t n, bool defer) {
  for (;;) {
    const size_t i = run.next.fetch_add(1);
    if (i >= n) return;
    std::exception_ptr error;
    std::vector<std::string> warnings;
    {
      std::unique_ptr<DeferredWarnings> deferred(defer ? new DeferredWarnings() : nullptr);
      try {
        task(i);
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
}
}  // namespace

void run_parallel(size_t n, const std::function<void(size_t)>& task) {
  if (n == 0) return;
  auto run = std::make_shared<ParallelRun>(n);
  // A copy of the task per helper: it may be dequeued after we returned.
  auto shared_task = std::make_shared<std::function<void(size_t)>>(task);
  const size_t helpers = std::min<size_t>(n - 1, static_cast<size_t>(compile_pool_size()));
  for (size_t h = 0; h < helpers; ++h)
    submit_build([run, shared_task, n] { drain(*run, *shared_task, n, /*defer=*/true); });
  drain(*run, task, n, /*defer=*/false);  // our own warnings go the usual way
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
