// archiver: compression and encoding round trips through libcodec.so, checked
// against values computed independently (Python's zlib.crc32 and a Python
// port of the tinylz format), and against the executable's own copy of
// //third_party/tinylz.

#include <cstdint>
#include <string>
#include <vector>

#include "apps/archiver/archive.h"
#include "apps/archiver/corpus.h"
#include "base/hash/crc32.h"
#include "base/verify.h"
#include "components/codec/codec.h"
#include "third_party/tinylz/tinylz.h"

namespace {

constexpr uint32_t kCorpusSeed = 2024;
constexpr size_t kCorpusMinSize = 65536;
constexpr size_t kCorpusSize = 65538;
constexpr uint32_t kCorpusCrc = 0xEE4908F0u;
constexpr size_t kCorpusLzStreamSize = 32010;
constexpr uint32_t kCorpusLzStreamCrc = 0xFDB20458u;
constexpr uint32_t kCorpusBase64Crc = 0x9BF87A67u;

constexpr uint32_t kRandomSeed = 7;
constexpr size_t kRandomSize = 4096;
constexpr uint32_t kRandomCrc = 0xEF3719B5u;
constexpr size_t kRandomLzStreamSize = 4129;

uint32_t Crc(const std::string& data) {
  return base::Crc32(data.data(), data.size());
}

// Compresses with the executable's own tinylz (not the one in libcodec.so).
std::string DirectLz(const std::string& data) {
  std::string out(tinylz_max_compressed_size(data.size()), '\0');
  out.resize(tinylz_compress(reinterpret_cast<const uint8_t*>(data.data()),
                             data.size(),
                             reinterpret_cast<uint8_t*>(out.data()),
                             out.size()));
  return out;
}

// Strips the varint size header of the lz codec's output.
std::string LzStream(const std::string& encoded) {
  std::string_view view = encoded;
  uint64_t size = 0;
  if (!codec::ReadVarint(&view, &size))
    return std::string();
  return std::string(view);
}

void CheckRoundTrips(const std::string& data, base::Verifier* verifier) {
  for (const char* name : {"base64", "hex", "rle", "lz"}) {
    codec::Kind kind = codec::Kind::kHex;
    verifier->ExpectTrue(codec::CodecKindFromName(name, &kind), name);
    const auto codec = codec::CreateCodec(kind);
    std::string decoded;
    verifier->ExpectTrue(codec->Decode(codec->Encode(data), &decoded) &&
                             decoded == data,
                         name);
    verifier->ExpectStrEq(codec->name(), name, "codec name");
  }
  std::string unwrapped;
  verifier->ExpectTrue(
      codec::UnwrapFrame(codec::WrapFrame(data), &unwrapped) &&
          unwrapped == data,
      "frame round trip");
}

}  // namespace

int main() {
  base::Verifier verifier("archiver");

  const std::string corpus = archiver::MakeTextCorpus(kCorpusSeed,
                                                      kCorpusMinSize);
  verifier.ExpectEq(corpus.size(), kCorpusSize, "corpus size");
  verifier.ExpectEq(Crc(corpus), kCorpusCrc, "corpus CRC (executable)");
  verifier.ExpectEq(codec::Checksum(corpus), kCorpusCrc,
                    "corpus CRC (libcodec.so)");

  const auto lz = codec::CreateCodec(codec::Kind::kLz);
  const std::string lz_stream = LzStream(lz->Encode(corpus));
  verifier.ExpectEq(lz_stream.size(), kCorpusLzStreamSize, "corpus lz size");
  verifier.ExpectEq(Crc(lz_stream), kCorpusLzStreamCrc, "corpus lz CRC");
  verifier.ExpectTrue(DirectLz(corpus) == lz_stream,
                      "tinylz in executable == tinylz in libcodec.so");

  const auto base64 = codec::CreateCodec(codec::Kind::kBase64);
  const std::string corpus_base64 = base64->Encode(corpus);
  verifier.ExpectEq(corpus_base64.size(), (kCorpusSize + 2) / 3 * 4,
                    "corpus base64 size");
  verifier.ExpectEq(Crc(corpus_base64), kCorpusBase64Crc, "corpus base64 CRC");

  const std::string random = archiver::MakeRandomBytes(kRandomSeed,
                                                       kRandomSize);
  verifier.ExpectEq(Crc(random), kRandomCrc, "random bytes CRC");
  verifier.ExpectEq(LzStream(lz->Encode(random)).size(), kRandomLzStreamSize,
                    "random lz size");

  CheckRoundTrips(corpus, &verifier);
  CheckRoundTrips(random, &verifier);
  CheckRoundTrips(std::string(), &verifier);

  const std::vector<archiver::Member> members = {
      {"corpus.txt", corpus}, {"random.bin", random}, {"empty", ""}};
  const std::string packed = archiver::Pack(members);
  std::vector<archiver::Member> unpacked;
  verifier.ExpectTrue(archiver::Unpack(packed, &unpacked), "unpack");
  verifier.ExpectTrue(unpacked == members, "unpacked members");
  std::string corrupt = packed;
  corrupt[corrupt.size() / 2] ^= 0x40;
  verifier.ExpectTrue(!archiver::Unpack(corrupt, &unpacked),
                      "corrupt archive rejected");

  return verifier.Finish();
}
