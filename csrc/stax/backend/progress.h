// A progress line on stderr for a step that turns out slow: printed only when
// the step is still running after `after_s` seconds (a watcher thread), followed
// by a closing line with the time taken. Fast steps print nothing.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tp::stax {

class SlowStepLine {
 public:
  // after_s < 0: never print.
  SlowStepLine(std::string message, double after_s) : message_(std::move(message)) {
    start_ = std::chrono::steady_clock::now();
    if (after_s < 0) return;
    if (after_s == 0) {  // always: no watcher, so the line cannot race with a fast step
      std::fprintf(stderr, "%s\n", message_.c_str());
      std::fflush(stderr);
      printed_ = true;
      return;
    }
    watcher_ = std::thread([this, after_s] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(after_s), [this] { return done_; })) return;
      std::fprintf(stderr, "%s\n", message_.c_str());
      std::fflush(stderr);
      printed_ = true;
    });
  }
  ~SlowStepLine() {
    if (watcher_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
      }
      cv_.notify_all();
      watcher_.join();
    }
    if (printed_) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      std::fprintf(stderr, "%s done in %.1f s\n", message_.c_str(), s);
    }
  }
  SlowStepLine(const SlowStepLine&) = delete;
  SlowStepLine& operator=(const SlowStepLine&) = delete;

 private:
  std::string message_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  bool printed_ = false;  // written by the watcher, read after join
  std::thread watcher_;
};

}  // namespace tp::stax
