// ThinLTO import probe.
//
// ImportMeInline() is a tiny function defined out of line in
// base/inline_probe.cc and called from apps/calc/main.cc. Without LTO the calc
// binary contains a call to it; with ThinLTO the backend for main.cc imports
// the definition and inlines it, so no call remains (see README.md).

#ifndef BASE_INLINE_PROBE_H_
#define BASE_INLINE_PROBE_H_

namespace base {

int ImportMeInline(int x);

}  // namespace base

#endif  // BASE_INLINE_PROBE_H_
