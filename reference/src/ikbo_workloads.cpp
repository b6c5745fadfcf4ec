// IKBO case generators (ikbo_workloads.h). Every tensor is filled in chunks of 2^16 elements,
// chunk c of tensor t drawing from its own stream Rng(seed, key(t, c)), so the values do not
// depend on the number of OpenMP threads.
#include "tbe/ikbo_workloads.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "ikbo_internal.h"
#include "tbe/errors.h"
#include "tbe/precision.h"
#include "tbe/rng.h"

namespace tbe::ikbo {

namespace {

using detail::s;

// Stream ids: tensor id in the high bits, chunk index in the low 40 bits.
enum class Tensor : std::uint64_t { Map = 1, WC, WU, EC, EU, Q, K, V, Lengths };
std::uint64_t stream_id(Tensor t, std::uint64_t chunk = 0) {
  return (static_cast<std::uint64_t>(t) << 40) + chunk;
}

constexpr std::int64_t kChunk = 1 << 16;

/// n values uniform in [-1, 1), rounded to `st`, as a byte buffer of `st`.
std::vector<std::byte> uniform_tensor(DType st, std::int64_t n, std::uint64_t seed, Tensor t) {
  std::vector<std::byte> out(static_cast<std::size_t>(n) * dtype_size(st));
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (tbe::detail::worth_parallel(n))
  for (std::int64_t c = 0; c < chunks; ++c) {
    Rng rng(seed, stream_id(t, static_cast<std::uint64_t>(c)));
    const std::int64_t end = std::min(n, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < end; ++i)
      detail::store_rounded(st, out.data(), i, 2.0 * rng.uniform() - 1.0);
  }
  return out;
}

/// b -> floor(b·n / B) over n groups: contiguous runs of B/n or B/n + 1.
std::int32_t even_group(std::int64_t b, std::int64_t B, std::int64_t n) {
  return static_cast<std::int32_t>((b * n) / B);
}

void shuffle(std::vector<std::int32_t>& v, Rng& rng) {
  for (std::int64_t i = static_cast<std::int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[i], v[rng.uniform_int(i + 1)]);
}

}  // namespace

std::string to_string(MapKind k) {
  switch (k) {
    case MapKind::Sorted: return "sorted";
    case MapKind::Unsorted: return "unsorted";
    case MapKind::UsersWithoutCandidates: return "users-without-candidates";
    case MapKind::OneUser: return "one-user";
    case MapKind::UserPerCandidate: return "u-eq-b";
  }
  return "map(" + std::to_string(static_cast<int>(k)) + ")";
}

MapKind parse_map_kind(const std::string& text, const char* what) {
  for (MapKind k : kAllMapKinds)
    if (to_string(k) == text) return k;
  throw InvalidArgument(what, std::string(what) + ": unknown map kind '" + text +
                                  "' (known: sorted, unsorted, users-without-candidates, "
                                  "one-user, u-eq-b)");
}

std::int64_t map_users(MapKind kind, std::int64_t B, std::int64_t U) {
  if (B < 0) throw InvalidArgument("B", "B: " + s(B) + " must be >= 0");
  switch (kind) {
    case MapKind::OneUser: return 1;
    case MapKind::UserPerCandidate: return std::max<std::int64_t>(B, 1);
    case MapKind::UsersWithoutCandidates:
      if (U < 2)
        throw InvalidArgument("U", "U: " + s(U) + " must be >= 2 for map kind " + to_string(kind));
      return U;
    default:
      if (U < 1) throw InvalidArgument("U", "U: " + s(U) + " must be >= 1");
      return U;
  }
}

std::vector<std::int32_t> make_cand_to_user(MapKind kind, std::int64_t B, std::int64_t U_req,
                                            std::uint64_t seed) {
  const std::int64_t U = map_users(kind, B, U_req);
  if (U > std::numeric_limits<std::int32_t>::max())
    throw InvalidArgument("U", "U: " + s(U) + " exceeds the int32 map limit " +
                                   s(std::numeric_limits<std::int32_t>::max()));
  std::vector<std::int32_t> map(static_cast<std::size_t>(B));
  Rng rng(seed, stream_id(Tensor::Map));
  switch (kind) {
    case MapKind::Sorted:
    case MapKind::OneUser:
      for (std::int64_t b = 0; b < B; ++b) map[b] = even_group(b, B, U);
      break;
    case MapKind::Unsorted:
      for (std::int64_t b = 0; b < B; ++b) map[b] = even_group(b, B, U);
      shuffle(map, rng);
      break;
    case MapKind::UsersWithoutCandidates: {
      std::vector<std::int32_t> with;  // users u % 3 != 0
      for (std::int64_t u = 0; u < U; ++u)
        if (u % 3 != 0) with.push_back(static_cast<std::int32_t>(u));
      const auto n = static_cast<std::int64_t>(with.size());
      for (std::int64_t b = 0; b < B; ++b) map[b] = with[even_group(b, B, n)];
      break;
    }
    case MapKind::UserPerCandidate:
      std::iota(map.begin(), map.end(), 0);
      shuffle(map, rng);
      break;
  }
  return map;
}

LceShape named_lce_shape(const std::string& name, std::int64_t batch) {
  if (name != "ikbo-lce")
    throw InvalidArgument("name", "name: unknown LCE shape '" + name + "' (known: ikbo-lce)");
  LceShape sh{1024, 15, 433, 256, 866, 1178};
  if (batch > 0) sh.B = batch;
  return sh;
}

LceProblem LceCase::view() const {
  LceProblem p;
  p.B = shape.B;
  p.U = shape.U;
  p.M = shape.M;
  p.N = shape.N;
  p.K_c = shape.K_c;
  p.K_u = shape.K_u;
  p.w_c = w_c.empty() ? nullptr : w_c.data();
  p.w_u = w_u.empty() ? nullptr : w_u.data();
  p.e_c = e_c.empty() ? nullptr : e_c.data();
  p.e_u = e_u.empty() ? nullptr : e_u.data();
  p.cand_to_user = cand_to_user.empty() ? nullptr : cand_to_user.data();
  p.policy = policy;
  return p;
}

std::vector<std::byte> LceCase::make_output() const {
  return std::vector<std::byte>(
      static_cast<std::size_t>(shape.B * shape.M * shape.N) * dtype_size(policy.storage));
}

LceCase make_lce_case(const LceShape& shape, const IkboPolicy& policy, MapKind map,
                      std::uint64_t seed) {
  LceCase c;
  c.shape = shape;
  c.shape.U = map_users(map, shape.B, shape.U);
  c.policy = policy;
  c.map = map;
  LceProblem probe = c.view();  // shape and policy checks before allocating anything
  probe.w_c = probe.w_u = probe.e_c = probe.e_u = &c;
  probe.cand_to_user = reinterpret_cast<const std::int32_t*>(&c);
  throw_if_error(validate(probe));
  const DType st = policy.storage;
  const LceShape& sh = c.shape;
  c.cand_to_user = make_cand_to_user(map, sh.B, sh.U, seed);
  c.w_c = uniform_tensor(st, sh.M * sh.K_c, seed, Tensor::WC);
  c.w_u = uniform_tensor(st, sh.M * sh.K_u, seed, Tensor::WU);
  c.e_c = uniform_tensor(st, sh.B * sh.K_c * sh.N, seed, Tensor::EC);
  c.e_u = uniform_tensor(st, sh.U * sh.K_u * sh.N, seed, Tensor::EU);
  return c;
}

AttentionShape named_attention_shape(const std::string& name, std::int64_t S, std::int64_t batch) {
  if (name != "ikbo-fa")
    throw InvalidArgument("name", "name: unknown attention shape '" + name + "' (known: ikbo-fa)");
  AttentionShape sh;
  sh.B = batch > 0 ? batch : 2048;
  sh.U = std::max<std::int64_t>(1, sh.B / 64);
  sh.n_seed = 64;
  sh.H = 2;
  sh.Dh = 128;
  sh.S = S;
  return sh;
}

AttentionProblem AttentionCase::view() const {
  AttentionProblem p;
  p.B = shape.B;
  p.U = shape.U;
  p.n_seed = shape.n_seed;
  p.H = shape.H;
  p.Dh = shape.Dh;
  p.S = shape.S;
  p.k_offsets = k_offsets;
  p.q = q.empty() ? nullptr : q.data();
  p.k = k.empty() ? nullptr : k.data();
  p.v = v.empty() ? nullptr : v.data();
  p.cand_to_user = cand_to_user.empty() ? nullptr : cand_to_user.data();
  p.scale = shape.scale;
  p.policy = policy;
  return p;
}

std::vector<std::byte> AttentionCase::make_output() const {
  return std::vector<std::byte>(
      static_cast<std::size_t>(shape.B * shape.n_seed * shape.H * shape.Dh) *
      dtype_size(policy.storage));
}

AttentionCase make_attention_case(const AttentionShape& shape, const IkboPolicy& policy,
                                  MapKind map, std::uint64_t seed) {
  AttentionCase c;
  c.shape = shape;
  c.shape.U = map_users(map, shape.B, shape.U);
  c.policy = policy;
  c.map = map;
  const std::int64_t U = c.shape.U;
  if (shape.jagged) {
    std::vector<std::int64_t> lengths = shape.lengths;
    if (lengths.empty()) {
      if (shape.S < 0) throw InvalidArgument("S", "S: " + s(shape.S) + " must be >= 0");
      Rng rng(seed, stream_id(Tensor::Lengths));
      lengths.resize(static_cast<std::size_t>(U));
      for (std::int64_t u = 0; u < U; ++u) lengths[u] = u == 0 ? 0 : rng.uniform_int(2 * shape.S + 1);
    }
    if (static_cast<std::int64_t>(lengths.size()) != U)
      throw InvalidArgument("lengths", "lengths: " + s(static_cast<std::int64_t>(lengths.size())) +
                                           " entries != U = " + s(U));
    c.k_offsets.assign(static_cast<std::size_t>(U + 1), 0);
    for (std::int64_t u = 0; u < U; ++u) {
      if (lengths[u] < 0)
        throw InvalidArgument("lengths[" + s(u) + "]",
                              "lengths[" + s(u) + "]: " + s(lengths[u]) + " must be >= 0");
      c.k_offsets[u + 1] = c.k_offsets[u] + lengths[u];
    }
  }
  AttentionProblem probe = c.view();  // shape, scale and offsets checks before allocating
  probe.q = probe.k = probe.v = &c;
  probe.cand_to_user = reinterpret_cast<const std::int32_t*>(&c);
  throw_if_error(validate(probe));
  const DType st = policy.storage;
  const std::int64_t HD = c.shape.H * c.shape.Dh;
  c.cand_to_user = make_cand_to_user(map, c.shape.B, U, seed);
  c.q = uniform_tensor(st, c.shape.B * c.shape.n_seed * HD, seed, Tensor::Q);
  c.k = uniform_tensor(st, probe.total_keys() * HD, seed, Tensor::K);
  c.v = uniform_tensor(st, probe.total_keys() * HD, seed, Tensor::V);
  return c;
}

}  // namespace tbe::ikbo
