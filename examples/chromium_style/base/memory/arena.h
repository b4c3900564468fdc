// Bump-pointer arena allocator.

#ifndef BASE_MEMORY_ARENA_H_
#define BASE_MEMORY_ARENA_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace base {

class Arena {
 public:
  explicit Arena(size_t block_size = 4096);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // |alignment| must be a power of two.
  void* Allocate(size_t size, size_t alignment);

  // Objects made here are never destroyed; use trivially destructible types.
  template <typename T, typename... Args>
  T* New(Args&&... args) {
    return new (Allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
  }

  size_t bytes_allocated() const { return bytes_allocated_; }
  size_t block_count() const { return blocks_.size(); }

 private:
  size_t block_size_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* cursor_ = nullptr;
  char* limit_ = nullptr;
  size_t bytes_allocated_ = 0;
};

}  // namespace base

#endif  // BASE_MEMORY_ARENA_H_
