// tbe-verify's IKBO rows: operator {lce, attention} x storage {fp16, bf16} (+ fp32 when the
// backend under test is the CPU reference) x candidate-to-user map kind {sorted, unsorted,
// users-without-candidates, one-user, u-eq-b}, each run on an IkboBackend and judged by the IKBO
// oracle (oracle/include/tbe/oracle/ikbo_oracle.h), plus canaries and error agreement. With no
// device backend the device rows are skipped and CPU self-check rows run the reference instead.
// Shapes: ikbo-lce and ikbo-fa (docs/workloads.md) scaled down in B (docs/ikbo.md "tbe-verify rows").
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tbe/ikbo.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/judge/row.h"

namespace tbe::judge {

enum class IkboOp : std::uint8_t { Lce, Attention };
std::string to_string(IkboOp op);  ///< "lce", "attention"

/// One IKBO row's axis values.
struct IkboRowSpec {
  IkboOp op = IkboOp::Lce;
  DType storage = DType::F16;
  ikbo::MapKind map = ikbo::MapKind::Sorted;
  /// Attention only: per-user key lengths in [0, 2S] with user 0 empty (k_offsets [U + 1]),
  /// instead of S keys for every user (dense [U·S, H, Dh])
  bool jagged = false;
};
/// "ikbo op=lce,dtype=fp16,map=sorted" (jagged attention rows: ",keys=jagged" appended)
std::string ikbo_label(const IkboRowSpec& s);

struct IkboConfig {
  std::int64_t lce_batch = 16;        ///< ikbo-lce (M=433, N=256, K_c=866, K_u=1178, U=15) at this B
  std::optional<ikbo::LceShape> lce_shape;  ///< (tests) this LCE shape instead of ikbo-lce
  std::int64_t attention_batch = 32;  ///< ikbo-fa (n_seed=64, H=2, Dh=128) at this B ...
  std::int64_t attention_users = 8;   ///< ... with this U (B/U candidates per user) ...
  /// ... and S keys per user (jagged rows: mean S): 3 key tiles of 128, more than the wgmma
  /// kernel's 2-stage K/V ring holds (up to 5 on jagged rows), so a stage is refilled
  std::int64_t attention_S = 320;
  std::uint64_t seed = 1;
  /// Backend under test (not owned); nullptr: device rows skipped with `skip_reason`, and the
  /// reference runs as CPU self-check rows.
  ikbo::IkboBackend* device = nullptr;
  /// (not owned) Backends the LCE device rows run on, one row each (tbe-verify: one per LCE
  /// stage, select_ikbo_backends); empty: `device`. Ignored when `device` is null.
  std::vector<ikbo::IkboBackend*> lce_devices;
  /// (not owned) Backends the attention device rows run on, one row each (tbe-verify: the first
  /// and the last of select_ikbo_backends: the map checked on the host, and on the device only);
  /// empty: `device`. Ignored when `device` is null.
  std::vector<ikbo::IkboBackend*> attention_devices;
  std::string skip_reason;
  bool include_fp32 = false;  ///< fp32 storage rows (the reference supports them)
  ikbo::LceRounding lce_rounding = ikbo::LceRounding::RoundOnce;
  /// A failing row is written to `save_failures_dir`/ikbo-<op>-<dtype>-<map> as an ikbo-lce /
  /// ikbo-attention case folder (the row's problem, the backend's output or error as `recorded`,
  /// expect pass; a failing error.bad-map check is not replayable from a folder: a map value out
  /// of range is refused by the reader); "" writes nothing. At most save_failures_max rows, counted
  /// by the caller (run_ikbo_row's `saved_failures`).
  std::string save_failures_dir;
  std::int64_t save_failures_max = 4;
};

/// The row specs in print order: lce rows then attention rows; dtype-major, then map kind, then
/// (attention) dense before jagged keys: every map kind meets both key layouts.
std::vector<IkboRowSpec> ikbo_row_specs(bool include_fp32);

struct IkboRowResult {
  IkboRowSpec spec;
  std::string label;
  std::string shape;            ///< e.g. "B=16 U=15 M=433 N=256 K_c=866 K_u=1178"
  std::vector<RowResult> rows;  ///< device row, and a self-check row when no device
  Verdict verdict() const;      ///< Failed if any row failed, Passed if any passed, else Skipped
  /// Case folder the failing row was written to ("" if none), and why it was not written.
  std::string saved_case;
  std::string save_note;
};

/// Runs one row (device, or self-check when cfg.device is null). The row's paths are the
/// backend's name, then its last_paths() of the judged call (the kernels that ran).
/// Deterministic in cfg.seed and the label. Checks: "oracle" (the output against the enclosures), "canary" (output poisoned
/// before the call, sentinels past the end unchanged), "error.bad-map" (a map value = U throws
/// InvalidArgument naming cand_to_user[i] and leaves the output untouched). A failing row is
/// saved as a case folder (IkboConfig::save_failures_dir) when `saved_failures` (in/out: the
/// folders this run wrote so far) is below cfg.save_failures_max; nullptr saves none.
IkboRowResult run_ikbo_row(const IkboConfig& cfg, const IkboRowSpec& spec,
                           std::int64_t* saved_failures = nullptr);

struct IkboTotals {
  std::int64_t passed = 0, failed = 0, skipped = 0;
};
IkboTotals count_ikbo_rows(const std::vector<IkboRowResult>& results);

/// The IKBO table (one line per row and target), failures with the oracle's worst element, and
/// the count line "ikbo rows: P passed, F failed, S skipped".
void print_ikbo_rows(std::ostream& os, const IkboConfig& cfg,
                     const std::vector<IkboRowResult>& results);
nlohmann::json ikbo_rows_json(const IkboConfig& cfg, const std::vector<IkboRowResult>& results);

}  // namespace tbe::judge
