// Runs a pipeline of Tasks in order.

#ifndef BASE_TASK_TASK_RUNNER_H_
#define BASE_TASK_TASK_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/task/task.h"

namespace base {

class TaskRunner {
 public:
  TaskRunner();
  ~TaskRunner();

  void Post(std::unique_ptr<Task> task);

  // Feeds |input| through every task in posting order.
  int64_t RunAll(int64_t input);

  // Names of the tasks that ran, comma-separated.
  std::string Trace() const;

  size_t size() const { return tasks_.size(); }

 private:
  std::vector<std::unique_ptr<Task>> tasks_;
  std::vector<std::string> trace_;
};

}  // namespace base

#endif  // BASE_TASK_TASK_RUNNER_H_
