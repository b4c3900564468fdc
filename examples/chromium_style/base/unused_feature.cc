// Never referenced: stays a lazy member of libbase.a in executable links.

#include "base/unused_feature.h"

#include "base/strings/stringprintf.h"

namespace base {

std::string DescribeUnusedFeature(int level) {
  return StringPrintf("unused feature at level %d", level);
}

}  // namespace base
