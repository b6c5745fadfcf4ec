// Host-visible interface of the small-table histogram kernels (kernels/forward_small_table.cu,
// kernels/backward_small_table.cu; docs/small-table.md): argument structs and launch functions.
// Plain C++ (no device code). Kernels trust these arguments: src/small_table.cpp planned them.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/backward_launch.h"
#include "kernels/launch.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

/// One small-table feature on device ([num_small]; non-VBE, so every feature has B bags).
struct SmallFeatureMeta {
  std::int64_t table_offset;  ///< element offset of the feature's table in the weights buffer
  std::int64_t first_bag;     ///< f·B
  std::int64_t out_col;       ///< first output column of the feature
  std::int64_t row_offset;    ///< linearized id of the table's row 0 (backward)
  std::int32_t rows;          ///< E <= 64
  std::int32_t dim;           ///< 64 <= D <= 128
};

/// The histogram counts buffer (tbe::cuda::SmallTableCounts, or the backward's own workspace):
/// counts [num_small][64][padded_bags] FP16 bit patterns, then invalid [num_small] uint32.
struct CountsView {
  std::uint16_t* counts = nullptr;
  std::uint32_t* invalid = nullptr;
  std::int64_t padded_bags = 0;  ///< B rounded up to 16
};

/// The forward over every bag of the small-table features (grid: bag blocks × features).
struct SmallTableForwardArgs {
  const void* weights = nullptr;          ///< FP16 [Σ E·D]
  const void* indices = nullptr;          ///< [N] Idx (raw, or repaired by the separate pass)
  const void* offsets = nullptr;          ///< [T·B + 1] Idx (repaired under WARNING/IGNORE)
  const void* orig_offsets = nullptr;     ///< fused check: the raw offsets, to count repaired bags
  void* output = nullptr;                 ///< Out [B, Σ D]
  std::int64_t out_stride = 0;            ///< Σ_f D_f
  const SmallFeatureMeta* features = nullptr;
  std::int32_t num_small = 0;
  std::int64_t batch_size = 0;            ///< B
  std::int64_t num_bags = 0;              ///< T·B (all features)
  bool mean = false;
  bool check_indices = false;             ///< fused bounds check: bad index -> row 0, counted
  bool compute_output = true;             ///< false: counts only (the backward's own histogram)
  CountsView save;                        ///< counts.counts == nullptr: not saved
  DeviceCounters* counters = nullptr;
  const unsigned long long* abort_key = nullptr;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

/// grad_table = counts^T · grad_output per small-table table (split over bag blocks), then one
/// optimizer update per touched row.
struct SmallTableBackwardArgs {
  const SmallFeatureMeta* features = nullptr;
  std::int32_t num_small = 0;
  std::int64_t batch_size = 0;            ///< B
  std::int64_t num_bags = 0;              ///< T·B: the bags whose L the MEAN scale needs
  const void* offsets = nullptr;          ///< [T·B + 1] Idx, repaired (MEAN: 1/L per bag)
  bool mean = false;
  /// No sort ran (every feature of the call takes the path): the apply kernel also owns the rows
  /// with 0 < SL < min_run (summed exactly from the counts) and every row of a feature whose
  /// histogram is not representable (counted from `indices`). false: the generic run kernels own
  /// both.
  bool exact_rows = false;
  const void* indices = nullptr;          ///< [N] Idx (exact_rows: the lookups of invalid features)
  bool check_indices = false;             ///< exact_rows: a bad index counts as row 0 (WARNING/IGNORE)
  CountsView counts;                      ///< the forward's (or the backward's own) histogram
  const void* grad_output = nullptr;      ///< Grad [B, Σ D]
  std::int64_t out_stride = 0;            ///< Σ_f D_f
  float* partials = nullptr;              ///< [num_small][blocks][64][128] FP32 split-K tiles
  std::int32_t* partial_sl = nullptr;     ///< [num_small][blocks][64] lookups per row and block
  std::int32_t blocks_per_feature = 0;    ///< P = ceil(B_pad / (16 · block_tiles))
  std::int32_t block_tiles = 0;           ///< 16-bag k-tiles per split-K block
  /// Rows with SL >= min_run are updated here, shorter ones by the generic run kernels
  /// (docs/oracle.md "Small-table histogram path": the bound the enclosure covers).
  std::int64_t min_run = 0;
  /// The split-K kernel: false = small_table_grad_split_k (the block's 4 warps share each tile,
  /// one scale per tile), true = small_table_grad_split_k_warp (warp w owns 32 columns for all
  /// of the block's tiles, one scale per tile and column, no block barrier).
  bool warp_columns = false;
  RunArgs run;                            ///< the optimizer and weights part of the run kernels'
                                          ///< arguments (tables, weights, momentum, lr, SR, ...)
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

// --- launches (dispatch: src/forward_dispatch.cpp, src/backward_dispatch.cpp) ---
void launch_small_table_forward(DType output, DType index, const SmallTableForwardArgs& a,
                                cudaStream_t stream);
template <DType kOut, DType kIdx>
void launch_small_table_forward_t(const SmallTableForwardArgs& a, cudaStream_t stream);

void launch_small_table_backward(DType grad, DType index, const SmallTableBackwardArgs& a,
                                 cudaStream_t stream);
template <DType kGrad, DType kIdx>
void launch_small_table_backward_t(const SmallTableBackwardArgs& a, cudaStream_t stream);

}  // namespace tbe::cuda::detail
