// Tree-walk and VM evaluation, cross-checked.

#include "apps/calc/calculator.h"

#include "apps/calc/environment.h"
#include "apps/calc/parser.h"
#include "apps/calc/vm.h"
#include "base/strings/stringprintf.h"

namespace calc {
namespace {

void Define(const std::vector<std::pair<std::string, int64_t>>& variables,
            Environment* env) {
  for (const auto& [name, value] : variables)
    env->Set(name, value);
}

}  // namespace

CalcResult Calculate(
    std::string_view source,
    const std::vector<std::pair<std::string, int64_t>>& variables) {
  CalcResult result;
  std::vector<NodePtr> statements;
  if (!Parse(source, &statements, &result.error))
    return result;

  Environment tree_env;
  Define(variables, &tree_env);
  int64_t tree_value = 0;
  bool tree_ok = true;
  for (const NodePtr& statement : statements) {
    if (!statement->Evaluate(&tree_env, &tree_value)) {
      tree_ok = false;
      break;
    }
  }

  Environment vm_env;
  Define(variables, &vm_env);
  int64_t vm_value = 0;
  const bool vm_ok =
      RunProgram(CompileStatements(statements), &vm_env, &vm_value);

  if (tree_ok != vm_ok || tree_env.error() != vm_env.error() ||
      (tree_ok && tree_value != vm_value)) {
    result.error = base::StringPrintf(
        "evaluators disagree: tree=%lld (%s) vm=%lld (%s)",
        static_cast<long long>(tree_value), tree_env.error().c_str(),
        static_cast<long long>(vm_value), vm_env.error().c_str());
    return result;
  }
  result.ok = tree_ok;
  result.value = tree_value;
  result.error = tree_env.error();
  return result;
}

}  // namespace calc
