// SHA-1 (FIPS 180-4). Not for security; used as a checkable workload.

#ifndef BASE_HASH_SHA1_H_
#define BASE_HASH_SHA1_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace base {

using Sha1Digest = std::array<uint8_t, 20>;

class Sha1 {
 public:
  Sha1();

  void Update(const void* data, size_t size);
  Sha1Digest Finish();

 private:
  void ProcessBlock(const uint8_t* block);

  uint32_t state_[5];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hex digest of |data|.
std::string Sha1Hex(std::string_view data);

}  // namespace base

#endif  // BASE_HASH_SHA1_H_
