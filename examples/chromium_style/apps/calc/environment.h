// Variables and the current error of an evaluation.

#ifndef APPS_CALC_ENVIRONMENT_H_
#define APPS_CALC_ENVIRONMENT_H_

#include <cstdint>
#include <string>

#include "base/containers/flat_map.h"

namespace calc {

class Environment {
 public:
  Environment();
  ~Environment();

  void Set(const std::string& name, int64_t value);
  // Sets the error "unknown variable <name>" when missing.
  bool Get(const std::string& name, int64_t* value);

  void SetError(std::string error) { error_ = std::move(error); }
  const std::string& error() const { return error_; }

 private:
  base::FlatMap<std::string, int64_t> variables_;
  std::string error_;
};

}  // namespace calc

#endif  // APPS_CALC_ENVIRONMENT_H_
