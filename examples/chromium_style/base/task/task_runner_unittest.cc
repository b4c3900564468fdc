// Tests for base::TaskRunner, with Task implementations defined here (the
// runner calls them through the vtable from task_runner.cc).

#include <memory>

#include "base/task/task_runner.h"
#include "base/test/test.h"

namespace {

class AddTask : public base::Task {
 public:
  explicit AddTask(int64_t amount) : amount_(amount) {}
  int64_t Run(int64_t input) override { return input + amount_; }
  const char* name() const override { return "add"; }

 private:
  int64_t amount_;
};

class SquareTask : public base::Task {
 public:
  int64_t Run(int64_t input) override { return input * input; }
  const char* name() const override { return "square"; }
};

TEST(TaskRunnerTest, RunsInOrder) {
  base::TaskRunner runner;
  runner.Post(std::make_unique<AddTask>(3));
  runner.Post(std::make_unique<SquareTask>());
  runner.Post(std::make_unique<AddTask>(-1));
  EXPECT_EQ(runner.RunAll(4), int64_t{48});  // (4 + 3)^2 - 1
  EXPECT_EQ(runner.Trace(), "add,square,add");
}

}  // namespace
