// Seeded generators of IKBO cases (ikbo.h): candidate-to-user maps of every kind docs/ikbo.md asks
// kernels to accept, owning host buffers for LCE and attention calls, and the named shapes of
// docs/workloads.md ("ikbo-lce", "ikbo-fa"). Deterministic in (shape, policy, map kind,
// seed), independent of the thread count. Choices: docs/ikbo.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/ikbo.h"

namespace tbe::ikbo {

/// How candidates are assigned to users (cand_to_user [B], values in [0, U)).
enum class MapKind : std::uint8_t {
  Sorted,                  ///< contiguous runs: b -> floor(b·U / B) (every user gets B/U ± 1)
  Unsorted,                ///< the Sorted map in a seeded random order
  UsersWithoutCandidates,  ///< sorted runs over the users u % 3 != 0 only (needs U >= 2):
                           ///< users 0, 3, 6, ... get no candidate
  OneUser,                 ///< U = 1: every candidate maps to user 0 (U is forced to 1)
  UserPerCandidate,        ///< U = B: a seeded random permutation of [0, B) (U is forced to B)
};
/// Every MapKind, for loops in tests and tools.
inline constexpr MapKind kAllMapKinds[] = {MapKind::Sorted, MapKind::Unsorted,
                                           MapKind::UsersWithoutCandidates, MapKind::OneUser,
                                           MapKind::UserPerCandidate};
/// "sorted", "unsorted", "users-without-candidates", "one-user", "u-eq-b".
std::string to_string(MapKind k);
/// Parses the names above; throws InvalidArgument naming `what`, the text and the known names.
MapKind parse_map_kind(const std::string& s, const char* what = "map");

/// U actually used by `kind` for B candidates and a requested U (OneUser: 1; UserPerCandidate:
/// max(B, 1); else U). Throws InvalidArgument if U < 1, or U < 2 for UsersWithoutCandidates.
std::int64_t map_users(MapKind kind, std::int64_t B, std::int64_t U);
/// The map [B] for map_users(kind, B, U) users.
std::vector<std::int32_t> make_cand_to_user(MapKind kind, std::int64_t B, std::int64_t U,
                                            std::uint64_t seed);

/// LCE shape. U is the requested number of users (map_users may change it).
struct LceShape {
  std::int64_t B = 0, U = 1, M = 1, N = 1, K_c = 1, K_u = 0;
};
/// Named LCE shapes: "ikbo-lce" (M=433, N=256, K_u=1178, K_c=866, B=1024, U=15: 68 or 69
/// candidates per user with the Sorted map). `batch` > 0 overrides B (U kept). Throws
/// InvalidArgument for an unknown name.
LceShape named_lce_shape(const std::string& name, std::int64_t batch = 0);

/// An LCE call held on the host: tensors of policy.storage with values uniform in [-1, 1)
/// rounded (RNE) to the storage type, each tensor from its own seeded stream.
struct LceCase {
  LceShape shape;  ///< shape.U = the users actually used
  IkboPolicy policy;
  MapKind map = MapKind::Sorted;
  std::vector<std::byte> w_c, w_u, e_c, e_u;  ///< [M,K_c], [M,K_u], [B,K_c,N], [U,K_u,N]
  std::vector<std::int32_t> cand_to_user;     ///< [B]
  /// Non-owning view; valid while this object lives unchanged.
  LceProblem view() const;
  /// A zeroed output buffer [B, M, N] of policy.storage.
  std::vector<std::byte> make_output() const;
};
LceCase make_lce_case(const LceShape& shape, const IkboPolicy& policy, MapKind map,
                      std::uint64_t seed);

/// Attention shape. Dense: S keys per user. Jagged (jagged = true): per-user lengths `lengths`
/// [U] if given, else drawn uniform in [0, 2·S] with user 0 empty (an empty range is always
/// exercised when user 0 has candidates); S then only sets the mean.
struct AttentionShape {
  std::int64_t B = 0, U = 1, n_seed = 1, H = 1, Dh = 1, S = 1;
  bool jagged = false;
  std::vector<std::int64_t> lengths;
  double scale = 0.0;  ///< 0: 1/sqrt(Dh)
};
/// Named attention shapes: "ikbo-fa" (B=2048, H=2, n_seed=64, Dh=128, U = B/64 = 32: 64
/// candidates per user; S as given, default 512). `batch` > 0 overrides B (U = max(1, B/64)).
AttentionShape named_attention_shape(const std::string& name, std::int64_t S = 512,
                                     std::int64_t batch = 0);

/// An attention call held on the host (values uniform in [-1, 1) rounded to storage).
struct AttentionCase {
  AttentionShape shape;  ///< shape.U = the users actually used
  IkboPolicy policy;
  MapKind map = MapKind::Sorted;
  std::vector<std::byte> q, k, v;          ///< [B·n_seed, H, Dh], [keys, H, Dh] x2
  std::vector<std::int32_t> cand_to_user;  ///< [B]
  std::vector<std::int64_t> k_offsets;     ///< [U + 1] (jagged) or empty
  AttentionProblem view() const;
  std::vector<std::byte> make_output() const;  ///< zeroed [B·n_seed, H, Dh] of policy.storage
};
AttentionCase make_attention_case(const AttentionShape& shape, const IkboPolicy& policy,
                                  MapKind map, std::uint64_t seed);

}  // namespace tbe::ikbo
