// crc_tool: known-answer tests for //base's checksums and hashes, chunked
// hashing of 1 MiB of generated data, and the assembly SplitMix64 finaliser.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/cpu/mix64.h"
#include "base/hash/adler32.h"
#include "base/hash/crc32.h"
#include "base/hash/fnv1a.h"
#include "base/hash/hash_combine.h"
#include "base/hash/sha1.h"
#include "base/numerics/clamp.h"
#include "base/rand/xorshift.h"
#include "base/verify.h"
#include "tools/crc_tool/stream_hasher.h"
#include "tools/crc_tool/vectors.h"

namespace {

// 1 MiB of base::XorShift32(12345) low bytes; values from Python.
constexpr size_t kStreamSize = size_t{1} << 20;
constexpr uint32_t kStreamCrc = 0xFE472F34u;
constexpr uint32_t kStreamAdler = 0x50476005u;
constexpr char kStreamSha1[] = "2f40f92a4e793fd4fa12d6cdf9c0d932e9d4f025";
// HashCombine fold of Clamp(crc32(block) >> 16, 1000, 60000) over the 256
// 4 KiB blocks.
constexpr uint64_t kBlockFingerprint = 0x1225CDBD9CFEBA98ull;

void CheckVectors(base::Verifier* verifier) {
  for (size_t i = 0; i < crc_tool::kHashVectorCount; ++i) {
    const crc_tool::HashVector& v = crc_tool::kHashVectors[i];
    const size_t size = std::strlen(v.input);
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.input);
    verifier->ExpectEq(base::Crc32(v.input, size), v.crc32, v.input);
    verifier->ExpectEq(base::Crc32Bitwise(v.input, size), v.crc32, v.input);
    verifier->ExpectEq(base_adler32(1, bytes, size), v.adler32, v.input);
    verifier->ExpectEq(base_fnv1a32(v.input, size), v.fnv1a32, v.input);
    verifier->ExpectStrEq(base::Sha1Hex(v.input), v.sha1_hex, v.input);
  }
}

void CheckStream(base::Verifier* verifier) {
  base::XorShift32 rng(12345);
  std::vector<uint8_t> data(kStreamSize);
  for (uint8_t& byte : data)
    byte = static_cast<uint8_t>(rng.Next() & 0xFF);

  // Irregular chunk sizes, so chunk boundaries fall everywhere.
  crc_tool::StreamHasher hasher;
  size_t offset = 0;
  for (size_t chunk = 0; offset < data.size(); ++chunk) {
    size_t size = 1 + (chunk * 7919) % 4096;
    if (size > data.size() - offset)
      size = data.size() - offset;
    hasher.Update(data.data() + offset, size);
    offset += size;
  }
  verifier->ExpectEq(hasher.crc32(), kStreamCrc, "stream CRC-32");
  verifier->ExpectEq(hasher.adler32(), kStreamAdler, "stream Adler-32");
  verifier->ExpectStrEq(hasher.FinishSha1Hex(), kStreamSha1, "stream SHA-1");
  verifier->ExpectEq(base::Crc32(data.data(), data.size()), kStreamCrc,
                     "one-shot CRC-32");

  uint64_t fingerprint = 0;
  for (size_t block = 0; block < data.size() / 4096; ++block) {
    const uint32_t crc = base::Crc32(data.data() + block * 4096, 4096);
    fingerprint = base::HashCombine(
        fingerprint, static_cast<uint64_t>(base::Clamp(
                         static_cast<int>(crc >> 16), 1000, 60000)));
  }
  verifier->ExpectEq(fingerprint, kBlockFingerprint, "block fingerprint");
}

void CheckMix64(base::Verifier* verifier) {
  // SplitMix64 reference outputs for seed 0, then the assembly loop against
  // the C loop and a value from Python.
  verifier->ExpectEq(base_splitmix64_at(0, 0), 0xE220A8397B1DCDAFull,
                     "splitmix64(0)[0]");
  verifier->ExpectEq(base_splitmix64_at(0, 1), 0x6E789E6AA1B965F4ull,
                     "splitmix64(0)[1]");
  verifier->ExpectEq(base_splitmix64_xor(42, 100000), 0x7AA70686F7B287AEull,
                     "asm splitmix64 xor");
  verifier->ExpectEq(base_splitmix64_xor_reference(42, 100000),
                     0x7AA70686F7B287AEull, "C splitmix64 xor");
}

}  // namespace

int main() {
  base::Verifier verifier("crc_tool");
  CheckVectors(&verifier);
  CheckStream(&verifier);
  CheckMix64(&verifier);
  return verifier.Finish();
}
