// Deterministic test data for the archiver.

#ifndef APPS_ARCHIVER_CORPUS_H_
#define APPS_ARCHIVER_CORPUS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace archiver {

// Words drawn from a 16-word list by base::XorShift32(|seed|), separated by
// a space or (one time in ten) a newline, until at least |min_size| bytes.
std::string MakeTextCorpus(uint32_t seed, size_t min_size);

// |size| bytes of base::XorShift32(|seed|) output (low byte of each draw).
std::string MakeRandomBytes(uint32_t seed, size_t size);

}  // namespace archiver

#endif  // APPS_ARCHIVER_CORPUS_H_
