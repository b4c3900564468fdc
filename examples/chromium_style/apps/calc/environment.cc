// Calculator variables.

#include "apps/calc/environment.h"

namespace calc {

Environment::Environment() = default;
Environment::~Environment() = default;

void Environment::Set(const std::string& name, int64_t value) {
  variables_.Set(name, value);
}

bool Environment::Get(const std::string& name, int64_t* value) {
  const int64_t* found = variables_.Find(name);
  if (!found) {
    SetError("unknown variable " + name);
    return false;
  }
  *value = *found;
  return true;
}

}  // namespace calc
