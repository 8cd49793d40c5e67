#include "stax/runtime/cached_kernel.h"

#include <memory>

#include "core/warning.h"
#include "stax/runtime/compile_pool.h"

namespace tp::stax::runtime {

CachedKernel::CachedKernel(std::string source, std::string symbol_name)
    : source_(std::move(source)), units_{source_}, symbol_name_(std::move(symbol_name)) {
  std::call_once(waited_, [] {});
  adopt(CodeCache::instance().load_or_build(source_));
}

CachedKernel::CachedKernel(std::string source, std::string symbol_name, InBackground)
    : source_(std::move(source)), units_{source_}, symbol_name_(std::move(symbol_name)) {
  start_background();
}

CachedKernel::CachedKernel(std::string source, std::vector<std::string> units, std::string symbol_name)
    : source_(std::move(source)), units_(std::move(units)), symbol_name_(std::move(symbol_name)) {
  std::call_once(waited_, [] {});
  adopt(CodeCache::instance().load_or_build_units(units_));
}

CachedKernel::CachedKernel(std::string source, std::vector<std::string> units, std::string symbol_name, InBackground)
    : source_(std::move(source)), units_(std::move(units)), symbol_name_(std::move(symbol_name)) {
  start_background();
}

void CachedKernel::start_background() {
  auto promise = std::make_shared<std::promise<BackgroundBuild>>();
  pending_ = promise->get_future().share();
  // The task holds its own copy of the units: the kernel may be dropped
  // before the build ends (the build still lands in the disk cache).
  submit_build([units = units_, promise] {
    DeferredWarnings deferred;
    try {
      BuildResult built = CodeCache::instance().load_or_build_units(units);
      promise->set_value(BackgroundBuild{std::move(built), deferred.take()});
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
}

void CachedKernel::adopt(BuildResult built) {
  key_ = built.key;
  source_path_ = built.library->source_path();
  disk_hit_ = built.disk_hit;
  compile_seconds_ = built.compile_seconds;
  std::lock_guard<std::mutex> lock(mutex_);
  symbol_ = built.library->symbol(symbol_name_);
  library_ = built.library;
}

void CachedKernel::wait() const {
  std::call_once(waited_, [this] {
    try {
      const BackgroundBuild& b = pending_.get();
      for (const std::string& w : b.warnings) warn(w);
      const_cast<CachedKernel*>(this)->adopt(b.built);
    } catch (...) {
      build_error_ = std::current_exception();
    }
    pending_ = {};
  });
  if (build_error_) std::rethrow_exception(build_error_);
}

CachedKernel::Pinned CachedKernel::pin() const {
  wait();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::shared_ptr<LoadedLibrary> library = library_.lock()) {
      CodeCache::instance().touch(*library);
      return {std::move(library), symbol_};
    }
  }
  // Evicted and no longer running anywhere: load it again. Without our mutex:
  // loading may warn (user code) or compile; two threads racing here get the
  // same library object from the cache's map.
  BuildResult built = CodeCache::instance().load_or_build_units(units_);
  void* symbol = built.library->symbol(symbol_name_);
  std::lock_guard<std::mutex> lock(mutex_);
  library_ = built.library;
  symbol_ = symbol;
  return {std::move(built.library), symbol};
}

}  // namespace tp::stax::runtime
