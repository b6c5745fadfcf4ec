// Host side of the device-level IKBO attention operator: can_implement, plan (workspace layout,
// CUB sizes, the k_offsets upload), enqueue (map check, grouping, kernel; no sync), finish (map
// check verdict). Kernels: optimized/kernels/ikbo_attention_*.cu.
#include "tbe/cuda/ikbo_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/ikbo_attention_launch.h"
#include "src/ikbo_map_check.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/workspace.h"
#include "tbe/errors.h"

namespace tbe::cuda {

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

/// The wgmma kernel's TMA coordinates (int32) reach every key, its last tile included.
bool wgmma_keys_fit(std::int64_t total_keys) {
  return total_keys <= INT_MAX - tuning::AttentionWgmma::kKeyBlock;
}

/// Upper bound of the work items (the grid's x extent): every run adds at most one partial block
/// of 128 rows, and there are at most min(U, B) runs.
std::int64_t work_slots(const ikbo::AttentionProblem& p) {
  const std::int64_t rows = detail::kAttentionBlockRows;
  return (p.B * p.n_seed + rows - 1) / rows + std::min(p.U, p.B);
}

/// The current device runs sm_90a code (compute capability 9.0: H100, H200).
bool device_runs_sm90a(int* major, int* minor) {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev),
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, dev),
             "cudaDeviceGetAttribute");
  return *major == 9 && *minor == 0;
}

/// tuning.epilogue against the kernel that runs (`kernel`: requested, or Auto resolved): TmaStore
/// is an epilogue of the wgmma kernel only.
Status check_epilogue(AttentionEpilogue epilogue, AttentionKernel kernel) {
  if (epilogue == AttentionEpilogue::TmaStore && kernel == AttentionKernel::MmaSync)
    return Status::Invalid("tuning.epilogue",
                           "tuning.epilogue: tma-store is an epilogue of the wgmma kernel, the "
                           "kernel that runs is mma-sync");
  return Status::Ok();
}

