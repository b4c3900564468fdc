// Internal: factories for the Codec implementations (one per .cc file).

#ifndef COMPONENTS_CODEC_CODEC_IMPLS_H_
#define COMPONENTS_CODEC_CODEC_IMPLS_H_

#include <memory>

#include "components/codec/codec.h"

namespace codec {
namespace internal {

std::unique_ptr<Codec> CreateBase64Codec();
std::unique_ptr<Codec> CreateHexCodec();
std::unique_ptr<Codec> CreateRunLengthCodec();
std::unique_ptr<Codec> CreateLzCodec();

}  // namespace internal
}  // namespace codec

#endif  // COMPONENTS_CODEC_CODEC_IMPLS_H_
