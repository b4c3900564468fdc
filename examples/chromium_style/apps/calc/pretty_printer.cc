// Program rendering.

#include "apps/calc/pretty_printer.h"

namespace calc {

std::string PrettyPrint(const std::vector<NodePtr>& statements) {
  std::string out;
  for (size_t i = 0; i < statements.size(); ++i) {
    if (i != 0)
      out.append("; ");
    statements[i]->Print(&out);
  }
  return out;
}

}  // namespace calc