/// The kernel limits of AttentionOp beyond ikbo::validate(p).
Status check_limits(const ikbo::AttentionProblem& p, const AttentionTuning& tuning) {
  const ikbo::IkboPolicy& pol = p.policy;
  if (!dispatch::contains(dispatch::kAttentionStorageTypes, pol.storage))
    return Status::Invalid("attention.policy.storage",
                           "attention.policy.storage: " + to_string(pol.storage) +
                               " is not supported by the CUDA attention kernel (fp16, bf16)");
  if (pol.accumulation != DType::F32)
    return Status::Invalid("attention.policy.accumulation",
                           "attention.policy.accumulation: " + to_string(pol.accumulation) +
                               " is not supported by the CUDA attention kernel (fp32)");
  if (p.Dh > INT_MAX || !dispatch::contains(dispatch::kAttentionHeadDims, static_cast<int>(p.Dh)))
    return Status::Invalid("attention.Dh", "attention.Dh: " + s(p.Dh) +
                                               " is not supported by the CUDA attention kernel "
                                               "(compiled for Dh = 64 and 128)");
  if (p.H > 65535)
    return Status::Invalid("attention.H", "attention.H: " + s(p.H) +
                                              " exceeds the CUDA attention kernel's limit 65535 "
                                              "(grid y)");
  if (p.B * p.n_seed > INT_MAX)
    return Status::Invalid("attention.B", "attention.B: B·n_seed = " + s(p.B) + "·" +
                                              s(p.n_seed) + " exceeds the CUDA attention "
                                              "kernel's limit " + s(INT_MAX) + " query rows");
  if (p.U > INT_MAX)
    return Status::Invalid("attention.U", "attention.U: " + s(p.U) +
                                              " exceeds the CUDA attention kernel's limit " +
                                              s(INT_MAX));
  if (work_slots(p) > INT_MAX)
    return Status::Invalid("attention.B",
                           "attention.B: ceil(B·n_seed / 128) + min(U, B) = " +
                               s(work_slots(p)) + " work items (B = " + s(p.B) + ", n_seed = " +
                               s(p.n_seed) + ", U = " + s(p.U) +
                               ") exceed the CUDA attention kernel's grid limit " + s(INT_MAX));
  if (tuning.kernel == AttentionKernel::Wgmma && !wgmma_keys_fit(p.total_keys()))
    return Status::Invalid("tuning.kernel",
                           "tuning.kernel: wgmma addresses keys with 32-bit TMA coordinates: " +
                               s(p.total_keys()) + " keys exceed its limit " +
                               s(INT_MAX - tuning::AttentionWgmma::kKeyBlock));
  if (!dispatch::contains(dispatch::kAttentionKeyBlocks, tuning.key_block))
    return Status::Invalid("tuning.key_block", "tuning.key_block: " + s(tuning.key_block) +
                                                   " must be 64 or 128");
  if (tuning.q_in_registers && tuning.key_block != 128)
    return Status::Invalid("tuning.q_in_registers",
                           "tuning.q_in_registers: true needs tuning.key_block = 128 (compiled "
                           "for it only), got key_block " + s(tuning.key_block));
  if (tuning.kv_stages != 2 && tuning.kv_stages != 3)
    return Status::Invalid("tuning.kv_stages",
                           "tuning.kv_stages: " + s(tuning.kv_stages) + " must be 2 or 3");
  if (tuning.kv_stages == 3 && tuning.key_block != 128)
    return Status::Invalid("tuning.kv_stages",
                           "tuning.kv_stages: 3 needs tuning.key_block = 128 (compiled for it "
                           "only), got key_block " + s(tuning.key_block));
  if (Status st = check_epilogue(tuning.epilogue, tuning.kernel); !st.ok()) return st;
  if (tuning.grouping == AttentionGroupingBuild::OneCta &&
      p.B > tuning::AttentionGroupingOneCta::kMaxCandidates)
    return Status::Invalid("tuning.grouping",
                           "tuning.grouping: one-cta sorts at most " +
                               s(tuning::AttentionGroupingOneCta::kMaxCandidates) +
                               " candidates in one CTA, B = " + s(p.B));
  return Status::Ok();
}

/// AttentionGroupingBuild::Auto resolved for B candidates.
AttentionGroupingBuild resolve_grouping(AttentionGroupingBuild requested, std::int64_t B) {
  if (requested != AttentionGroupingBuild::Auto) return requested;
  return B <= tuning::AttentionGroupingOneCta::kMaxCandidates ? AttentionGroupingBuild::OneCta
                                                              : AttentionGroupingBuild::DeviceWide;
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

}  // namespace

struct AttentionOp::Plan {
  ikbo::AttentionProblem p;
  AttentionTuning tuning;
  AttentionKernel kernel = AttentionKernel::MmaSync;  ///< tuning.kernel, Auto resolved
  std::int64_t total_keys = 0;  ///< rows of k and v (p.k_offsets is not kept)
  DeviceBuffer k_offsets;  ///< [U + 1] device copy (jagged)
  std::int64_t slots = 0;  ///< R = B
  int item_slots = 0;  ///< work_slots(p): detail::AttentionGrouping::work_slots
  int persistent_ctas = 0;  ///< the device's SMs (the wgmma kernel's persistent grid)
  bool one_cta_grouping = false;  ///< tuning.grouping resolved
  bool tma_store = false;  ///< tuning.epilogue resolved (wgmma only)
  float scale_log2 = 0.0f;
  // workspace layout (byte offsets)
  std::size_t ws_flag = 0, ws_keys = 0, ws_iota = 0, ws_sorted = 0, ws_run_user = 0,
              ws_run_count = 0, ws_run_start = 0, ws_blocks = 0, ws_work_end = 0, ws_num_runs = 0,
              ws_items = 0, ws_epilogue = 0, ws_temp = 0, temp_bytes = 0, ws_total = 0;
  std::vector<std::string> plan_paths;  ///< what the plan runs
  std::vector<std::string> paths;       ///< plan_paths, then the epilogues of the last finish()
  EpilogueBlocks epilogue;              ///< of the last finish()
  // last run
  cudaStream_t stream = nullptr;
  bool ran = false;
  unsigned long long* map_error = nullptr;
  const unsigned long long* epilogue_counts = nullptr;  ///< [2] (wgmma; B > 0)

