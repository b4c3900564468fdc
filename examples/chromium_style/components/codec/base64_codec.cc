// Base64 (RFC 4648, with padding).

#include <cstdint>
#include <memory>

#include "components/codec/codec_impls.h"

namespace codec {
namespace internal {
namespace {

constexpr char kAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int DecodeChar(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

class Base64Codec : public Codec {
 public:
  Kind kind() const override { return Kind::kBase64; }
  const char* name() const override { return "base64"; }

  std::string Encode(std::string_view data) const override {
    std::string out;
    out.reserve((data.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= data.size(); i += 3) {
      const uint32_t v = (Byte(data, i) << 16) | (Byte(data, i + 1) << 8) |
                         Byte(data, i + 2);
      out.push_back(kAlphabet[(v >> 18) & 63]);
      out.push_back(kAlphabet[(v >> 12) & 63]);
      out.push_back(kAlphabet[(v >> 6) & 63]);
      out.push_back(kAlphabet[v & 63]);
    }
    const size_t rest = data.size() - i;
    if (rest == 1) {
      const uint32_t v = Byte(data, i) << 16;
      out.push_back(kAlphabet[(v >> 18) & 63]);
      out.push_back(kAlphabet[(v >> 12) & 63]);
      out.append("==");
    } else if (rest == 2) {
      const uint32_t v = (Byte(data, i) << 16) | (Byte(data, i + 1) << 8);
      out.push_back(kAlphabet[(v >> 18) & 63]);
      out.push_back(kAlphabet[(v >> 12) & 63]);
      out.push_back(kAlphabet[(v >> 6) & 63]);
      out.push_back('=');
    }
    return out;
  }

  bool Decode(std::string_view encoded, std::string* data) const override {
    if (encoded.size() % 4 != 0)
      return false;
    data->clear();
    for (size_t i = 0; i < encoded.size(); i += 4) {
      const bool last = i + 4 == encoded.size();
      int padding = 0;
      if (last && encoded[i + 3] == '=')
        padding = encoded[i + 2] == '=' ? 2 : 1;
      uint32_t v = 0;
      for (int k = 0; k < 4; ++k) {
        int digit = 0;
        if (k < 4 - padding) {
          digit = DecodeChar(encoded[i + k]);
          if (digit < 0)
            return false;
        }
        v = (v << 6) | static_cast<uint32_t>(digit);
      }
      data->push_back(static_cast<char>(v >> 16));
      if (padding < 2)
        data->push_back(static_cast<char>((v >> 8) & 0xFF));
      if (padding < 1)
        data->push_back(static_cast<char>(v & 0xFF));
    }
    return true;
  }

 private:
  static uint32_t Byte(std::string_view data, size_t i) {
    return static_cast<uint8_t>(data[i]);
  }
};

}  // namespace

std::unique_ptr<Codec> CreateBase64Codec() {
  return std::make_unique<Base64Codec>();
}

}  // namespace internal
}  // namespace codec
