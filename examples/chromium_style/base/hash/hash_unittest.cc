// Known-answer tests for the hash functions in base/hash/.

#include <cstring>
#include <string>

#include "base/hash/adler32.h"
#include "base/hash/crc32.h"
#include "base/hash/fnv1a.h"
#include "base/hash/hash_combine.h"
#include "base/hash/sha1.h"
#include "base/test/test.h"

namespace {

const char kFox[] = "The quick brown fox jumps over the lazy dog";

TEST(Crc32Test, KnownAnswers) {
  EXPECT_EQ(base::Crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(base::Crc32(kFox, std::strlen(kFox)), 0x414FA339u);
  EXPECT_EQ(base::Crc32("", 0), 0u);
}

TEST(Crc32Test, TableMatchesBitwise) {
  // The table comes from a static initialiser; the bitwise version does not.
  std::string data;
  for (int i = 0; i < 1000; ++i)
    data.push_back(static_cast<char>((i * 7 + 3) & 0xFF));
  EXPECT_EQ(base::Crc32(data.data(), data.size()),
            base::Crc32Bitwise(data.data(), data.size()));
}

TEST(Crc32Test, Streaming) {
  uint32_t state = base::kCrc32InitialState;
  for (const char* p = kFox; *p; ++p)
    state = base::Crc32Step(state, static_cast<uint8_t>(*p));
  EXPECT_EQ(base::Crc32Finish(state), 0x414FA339u);
}

TEST(Adler32Test, KnownAnswers) {
  EXPECT_EQ(base_adler32(1, reinterpret_cast<const uint8_t*>("Wikipedia"), 9),
            0x11E60398u);
  EXPECT_EQ(base_adler32(1, nullptr, 0), 1u);
}

TEST(Fnv1aTest, KnownAnswers) {
  EXPECT_EQ(base_fnv1a32("a", 1), 0xE40C292Cu);
  EXPECT_EQ(base_fnv1a64("a", 1), 0xAF63DC4C8601EC8Cull);
  EXPECT_EQ(base_fnv1a32("foobar", 6), 0xBF9CF968u);
  EXPECT_EQ(base_fnv1a64("foobar", 6), 0x85944171F73967E8ull);
}

TEST(Sha1Test, KnownAnswers) {
  EXPECT_EQ(base::Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(base::Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(base::Sha1Hex(
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(Sha1Test, MillionA) {
  base::Sha1 sha1;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i)
    sha1.Update(chunk.data(), chunk.size());
  const base::Sha1Digest digest = sha1.Finish();
  EXPECT_EQ(digest[0], 0x34u);
  EXPECT_EQ(digest[1], 0xAAu);
  EXPECT_EQ(digest[19], 0x6Fu);
}

TEST(HashCombineTest, KnownAnswers) {
  EXPECT_EQ(base::HashCombine(0, 0), 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(base::HashCombine(1, 2), 0x9E3779B97F4A7C56ull);
  uint64_t seed = 0;
  for (uint64_t i = 1; i <= 10; ++i)
    seed = base::HashCombine(seed, i);
  EXPECT_EQ(seed, 0x99CF96C597C50637ull);
}

}  // namespace
