// Backend selection (library tbe_backends): the one layer above tbe_reference (CPU) and
// tbe_optimized (CUDA, when this build has it) that knows which backends exist. The reference
// only declares the interfaces (tbe/backend.h: Backend, make_reference_backend; tbe/ikbo.h:
// ikbo::IkboBackend, ikbo::make_reference_ikbo_backend); tools, benches and tests that let the
// user choose a backend include this header and link tbe_backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tbe/backend.h"
#include "tbe/ikbo.h"

namespace tbe {

/// Which backend to run. Auto: CUDA when this build has it and a device is visible, else the CPU
/// reference. Cpu: the CPU reference (OpenMP). Cuda: the CUDA backend or a DeviceError.
enum class BackendKind : std::uint8_t { Auto, Cpu, Cuda };

/// The TBE backend of `kind`. Cpu: make_reference_backend(). Cuda: tbe::cuda::make_cuda_backend()
/// (tbe/cuda/backend.h); throws DeviceError saying why when this build has no CUDA backend or no
/// device is visible. Auto: Cuda when cuda_available(), else Cpu (never throws DeviceError).
std::unique_ptr<Backend> select_backend(BackendKind kind = BackendKind::Auto);

/// The IKBO backend of `kind` (tbe/ikbo.h). Cpu: ikbo::make_reference_ikbo_backend(). Cuda:
/// tbe::cuda::make_cuda_ikbo_backend() (tbe/cuda/ikbo_backend.h); throws DeviceError saying why
/// when this build has no CUDA backend or no device is visible. Auto: Cuda when that works, else
/// Cpu.
std::unique_ptr<ikbo::IkboBackend> select_ikbo_backend(BackendKind kind = BackendKind::Auto);

/// Candidates per L2 chunk of select_ikbo_backends' l2-chunked variant (ikbo-lce at B = 16:
/// four chunks, the last partial).
inline constexpr std::int64_t kVerifyChunkCandidates = 5;

/// Every IKBO implementation of `kind`, for suites that must exercise each: Cuda: one
/// tbe::cuda::make_cuda_ikbo_backend per LCE stage (tbe::cuda::kLceStages order: decomposed,
/// padded-k, fused-epilogue, l2-chunked, lt-epilogue; the default attention kernel and the host
/// map check in each), then l2-chunked with kVerifyChunkCandidates candidates per chunk and the
/// map checked on the device only (a small batch crosses chunk boundaries; the device map pass is
/// the only one a bad map meets) and the mma.sync attention kernel (AttentionKernel::MmaSync; the
/// others run Auto, the wgmma kernel on compute capability 9.0); Cpu: the reference alone; Auto: Cuda when that works, else
/// Cpu. Errors as select_ikbo_backend.
std::vector<std::unique_ptr<ikbo::IkboBackend>> select_ikbo_backends(
    BackendKind kind = BackendKind::Auto);

/// Free memory of the CUDA device in bytes (cudaMemGetInfo of device 0); 0 when this build has
/// no CUDA backend or no device is visible.
std::size_t cuda_free_bytes();

/// True if this build has CUDA (configured with TBE_CUDA=ON or AUTO and nvcc found) and at least
/// one device is visible.
bool cuda_available();

}  // namespace tbe
