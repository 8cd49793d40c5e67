#include "stax/runtime/cached_kernel.h"

namespace tp::stax::runtime {

CachedKernel::CachedKernel(std::string source, std::string symbol_name)
    : source_(std::move(source)), symbol_name_(std::move(symbol_name)) {
  BuildResult built = CodeCache::instance().load_or_build(source_);
  key_ = built.key;
  source_path_ = built.library->source_path();
  disk_hit_ = built.disk_hit;
  compile_seconds_ = built.compile_seconds;
  symbol_ = built.library->symbol(symbol_name_);
  library_ = built.library;
}

CachedKernel::Pinned CachedKernel::pin() const {
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
  BuildResult built = CodeCache::instance().load_or_build(source_);
  void* symbol = built.library->symbol(symbol_name_);
  std::lock_guard<std::mutex> lock(mutex_);
  library_ = built.library;
  symbol_ = symbol;
  return {std::move(built.library), symbol};
}

}  // namespace tp::stax::runtime