  detail::AttentionGrouping grouping(void* ws) const {
    char* b = static_cast<char*>(ws);
    detail::AttentionGrouping g;
    g.cand_sorted = reinterpret_cast<std::int32_t*>(b + ws_sorted);
    g.run_user = reinterpret_cast<std::int32_t*>(b + ws_run_user);
    g.run_count = reinterpret_cast<std::int32_t*>(b + ws_run_count);
    g.run_start = reinterpret_cast<std::int32_t*>(b + ws_run_start);
    g.work_end = reinterpret_cast<std::int32_t*>(b + ws_work_end);
    g.num_runs = reinterpret_cast<std::int32_t*>(b + ws_num_runs);
    g.items = reinterpret_cast<detail::AttentionWorkItem*>(b + ws_items);
    g.epilogue_counts =
        kernel == AttentionKernel::Wgmma ? reinterpret_cast<unsigned long long*>(b + ws_epilogue)
                                         : nullptr;
    g.work_slots = item_slots;
    g.one_cta = one_cta_grouping;
    g.keys_sorted = reinterpret_cast<std::uint32_t*>(b + ws_keys);
    g.cand_iota = reinterpret_cast<std::int32_t*>(b + ws_iota);
    g.work_blocks = reinterpret_cast<std::int32_t*>(b + ws_blocks);
    g.temp = b + ws_temp;
    g.temp_bytes = temp_bytes;
    return g;
  }
};

Status AttentionOp::can_implement(const ikbo::AttentionProblem& p, const AttentionTuning& tuning) {
  if (Status st = ikbo::validate(p); !st.ok()) return st;
  return check_limits(p, tuning);
}

Status AttentionOp::can_implement(const ikbo::AttentionProblem& p,
                                  const std::int32_t* host_cand_to_user,
                                  const AttentionTuning& tuning) {
  if (Status st = ikbo::validate(p); !st.ok()) return st;
  if (Status st = ikbo::validate_map(std::span<const std::int32_t>(host_cand_to_user, p.B), p.U);
      !st.ok())
    return st;
  return check_limits(p, tuning);
}

namespace {
/// p, after AttentionOp::can_implement passed (else InvalidArgument).
const ikbo::AttentionProblem& implementable(const ikbo::AttentionProblem& p,
                                            const AttentionTuning& tuning) {
  throw_if_error(AttentionOp::can_implement(p, tuning));
  return p;
}
}  // namespace

AttentionOp::AttentionOp(const ikbo::AttentionProblem& p, const AttentionTuning& tuning)
    : AttentionOp(implementable(p, tuning), kValidated, tuning) {}

