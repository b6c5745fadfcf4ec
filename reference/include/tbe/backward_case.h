// (Addition) Owning host container for one TBE backward call (tests, tools, case files): the
// forward case plus grad_output, the optimizer state and the backward options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tbe/backward.h"
#include "tbe/host_case.h"

namespace tbe {

/// A whole backward call held on the host.
struct BackwardCase {
  ForwardCase forward;                 ///< tables (weights BEFORE the update), lookups, options
  std::vector<std::byte> grad_output;  ///< [make_output_layout(forward).numel] of policy.output
  std::vector<float> momentum;         ///< [Σ_t E_t] rowwise Adagrad state, empty for SGD
  BackwardOptions options;

  /// Sizes grad_output for the forward's layout and output type, filled with zeros.
  /// Throws InvalidArgument if the forward problem is invalid.
  void resize_grad_output();
  /// Sets momentum to [Σ_t E_t] zeros (Adagrad) or clears it (SGD), per options.optimizer.kind.
  void reset_momentum();
  /// Element i of grad_output as FP64 / stores round_to(policy.output, v) there.
  double grad(std::int64_t i) const;
  void set_grad(std::int64_t i, double v);
  /// Non-owning view; valid until this object is modified (ForwardCase::view rules).
  BackwardProblem view();
};

/// Σ_t E_t (rows of all tables = length of the momentum buffer).
std::int64_t total_rows(const TableBatchView& tables);
/// Elements of the weights buffer: max_t (table_offsets[t] + E_t·D_t) (0 without tables).
std::int64_t total_weight_elements(const TableBatchView& tables);

}  // namespace tbe
