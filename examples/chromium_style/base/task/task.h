// A unit of work run by a TaskRunner. Implementations live in other
// translation units (and other targets), so Run() is a true virtual call.

#ifndef BASE_TASK_TASK_H_
#define BASE_TASK_TASK_H_

#include <cstdint>

namespace base {

class Task {
 public:
  virtual ~Task();

  // Transforms the running value of the pipeline.
  virtual int64_t Run(int64_t input) = 0;
  virtual const char* name() const = 0;
};

}  // namespace base

#endif  // BASE_TASK_TASK_H_
