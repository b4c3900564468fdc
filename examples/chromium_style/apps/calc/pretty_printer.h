// Renders parsed programs back to (fully parenthesised) source. Used by
// calc_unittests only: in the calc binary this object is an unused member of
// libcalc_lib.a.

#ifndef APPS_CALC_PRETTY_PRINTER_H_
#define APPS_CALC_PRETTY_PRINTER_H_

#include <string>
#include <vector>

#include "apps/calc/ast.h"

namespace calc {

// Statements joined by "; ".
std::string PrettyPrint(const std::vector<NodePtr>& statements);

}  // namespace calc

#endif  // APPS_CALC_PRETTY_PRINTER_H_
