// Task pipeline.

#include "base/task/task_runner.h"

#include "base/strings/string_util.h"

namespace base {

Task::~Task() = default;

TaskRunner::TaskRunner() = default;
TaskRunner::~TaskRunner() = default;

void TaskRunner::Post(std::unique_ptr<Task> task) {
  tasks_.push_back(std::move(task));
}

int64_t TaskRunner::RunAll(int64_t input) {
  int64_t value = input;
  for (const auto& task : tasks_) {
    value = task->Run(value);
    trace_.push_back(task->name());
  }
  return value;
}

std::string TaskRunner::Trace() const {
  return JoinStrings(trace_, ",");
}

}  // namespace base
