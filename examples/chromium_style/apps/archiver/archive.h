// A multi-member archive built on libcodec.so:
//   <varint member count> { <varint name size> <name> <frame(lz(data))> }*
// where each frame is codec::WrapFrame() of the LZ-encoded member data.

#ifndef APPS_ARCHIVER_ARCHIVE_H_
#define APPS_ARCHIVER_ARCHIVE_H_

#include <string>
#include <utility>
#include <vector>

namespace archiver {

using Member = std::pair<std::string, std::string>;  // name, data

std::string Pack(const std::vector<Member>& members);

// Returns false for truncated or corrupt archives.
bool Unpack(std::string_view archive, std::vector<Member>* members);

}  // namespace archiver

#endif  // APPS_ARCHIVER_ARCHIVE_H_
