// Archive packing and unpacking.

#include "apps/archiver/archive.h"

#include <cstdint>

#include "components/codec/codec.h"

namespace archiver {
namespace {

void AppendBlob(std::string_view blob, std::string* out) {
  codec::AppendVarint(blob.size(), out);
  out->append(blob);
}

bool ReadBlob(std::string_view* input, std::string_view* blob) {
  uint64_t size = 0;
  if (!codec::ReadVarint(input, &size) || size > input->size())
    return false;
  *blob = input->substr(0, size);
  input->remove_prefix(size);
  return true;
}

}  // namespace

std::string Pack(const std::vector<Member>& members) {
  const auto lz = codec::CreateCodec(codec::Kind::kLz);
  std::string out;
  codec::AppendVarint(members.size(), &out);
  for (const auto& [name, data] : members) {
    AppendBlob(name, &out);
    AppendBlob(codec::WrapFrame(lz->Encode(data)), &out);
  }
  return out;
}

bool Unpack(std::string_view archive, std::vector<Member>* members) {
  const auto lz = codec::CreateCodec(codec::Kind::kLz);
  uint64_t count = 0;
  if (!codec::ReadVarint(&archive, &count))
    return false;
  members->clear();
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view name, frame;
    if (!ReadBlob(&archive, &name) || !ReadBlob(&archive, &frame))
      return false;
    std::string encoded, data;
    if (!codec::UnwrapFrame(frame, &encoded) || !lz->Decode(encoded, &data))
      return false;
    members->emplace_back(std::string(name), std::move(data));
  }
  return archive.empty();
}

}  // namespace archiver
