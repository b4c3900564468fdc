// A feature no binary in the example uses. Its object is a member of
// libbase.a that executable links never load (a lazy archive member).

#ifndef BASE_UNUSED_FEATURE_H_
#define BASE_UNUSED_FEATURE_H_

#include <string>

namespace base {

std::string DescribeUnusedFeature(int level);

}  // namespace base

#endif  // BASE_UNUSED_FEATURE_H_
