#include "stax/runtime/compile_pool.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <thread>


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

}  // namespace tp::stax::runtime
