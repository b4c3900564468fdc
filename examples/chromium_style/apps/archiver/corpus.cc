// Deterministic test data.

#include "apps/archiver/corpus.h"

#include "base/rand/xorshift.h"

namespace archiver {

std::string MakeTextCorpus(uint32_t seed, size_t min_size) {
  static const char* const kWords[16] = {
      "the",    "quick",   "brown",  "fox",    "jumps",   "over",
      "lazy",   "dog",     "chromium", "ninja", "thin",   "link",
      "backend", "object", "archive", "symbol",
  };
  base::XorShift32 rng(seed);
  std::string text;
  while (text.size() < min_size) {
    text += kWords[rng.NextBelow(16)];
    text += rng.NextBelow(10) == 0 ? '\n' : ' ';
  }
  return text;
}

std::string MakeRandomBytes(uint32_t seed, size_t size) {
  base::XorShift32 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes)
    c = static_cast<char>(rng.Next() & 0xFF);
  return bytes;
}

}  // namespace archiver
