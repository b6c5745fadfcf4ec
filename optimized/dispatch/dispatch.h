// The dispatch layer of the CUDA backend (CUB's `dispatch/`): runtime DTypes -> the template
// instance that runs them, in one place. Layers, top down: the public operators
// (include/tbe/cuda) -> their host side (src/) -> this layer -> the kernels (kernels/).
//
// What lives here, and only here:
//   1. Storage<DType>: the one list of DType -> device storage type (and its cudaDataType);
//   2. the DTypes each role accepts (storage, accumulation, index);
//   3. the compiled-combination tables: the (weights, accumulation, output) triples that have
//      kernel instances (kCompiledForward, kCompiledPooledTuning, kCompiledBackward);
//   4. the helpers that turn a runtime DType (or triple) into compile-time tags for a callable,
//      or throw InvalidArgument naming the argument and the unsupported value: never a silent
//      fallback to another type.
// The instances themselves stay in the kernels' .cu files (one .cu per group of instantiations
// keeps nvcc time down); their instantiation macros static_assert that each instance is listed
// here, and the dispatch below references every listed one, so the linker checks the converse.
//
// Host-only C++ (no device code): compiled by the host compiler (src/*.cpp) and by nvcc (the
// launchers in kernels/*.cu). The operators' can_implement() rejects every unsupported type
// before any launch, so the throws below are unreachable through the public operators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

#include "tbe/errors.h"
#include "tbe/types.h"

