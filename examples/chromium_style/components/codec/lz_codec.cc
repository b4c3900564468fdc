// LZ77 via //third_party/tinylz: <varint original size><tinylz stream>.

#include <cstdint>
#include <memory>

#include "components/codec/codec_impls.h"
#include "third_party/tinylz/tinylz.h"

namespace codec {
namespace internal {
namespace {

// Refuse to allocate absurd sizes for corrupt headers.
constexpr uint64_t kMaxDecodedSize = uint64_t{1} << 28;

class LzCodec : public Codec {
 public:
  Kind kind() const override { return Kind::kLz; }
  const char* name() const override { return "lz"; }

  std::string Encode(std::string_view data) const override {
    std::string out;
    AppendVarint(data.size(), &out);
    const size_t header = out.size();
    out.resize(header + tinylz_max_compressed_size(data.size()));
    const size_t written = tinylz_compress(
        reinterpret_cast<const uint8_t*>(data.data()), data.size(),
        reinterpret_cast<uint8_t*>(out.data()) + header, out.size() - header);
    out.resize(header + written);
    return out;
  }

  bool Decode(std::string_view encoded, std::string* data) const override {
    uint64_t size = 0;
    if (!ReadVarint(&encoded, &size) || size > kMaxDecodedSize)
      return false;
    data->assign(size, '\0');
    const long written = tinylz_decompress(
        reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size(),
        reinterpret_cast<uint8_t*>(data->data()), data->size());
    return written >= 0 && static_cast<uint64_t>(written) == size;
  }
};

}  // namespace

std::unique_ptr<Codec> CreateLzCodec() {
  return std::make_unique<LzCodec>();
}

}  // namespace internal
}  // namespace codec
