// Owning host container of a backward call (backward_case.h).
#include "tbe/backward_case.h"

#include <algorithm>

namespace tbe {

std::int64_t total_rows(const TableBatchView& tables) {
  std::int64_t n = 0;
  for (std::int64_t E : tables.rows) n += E;
  return n;
}

std::int64_t total_weight_elements(const TableBatchView& tables) {
  std::int64_t n = 0;
  for (std::int64_t t = 0; t < tables.num_tables(); ++t)
    n = std::max(n, tables.table_offsets[t] + tables.rows[t] * tables.dims[t]);
  return n;
}

void BackwardCase::resize_grad_output() {
  const ForwardProblem fp = forward.view();
  throw_if_error(validate(fp));
  const OutputLayout layout = make_output_layout(fp);
  grad_output.assign(static_cast<std::size_t>(layout.numel) *
                         dtype_size(forward.options.policy.output),
                     std::byte{0});
}

void BackwardCase::reset_momentum() {
  if (options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad) {
    std::int64_t n = 0;
    for (std::int64_t E : forward.rows) n += E;
    momentum.assign(static_cast<std::size_t>(n), 0.0f);
  } else {
    momentum.clear();
  }
}

double BackwardCase::grad(std::int64_t i) const {
  return load_as_double(forward.options.policy.output, grad_output.data(), i);
}

void BackwardCase::set_grad(std::int64_t i, double v) {
  store_from_double(forward.options.policy.output, grad_output.data(), i, v);
}

BackwardProblem BackwardCase::view() {
  BackwardProblem p;
  p.forward = forward.view();
  p.grad_output = grad_output.empty() ? nullptr : grad_output.data();
  p.momentum = momentum.empty() ? nullptr : momentum.data();
  p.options = options;
  return p;
}

}  // namespace tbe
