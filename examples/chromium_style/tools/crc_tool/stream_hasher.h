// Computes CRC-32, Adler-32 and SHA-1 of a byte stream fed in chunks.

#ifndef TOOLS_CRC_TOOL_STREAM_HASHER_H_
#define TOOLS_CRC_TOOL_STREAM_HASHER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/hash/sha1.h"

namespace crc_tool {

class StreamHasher {
 public:
  StreamHasher();

  void Update(const uint8_t* data, size_t size);

  uint32_t crc32() const;
  uint32_t adler32() const { return adler_; }
  // Finishes the SHA-1; call once, after the last Update().
  std::string FinishSha1Hex();

 private:
  uint32_t crc_state_;
  uint32_t adler_ = 1;
  base::Sha1 sha1_;
};

}  // namespace crc_tool

#endif  // TOOLS_CRC_TOOL_STREAM_HASHER_H_