AttentionOp::AttentionOp(const ikbo::AttentionProblem& p, Validated, const AttentionTuning& tuning)
    : plan_(std::make_unique<Plan>()) {
  Plan& P = *plan_;
  P.p = p;
  P.p.k_offsets = {};  // the host span is not kept: the device copy below replaces it
  P.tuning = tuning;
  const double log2e = TBE_MUTANT_HOST(kAttnScaleLog2eMissing) ? 1.0 : 1.4426950408889634;
  P.scale_log2 = static_cast<float>(ikbo::attention_scale(p) * log2e);
  static_assert(detail::kAttentionBlockRows == tuning::AttentionMmaSync::kBlockRows);
  P.kernel = resolve_attention_kernel(tuning.kernel, p.total_keys());  // throws for Wgmma off sm_90a
  P.total_keys = p.total_keys();
  {
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&P.persistent_ctas, cudaDevAttrMultiProcessorCount, dev),
               "cudaDeviceGetAttribute");
  }
  throw_if_error(check_epilogue(tuning.epilogue, P.kernel));  // Auto resolved to mma.sync
  P.tma_store = P.kernel == AttentionKernel::Wgmma && tuning.epilogue != AttentionEpilogue::Registers;
  if (P.kernel == AttentionKernel::Wgmma)
    P.paths.push_back("attention.wgmma.dh" + s(p.Dh) + ".kb" +
                      s(tuning::AttentionWgmma::kKeyBlock) + ".stages" +
                      s(tuning::AttentionWgmma::stages(static_cast<int>(p.Dh))) +
                      (tuning.pingpong ? ".pingpong" : "") + (tuning.pipelined ? ".pipelined" : ""));
  else
    P.paths.push_back("attention.mma-sync.dh" + s(p.Dh) + ".kb" + s(tuning.key_block) +
                      (tuning.q_in_registers ? ".qreg" : "") +
                      (tuning.kv_stages == 3 ? ".stages3" : ""));
  P.one_cta_grouping = resolve_grouping(tuning.grouping, p.B) == AttentionGroupingBuild::OneCta;
  P.paths.push_back(P.one_cta_grouping ? "attention.grouping.one-cta"
                                       : "attention.grouping.cub-sort-rle");
  if (p.jagged()) {
    P.paths.push_back("attention.jagged");
    P.k_offsets = DeviceBuffer(p.k_offsets.data(), p.k_offsets.size_bytes());
  }
  WorkspaceLayout L;
  P.ws_flag = L.add(sizeof(unsigned long long));
  if (p.B > 0) {
    P.slots = p.B;
    const std::size_t b4 = static_cast<std::size_t>(p.B) * 4;
    P.ws_keys = L.add(b4);
    P.ws_iota = L.add(b4);
    P.ws_sorted = L.add(b4);
    P.ws_run_user = L.add(b4);
    P.ws_run_count = L.add(b4);
    P.ws_run_start = L.add(b4);
    P.ws_blocks = L.add(b4);
    P.ws_work_end = L.add(b4);
    P.ws_num_runs = L.add(4);
    P.item_slots = static_cast<int>(work_slots(p));  // <= INT_MAX: check_limits
    P.ws_items = L.add(static_cast<std::size_t>(P.item_slots) * sizeof(detail::AttentionWorkItem));
    P.ws_epilogue = L.add(2 * sizeof(unsigned long long));
    P.temp_bytes = detail::attention_grouping_temp_bytes(p.B, p.U);
    P.ws_temp = L.add(P.temp_bytes);
  }
  P.ws_total = L.total;
  P.plan_paths = P.paths;
}

AttentionOp::~AttentionOp() = default;
AttentionOp::AttentionOp(AttentionOp&&) noexcept = default;
AttentionOp& AttentionOp::operator=(AttentionOp&&) noexcept = default;

std::size_t AttentionOp::workspace_bytes() const { return plan_->ws_total; }
const std::vector<std::string>& AttentionOp::paths() const { return plan_->paths; }
AttentionKernel AttentionOp::kernel() const { return plan_->kernel; }
AttentionOp::EpilogueBlocks AttentionOp::epilogue_blocks() const { return plan_->epilogue; }

const char* to_string(AttentionEpilogue e) {
  switch (e) {
    case AttentionEpilogue::Auto: return "auto";
    case AttentionEpilogue::Registers: return "registers";
    case AttentionEpilogue::TmaStore: return "tma-store";
  }
  return "?";
}

const char* to_string(AttentionGroupingBuild g) {
  switch (g) {
    case AttentionGroupingBuild::Auto: return "auto";
    case AttentionGroupingBuild::OneCta: return "one-cta";
    case AttentionGroupingBuild::DeviceWide: return "device-wide";
  }
  return "?";
}

const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::Auto: return "auto";
    case AttentionKernel::MmaSync: return "mma-sync";
    case AttentionKernel::Wgmma: return "wgmma";
  }
  return "?";
}

