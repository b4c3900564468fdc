// Public API of the codec component (libcodec.so).

#ifndef COMPONENTS_CODEC_CODEC_H_
#define COMPONENTS_CODEC_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "components/codec/codec_export.h"

namespace codec {

enum class Kind {
  kBase64,
  kHex,
  kRunLength,
  kLz,
};

// A reversible byte-string transformation. Implementations are internal to
// the library; callers reach them through CreateCodec() and the vtable.
class CODEC_EXPORT Codec {
 public:
  virtual ~Codec();

  virtual Kind kind() const = 0;
  virtual const char* name() const = 0;
  virtual std::string Encode(std::string_view data) const = 0;
  // Returns false for malformed input.
  virtual bool Decode(std::string_view encoded, std::string* data) const = 0;
};

CODEC_EXPORT std::unique_ptr<Codec> CreateCodec(Kind kind);

// "base64", "hex", "rle" or "lz".
CODEC_EXPORT bool CodecKindFromName(std::string_view name, Kind* kind);

// Frames are <varint payload size><payload><CRC-32 of payload, little endian>.
CODEC_EXPORT std::string WrapFrame(std::string_view payload);
CODEC_EXPORT bool UnwrapFrame(std::string_view frame, std::string* payload);

// CRC-32 (zlib) of |data|, computed with base::Crc32Step inside the library.
CODEC_EXPORT uint32_t Checksum(std::string_view data);

// LEB128 unsigned varints.
CODEC_EXPORT void AppendVarint(uint64_t value, std::string* out);
// Consumes the varint at the front of |input|.
CODEC_EXPORT bool ReadVarint(std::string_view* input, uint64_t* value);

}  // namespace codec

#endif  // COMPONENTS_CODEC_CODEC_H_
