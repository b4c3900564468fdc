// Known-answer vectors.

#include "tools/crc_tool/vectors.h"

namespace crc_tool {

const HashVector kHashVectors[] = {
    {"", 0x00000000u, 0x00000001u, 0x811C9DC5u,
     "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
    {"a", 0xE8B7BE43u, 0x00620062u, 0xE40C292Cu,
     "86f7e437faa5a7fce15d1ddcb9eaeaea377667b8"},
    {"abc", 0x352441C2u, 0x024D0127u, 0x1A47E90Bu,
     "a9993e364706816aba3e25717850c26c9cd0d89d"},
    {"message digest", 0x20159D7Fu, 0x29750586u, 0xB2C0F234u,
     "c12252ceda8be8994d5fa0290a47231c1d16aae3"},
    {"abcdefghijklmnopqrstuvwxyz", 0x4C2750BDu, 0x90860B20u, 0xB0BC0C82u,
     "32d10c7b8cf96570ca04ce37f2a19d84240d3a89"},
    {"The quick brown fox jumps over the lazy dog", 0x414FA339u, 0x5BDC0FDAu,
     0x048FFF90u, "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"},
    {"123456789", 0xCBF43926u, 0x091E01DEu, 0xBB86B11Cu,
     "f7c3bc1d808e04732adf679965ccc34ca7ae3441"},
};

const size_t kHashVectorCount = sizeof(kHashVectors) / sizeof(kHashVectors[0]);

}  // namespace crc_tool
