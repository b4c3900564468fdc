// CreateCodec() and the Codec base class.

#include "components/codec/codec.h"
#include "components/codec/codec_impls.h"

namespace codec {

Codec::~Codec() = default;

std::unique_ptr<Codec> CreateCodec(Kind kind) {
  switch (kind) {
    case Kind::kBase64:
      return internal::CreateBase64Codec();
    case Kind::kHex:
      return internal::CreateHexCodec();
    case Kind::kRunLength:
      return internal::CreateRunLengthCodec();
    case Kind::kLz:
      return internal::CreateLzCodec();
  }
  return nullptr;
}

bool CodecKindFromName(std::string_view name, Kind* kind) {
  static constexpr struct {
    const char* name;
    Kind kind;
  } kNames[] = {
      {"base64", Kind::kBase64},
      {"hex", Kind::kHex},
      {"rle", Kind::kRunLength},
      {"lz", Kind::kLz},
  };
  for (const auto& entry : kNames) {
    if (name == entry.name) {
      *kind = entry.kind;
      return true;
    }
  }
  return false;
}

}  // namespace codec
