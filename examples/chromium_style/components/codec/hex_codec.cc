// Lower-case hex encoding (decoding accepts both cases).

#include <memory>

#include "base/strings/string_number_conversions.h"
#include "components/codec/codec_impls.h"

namespace codec {
namespace internal {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

class HexCodec : public Codec {
 public:
  Kind kind() const override { return Kind::kHex; }
  const char* name() const override { return "hex"; }

  std::string Encode(std::string_view data) const override {
    return base::HexEncodeLower(data.data(), data.size());
  }

  bool Decode(std::string_view encoded, std::string* data) const override {
    if (encoded.size() % 2 != 0)
      return false;
    data->clear();
    for (size_t i = 0; i < encoded.size(); i += 2) {
      const int high = HexDigit(encoded[i]);
      const int low = HexDigit(encoded[i + 1]);
      if (high < 0 || low < 0)
        return false;
      data->push_back(static_cast<char>(high * 16 + low));
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Codec> CreateHexCodec() {
  return std::make_unique<HexCodec>();
}

}  // namespace internal
}  // namespace codec
