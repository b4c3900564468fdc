// Chunked hashing.

#include "tools/crc_tool/stream_hasher.h"

#include "base/hash/adler32.h"
#include "base/hash/crc32.h"
#include "base/strings/string_number_conversions.h"

namespace crc_tool {

StreamHasher::StreamHasher() : crc_state_(base::kCrc32InitialState) {}

void StreamHasher::Update(const uint8_t* data, size_t size) {
  // Hot loop over base::Crc32Step (defined in another module).
  for (size_t i = 0; i < size; ++i)
    crc_state_ = base::Crc32Step(crc_state_, data[i]);
  adler_ = base_adler32(adler_, data, size);
  sha1_.Update(data, size);
}

uint32_t StreamHasher::crc32() const {
  return base::Crc32Finish(crc_state_);
}

std::string StreamHasher::FinishSha1Hex() {
  const base::Sha1Digest digest = sha1_.Finish();
  return base::HexEncodeLower(digest.data(), digest.size());
}

}  // namespace crc_tool