namespace tbe::cuda::dispatch {

// ============================================================================================
// 1. DType -> device storage type (the only place a new element type is added)
// ============================================================================================

/// Device storage of one DType: `type` (what kernels load and store) and `data_type` (the same
/// type as cuBLAS / cuBLASLt name it).
template <DType T> struct Storage;
template <> struct Storage<DType::F32> {
  using type = float;
  static constexpr cudaDataType_t data_type = CUDA_R_32F;
};
template <> struct Storage<DType::F16> {
  using type = __half;
  static constexpr cudaDataType_t data_type = CUDA_R_16F;
};
template <> struct Storage<DType::BF16> {
  using type = __nv_bfloat16;
  static constexpr cudaDataType_t data_type = CUDA_R_16BF;
};
template <> struct Storage<DType::F64> {
  using type = double;
  static constexpr cudaDataType_t data_type = CUDA_R_64F;
};
template <> struct Storage<DType::I32> {
  using type = std::int32_t;
  static constexpr cudaDataType_t data_type = CUDA_R_32I;
};
template <> struct Storage<DType::I64> {
  using type = std::int64_t;
  static constexpr cudaDataType_t data_type = CUDA_R_64I;
};
template <DType T> using storage_t = typename Storage<T>::type;

/// A DType as a compile-time value: what the dispatch helpers hand to their callable
/// (`decltype(tag)::value` is the DType, `storage_t<decltype(tag)::value>` its storage type).
template <DType T> using DTypeTag = std::integral_constant<DType, T>;

// ============================================================================================
// 2. The DTypes of each role
// ============================================================================================

/// Weights, outputs, grad_output and IKBO storage: FP32, FP16, BF16 (what tbe::validate and
/// tbe::ikbo::validate accept as storage types).
inline constexpr DType kStorageTypes[] = {DType::F32, DType::F16, DType::BF16};
/// Accumulators of the TBE kernels: FP32 and FP64 (ForwardOp / BackwardOp reject the others).
inline constexpr DType kAccumulationTypes[] = {DType::F32, DType::F64};
/// Indices and offsets: int32, int64 (tbe::validate accepts exactly these).
inline constexpr DType kIndexTypes[] = {DType::I32, DType::I64};
/// Storage of the IKBO fused candidate GEMM (mma.sync m16n8k16 takes 16-bit operands; LceOp runs
/// PaddedK instead for FP32 storage).
inline constexpr DType kMmaStorageTypes[] = {DType::F16, DType::BF16};

/// Storage of the IKBO attention kernel (mma.sync m16n8k16 on 16-bit operands; AttentionOp
/// rejects FP32 storage in can_implement).
inline constexpr DType kAttentionStorageTypes[] = {DType::F16, DType::BF16};
/// Head dimensions Dh the IKBO attention kernel is compiled for (AttentionOp::can_implement
/// rejects the others, naming Dh), and its keys per shared-memory tile (AttentionTuning).
inline constexpr int kAttentionHeadDims[] = {64, 128};
inline constexpr int kAttentionKeyBlocks[] = {64, 128};

/// True if `v` is one of `set`.
template <std::size_t N>
constexpr bool contains(const int (&set)[N], int v) {
  for (int x : set)
    if (x == v) return true;
  return false;
}

/// True if `t` is one of `set`.
template <std::size_t N>
constexpr bool contains(const DType (&set)[N], DType t) {
  for (DType x : set)
    if (x == t) return true;
  return false;
}

// ============================================================================================
// 3. Compiled (weights, accumulation, output) combinations
// ============================================================================================

/// One combination of a kernel family: weights (tables.dtype), accumulation
/// (options.policy.accumulation), output (options.policy.output; the backward's grad_output).
struct TypeCombo {
  DType weights, accumulation, output;
  friend constexpr bool operator==(const TypeCombo&, const TypeCombo&) = default;
};

/// Pooled forward (kernels/pooled_gather_{f32,f16,bf16}.cu, one file per weights type): every
/// storage × accumulation × storage triple, each with int32/int64 indices and the vector and the
/// scalar path, 8 rows in flight, one thread group per bag. NONE pooling
/// (kernels/sequence.cu) has no accumulator: every (weights, output) pair of kStorageTypes.
inline constexpr TypeCombo kCompiledForward[] = {
    {DType::F32, DType::F32, DType::F32},   {DType::F32, DType::F32, DType::F16},
    {DType::F32, DType::F32, DType::BF16},  {DType::F32, DType::F64, DType::F32},
    {DType::F32, DType::F64, DType::F16},   {DType::F32, DType::F64, DType::BF16},
    {DType::F16, DType::F32, DType::F32},   {DType::F16, DType::F32, DType::F16},
    {DType::F16, DType::F32, DType::BF16},  {DType::F16, DType::F64, DType::F32},
    {DType::F16, DType::F64, DType::F16},   {DType::F16, DType::F64, DType::BF16},
    {DType::BF16, DType::F32, DType::F32},  {DType::BF16, DType::F32, DType::F16},
    {DType::BF16, DType::F32, DType::BF16}, {DType::BF16, DType::F64, DType::F32},
    {DType::BF16, DType::F64, DType::F16},  {DType::BF16, DType::F64, DType::BF16},
};

/// Pooled forward, the ForwardTuning variants (vector path, int32/int64 indices): the pipelined
/// persistent grid and 4 rows in flight (dispatch/tuning.h, PooledGather). Compiled for the
/// policies tbe-verify and tbe-bench run most (seed-default FP32: FP64 accumulation;
/// fbgemm-cuda FP32 and FP16: FP32 accumulation), FP32 output; other combinations run the
/// default instance (8 rows in flight, one group per bag) whatever the tuning asks.
inline constexpr TypeCombo kCompiledPooledTuning[] = {
    {DType::F32, DType::F64, DType::F32},
    {DType::F32, DType::F32, DType::F32},
    {DType::F16, DType::F32, DType::F32},
};

/// Backward run kernels (kernels/backward_short.cu, backward_long.cu; warp and block groups)
/// and the per-sample-weight gradient (kernels/backward_psw_grad.cu): FP32 weights with FP64
/// (seed-default) or FP32 (fbgemm-cuda) accumulation, FP16 / BF16 weights with FP32; each with
/// grad_output FP32 / FP16 / BF16.
inline constexpr TypeCombo kCompiledBackward[] = {
    {DType::F32, DType::F64, DType::F32},   {DType::F32, DType::F64, DType::F16},
    {DType::F32, DType::F64, DType::BF16},  {DType::F32, DType::F32, DType::F32},
    {DType::F32, DType::F32, DType::F16},   {DType::F32, DType::F32, DType::BF16},
    {DType::F16, DType::F32, DType::F32},   {DType::F16, DType::F32, DType::F16},
    {DType::F16, DType::F32, DType::BF16},  {DType::BF16, DType::F32, DType::F32},
    {DType::BF16, DType::F32, DType::F16},  {DType::BF16, DType::F32, DType::BF16},
};

/// Small-table histogram path (kernels/forward_small_table.cu, backward_small_table.cu): FP16
/// weights (the mma.m16n8k16 B operand), FP32 accumulation, output (the backward's grad_output)
/// FP32 / FP16 / BF16; each with int32/int64 indices.
inline constexpr TypeCombo kCompiledSmallTable[] = {
    {DType::F16, DType::F32, DType::F32},
    {DType::F16, DType::F32, DType::F16},
    {DType::F16, DType::F32, DType::BF16},
};

/// True if `c` is a row of `table`.
template <std::size_t N>
constexpr bool contains(const TypeCombo (&table)[N], TypeCombo c) {
  for (const TypeCombo& x : table)
    if (x == c) return true;
  return false;
}

/// "fp32/fp64/fp16" (weights/accumulation/output).
inline std::string to_string(TypeCombo c) {
  return tbe::to_string(c.weights) + "/" + tbe::to_string(c.accumulation) + "/" +
         tbe::to_string(c.output);
}

// ============================================================================================
// 4. Runtime -> compile time
// ============================================================================================

/// Throws InvalidArgument(argument, "<argument>: <t> is not supported by the CUDA backend").
[[noreturn]] inline void throw_unsupported(const char* argument, DType t) {
  throw InvalidArgument(argument, std::string(argument) + ": " + tbe::to_string(t) +
                                      " is not supported by the CUDA backend");
}

/// Throws InvalidArgument(argument, "<argument>: weights/accumulation/output <c> has no compiled
/// CUDA kernel (compiled: <every row of table>)").
[[noreturn]] inline void throw_not_compiled(const char* argument, TypeCombo c,
                                            std::span<const TypeCombo> table) {
  std::string compiled;
  for (const TypeCombo& x : table) compiled += (compiled.empty() ? "" : ", ") + to_string(x);
  throw InvalidArgument(argument, std::string(argument) + ": weights/accumulation/output " +
                                      to_string(c) + " has no compiled CUDA kernel (compiled: " +
                                      compiled + ")");
}

namespace impl {

template <const auto& kSet, std::size_t I, class R, class F>
R dtype_from(DType t, const char* argument, F& f) {
  if constexpr (I == std::size(kSet)) {
    throw_unsupported(argument, t);
  } else {
    if (t == kSet[I]) return f(DTypeTag<kSet[I]>{});
    return dtype_from<kSet, I + 1, R>(t, argument, f);
  }
}

template <const auto& kTable, std::size_t I, class R, class F>
R combo_from(TypeCombo c, const char* argument, F& f) {
  if constexpr (I == std::size(kTable)) {
    throw_not_compiled(argument, c, kTable);
  } else {
    if (c == kTable[I])
      return f(DTypeTag<kTable[I].weights>{}, DTypeTag<kTable[I].accumulation>{},
               DTypeTag<kTable[I].output>{});
    return combo_from<kTable, I + 1, R>(c, argument, f);
  }
}

}  // namespace impl

/// Calls f(DTypeTag<T>{}) for the element T of `kSet` equal to `t` and returns its result;
/// t not in kSet: throw_unsupported(argument, t). `argument` names what t came from, as
/// tbe::validate names it (e.g. "lookups.index_dtype").
///   dispatch_dtype<kIndexTypes>(t, "lookups.index_dtype", [&](auto idx) {
///     using Idx = storage_t<decltype(idx)::value>;  ...  });
template <const auto& kSet, class F>
decltype(auto) dispatch_dtype(DType t, const char* argument, F&& f) {
  using R = decltype(f(DTypeTag<kSet[0]>{}));
  return impl::dtype_from<kSet, 0, R>(t, argument, f);
}

/// Calls f(std::bool_constant<b>{}) and returns its result: a launch-uniform runtime flag as a
/// template argument, so each value gets its own kernel instance (and register allocation).
///   dispatch_flag(a.rows32, [&](auto rows32) { launch<decltype(rows32)::value>(a); });
template <class F>
decltype(auto) dispatch_flag(bool b, F&& f) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

/// dispatch_dtype over kStorageTypes (FP32, FP16, BF16).
template <class F>
decltype(auto) dispatch_float(DType t, const char* argument, F&& f) {
  return dispatch_dtype<kStorageTypes>(t, argument, f);
}
/// dispatch_dtype over kAccumulationTypes (FP32, FP64).
template <class F>
decltype(auto) dispatch_accumulation(DType t, const char* argument, F&& f) {
  return dispatch_dtype<kAccumulationTypes>(t, argument, f);
}
/// dispatch_dtype over kIndexTypes (int32, int64).
template <class F>
decltype(auto) dispatch_index(DType t, const char* argument, F&& f) {
  return dispatch_dtype<kIndexTypes>(t, argument, f);
}

/// Calls f(DTypeTag<W>{}, DTypeTag<Acc>{}, DTypeTag<Out>{}) for the row (W, Acc, Out) of
/// `kTable` equal to `c` and returns its result; c not in kTable:
/// throw_not_compiled(argument, c, kTable).
template <const auto& kTable, class F>
decltype(auto) dispatch_combo(TypeCombo c, const char* argument, F&& f) {
  using R = decltype(f(DTypeTag<kTable[0].weights>{}, DTypeTag<kTable[0].accumulation>{},
                       DTypeTag<kTable[0].output>{}));
  return impl::combo_from<kTable, 0, R>(c, argument, f);
}

/// The cuBLAS / cuBLASLt name of a storage type; t not in kStorageTypes:
/// throw_unsupported(argument, t).
inline cudaDataType_t data_type(DType t, const char* argument) {
  return dispatch_float(t, argument, [](auto tag) { return Storage<decltype(tag)::value>::data_type; });
}

}  // namespace tbe::cuda::dispatch