AttentionKernel resolve_attention_kernel(AttentionKernel requested, std::int64_t total_keys) {
  int major = 0, minor = 0;
  const bool sm90a = device_runs_sm90a(&major, &minor);
  if (requested == AttentionKernel::Wgmma && !sm90a)
    throw InvalidArgument("tuning.kernel", "tuning.kernel: wgmma needs a device of compute "
                                           "capability 9.0 (compiled for sm_90a), this one is " +
                                               s(major) + "." + s(minor));
  if (requested != AttentionKernel::Auto) return requested;
  return sm90a && wgmma_keys_fit(total_keys) ? AttentionKernel::Wgmma : AttentionKernel::MmaSync;
}

void AttentionOp::run(void* d_out, void* d_workspace, cudaStream_t stream) {
  Plan& P = *plan_;
  const ikbo::AttentionProblem& p = P.p;
  if (p.B > 0) {  // before any launch
    for (auto [name, ptr] : {std::pair<const char*, const void*>{"out", d_out}, {"q", p.q},
                             {"k", p.k}, {"v", p.v}})
      if (!aligned16(ptr))
        throw InvalidArgument(name, std::string(name) + ": address " +
                                        s(static_cast<std::int64_t>(
                                            reinterpret_cast<std::uintptr_t>(ptr))) +
                                        " is not 16-byte aligned (the attention kernel's 16-byte "
                                        "copies; cudaMalloc gives 256)");
  }
  P.stream = stream;
  P.ran = true;
  P.map_error = reinterpret_cast<unsigned long long*>(static_cast<char*>(d_workspace) + P.ws_flag);
  P.epilogue_counts = nullptr;
  if (p.B <= 0) {
    cuda_check(cudaMemsetAsync(P.map_error, 0xff, sizeof(unsigned long long), stream),
               "attention: reset map flag");
    return;
  }
  const detail::AttentionGrouping g = P.grouping(d_workspace);
  detail::launch_attention_grouping(p.cand_to_user, p.B, p.U, p.n_seed,
                                    detail::kAttentionBlockRows, g, P.map_error, stream);
  detail::AttentionArgs a;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.out = d_out;
  a.k_offsets = static_cast<const std::int64_t*>(P.k_offsets.get());
  a.S = p.S;
  a.B = p.B;
  a.H = static_cast<int>(p.H);
  a.n_seed = static_cast<int>(p.n_seed);
  a.Dh = static_cast<int>(p.Dh);
  a.key_block = P.tuning.key_block;
  a.q_in_registers = P.tuning.q_in_registers;
  a.kv_stages = P.tuning.kv_stages;
  a.wgmma = P.kernel == AttentionKernel::Wgmma;
  a.pingpong = P.tuning.pingpong;
  a.pipelined = P.tuning.pipelined;
  a.tma_store = P.tma_store;
  a.epilogue_counts = g.epilogue_counts;
  P.epilogue_counts = g.epilogue_counts;
  a.total_keys = P.total_keys;
  a.scale_log2 = P.scale_log2;
  a.grouping = g;
  a.runs = static_cast<int>(P.slots);
  a.persistent_ctas = P.persistent_ctas;
  a.map_error = P.map_error;
  detail::launch_attention_forward(p.policy.storage, a, stream);
}

void AttentionOp::finish() {
  Plan& P = *plan_;
  if (!P.ran) throw DeviceError("AttentionOp::finish: run() was not called");
  cuda_check(cudaStreamSynchronize(P.stream), "attention (stream synchronize)");
  cuda_check(cudaGetLastError(), "attention (kernels)");
  detail::throw_if_map_error(P.map_error, P.p.cand_to_user, P.p.B, P.p.U, "attention");
  P.epilogue = {};
  P.paths = P.plan_paths;
  if (P.epilogue_counts != nullptr) {
    unsigned long long c[2] = {0, 0};
    cuda_check(cudaMemcpy(c, P.epilogue_counts, sizeof c, cudaMemcpyDeviceToHost),
               "attention: read the epilogue counters");
    P.epilogue = {c[0], c[1]};
    if (c[0] > 0) P.paths.push_back("attention.epilogue.tma-store");
    if (c[1] > 0) P.paths.push_back("attention.epilogue.registers");
  }
}

}  // namespace tbe::cuda
