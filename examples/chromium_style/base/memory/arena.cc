// Bump-pointer arena allocator.

#include "base/memory/arena.h"

#include <cstdint>

#include "base/bits.h"
#include "base/check.h"

namespace base {

Arena::Arena(size_t block_size) : block_size_(block_size) {}

Arena::~Arena() = default;

void* Arena::Allocate(size_t size, size_t alignment) {
  CHECK(bits::IsPowerOfTwo(alignment));
  uintptr_t start = bits::AlignUp(reinterpret_cast<uintptr_t>(cursor_),
                                  alignment);
  if (cursor_ == nullptr ||
      start + size > reinterpret_cast<uintptr_t>(limit_)) {
    const size_t needed = size + alignment;
    const size_t block = needed > block_size_ ? needed : block_size_;
    blocks_.push_back(std::make_unique<char[]>(block));
    cursor_ = blocks_.back().get();
    limit_ = cursor_ + block;
    start = bits::AlignUp(reinterpret_cast<uintptr_t>(cursor_), alignment);
  }
  cursor_ = reinterpret_cast<char*>(start + size);
  bytes_allocated_ += size;
  return reinterpret_cast<void*>(start);
}

}  // namespace base
