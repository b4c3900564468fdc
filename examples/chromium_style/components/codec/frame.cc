// Checksummed frames.

#include "base/hash/crc32.h"
#include "components/codec/codec.h"

namespace codec {

uint32_t Checksum(std::string_view data) {
  // A hot loop over base::Crc32Step, which lives in another module.
  uint32_t state = base::kCrc32InitialState;
  for (char c : data)
    state = base::Crc32Step(state, static_cast<uint8_t>(c));
  return base::Crc32Finish(state);
}

std::string WrapFrame(std::string_view payload) {
  std::string frame;
  AppendVarint(payload.size(), &frame);
  frame.append(payload);
  const uint32_t crc = Checksum(payload);
  for (int i = 0; i < 4; ++i)
    frame.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return frame;
}

bool UnwrapFrame(std::string_view frame, std::string* payload) {
  uint64_t size = 0;
  if (!ReadVarint(&frame, &size) || frame.size() < 4 ||
      size != frame.size() - 4) {
    return false;
  }
  const std::string_view body = frame.substr(0, size);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i)
    stored |= uint32_t{static_cast<uint8_t>(frame[size + i])} << (8 * i);
  if (stored != Checksum(body))
    return false;
  payload->assign(body);
  return true;
}

}  // namespace codec
