// Run-length encoding as (count 1..255, byte) pairs.

#include <memory>

#include "components/codec/codec_impls.h"

namespace codec {
namespace internal {
namespace {

class RunLengthCodec : public Codec {
 public:
  Kind kind() const override { return Kind::kRunLength; }
  const char* name() const override { return "rle"; }

  std::string Encode(std::string_view data) const override {
    std::string out;
    size_t i = 0;
    while (i < data.size()) {
      size_t run = 1;
      while (i + run < data.size() && run < 255 && data[i + run] == data[i])
        ++run;
      out.push_back(static_cast<char>(run));
      out.push_back(data[i]);
      i += run;
    }
    return out;
  }

  bool Decode(std::string_view encoded, std::string* data) const override {
    if (encoded.size() % 2 != 0)
      return false;
    data->clear();
    for (size_t i = 0; i < encoded.size(); i += 2) {
      const size_t run = static_cast<unsigned char>(encoded[i]);
      if (run == 0)
        return false;
      data->append(run, encoded[i + 1]);
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Codec> CreateRunLengthCodec() {
  return std::make_unique<RunLengthCodec>();
}

}  // namespace internal
}  // namespace codec
