// Known-answer vectors for the checksums and hashes in //base.

#ifndef TOOLS_CRC_TOOL_VECTORS_H_
#define TOOLS_CRC_TOOL_VECTORS_H_

#include <cstddef>
#include <cstdint>

namespace crc_tool {

struct HashVector {
  const char* input;
  uint32_t crc32;
  uint32_t adler32;
  uint32_t fnv1a32;
  const char* sha1_hex;
};

// Values from Python's zlib.crc32, zlib.adler32 and hashlib.sha1, and a
// direct FNV-1a implementation.
extern const HashVector kHashVectors[];
extern const size_t kHashVectorCount;

}  // namespace crc_tool

#endif  // TOOLS_CRC_TOOL_VECTORS_H_
