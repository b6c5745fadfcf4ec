// The backend with a planted bug (faulty_backend.h).
#include "fuzz/faulty_backend.h"

#include <cstdint>

#include "tbe/host_case.h"

namespace tbe::fuzz {

ForwardStats FaultyBackend::forward(const ForwardProblem& p, void* output,
                                    const ForwardStrategy& strategy) {
  ForwardStats st = inner_->forward(p, output, strategy);
  if (p.options.pooling == PoolingMode::None) return st;
  bool long_bag = false;
  for (std::int64_t k = 0; k + 1 < p.lookups.num_offsets && !long_bag; ++k)
    long_bag = load_index(p.lookups.index_dtype, p.lookups.offsets, k + 1) -
                   load_index(p.lookups.index_dtype, p.lookups.offsets, k) >= 256;
  if (long_bag && make_output_layout(p).numel > 0) {
    const DType t = p.options.policy.output;
    store_from_double(t, output, 0, load_as_double(t, output, 0) + 1.0);
  }
  return st;
}

}  // namespace tbe::fuzz
