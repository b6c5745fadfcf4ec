// tbe-fuzz's IKBO cases (ikbo_case.h).
#include "fuzz/ikbo_case.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <span>
#include <sstream>
#include <utility>

#include "fuzz/draw.h"
#include "tbe/errors.h"
#include "tbe/host_case.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/oracle/ikbo_oracle.h"

namespace tbe::fuzz {
namespace {

constexpr std::uint64_t kIkboStream = 0x696B626F00000000ULL;  // "ikbo" + i

// An edge value with probability 0.6, else uniform in [lo, hi].
std::int64_t edge_or(Rng& r, std::initializer_list<std::int64_t> edges, std::int64_t lo,
                     std::int64_t hi) {
  return chance(r, 0.6) ? pick<std::int64_t>(r, edges) : in_range(r, lo, hi);
}

void fail(Verdict& v, const std::string& check, const std::string& detail) {
  if (v.failed) return;
  v.failed = true;
  v.check = check;
  v.detail = detail;
}

// The generous output of an invalid call (its size may be meaningless): at most 2^20 elements.
std::int64_t clamp_numel(std::int64_t n) {
  return std::clamp<std::int64_t>(n, 1, std::int64_t{1} << 20);
}

// Shared by both operators: the expected error, the call, canaries, the oracle.
// `limits`: the backend's own prechecks (IkboBackend::lce_limits / attention_limits), which come
// after validate(p) and before the reference's map check: a backend that checks the map on the
// host names a bad map there, one that checks it only on the device names its limit first.
template <class Problem, class Call, class Enclose, class Judge>
IkboJudgement judge_call(const Problem& p, std::int64_t numel, Call call, Enclose enclose,
                         Judge judge_values, const Status& limits) {
  IkboJudgement j;
  Verdict& v = j.verdict;
  Status st = ikbo::validate(p);
  const Status map = st.ok() && p.cand_to_user != nullptr
                         ? ikbo::validate_map(std::span<const std::int32_t>(
                                                  p.cand_to_user, static_cast<std::size_t>(p.B)),
                                              p.U)
                         : Status::Ok();
  if (st.ok() && !limits.ok()) {
    st = limits;
    j.backend_limit = map.ok();  // a limit of a problem the reference accepts
  } else if (st.ok()) {
    st = map;
  }
  // nullopt on success, else the error as text
  std::string argument;
  auto run = [&](judge::PoisonedOutput& out) -> std::optional<std::string> {
    try {
      call(p, out.data());
      return std::nullopt;
    } catch (const InvalidArgument& e) {
      j.error = "invalid_argument";
      argument = e.argument();
      return "InvalidArgument[" + e.argument() + "]: " + e.what();
    } catch (const DeviceError& e) {
      j.error = "device_error";
      v.device_lost = true;
      return std::string("DeviceError: ") + e.what();
    } catch (const std::exception& e) {
      j.error = "device_error";
      return std::string("unexpected error: ") + e.what();
    }
  };
  if (!st.ok()) {
    j.expected_invalid = true;
    judge::PoisonedOutput out(p.policy.storage, clamp_numel(numel));
    const auto err = run(out);
    if (!err || *j.error != "invalid_argument")
      fail(v, v.device_lost ? "device" : "invalid_argument",
           "expected InvalidArgument[" + st.argument + "]: " + st.message + "; got " +
               (err ? *err : std::string("no error")));
    else if (argument != st.argument)
      fail(v, "invalid_argument", "expected InvalidArgument[" + st.argument + "], got " + *err);
    else if (!out.untouched())
      fail(v, "invalid_argument.untouched", "the output was written before InvalidArgument");
    return j;
  }
  oracle::IkboEnclosures enc;
  try {
    enc = enclose(p);
  } catch (const std::exception& e) {
    fail(v, "reference", std::string("the reference threw: ") + e.what());
    return j;
  }
  judge::PoisonedOutput out(p.policy.storage, numel);
  if (const auto err = run(out)) {
    fail(v, v.device_lost ? "device" : "error", *err);
    return j;
  }
  j.output = out.output();
  if (!out.canary_intact()) fail(v, "canary", "the backend wrote past the end of the output");
  std::vector<double> values(static_cast<std::size_t>(numel));
  for (std::int64_t i = 0; i < numel; ++i)
    values[i] = load_as_double(p.policy.storage, out.data(), i);
  try {
    const oracle::CheckReport rep = judge_values(p, enc, values);
    if (!rep.passed()) fail(v, "oracle", rep.summary());
  } catch (const std::exception& e) {
    fail(v, "oracle", std::string("the oracle threw: ") + e.what());
  }
  return j;
}

}  // namespace

const char* to_string(BadMap b) {
  switch (b) {
    case BadMap::None: return "none";
    case BadMap::ValueU: return "value-u";
    case BadMap::Negative: return "negative";
  }
  return "?";
}

IkboFuzzCase generate_ikbo_case(std::uint64_t seed, std::uint64_t case_index, bool attention,
                                Shapes shapes) {
  Rng r(seed, kIkboStream + case_index);
  IkboFuzzCase c;
  c.attention = attention;
  const std::int64_t budget = shapes == Shapes::Small ? (std::int64_t{1} << 20)
                                                      : (std::int64_t{1} << 26);  // MACs
  const double us = r.uniform();
  c.policy.storage = us < 0.4 ? DType::F16 : us < 0.8 ? DType::BF16 : DType::F32;
  c.policy.accumulation = DType::F32;
  c.policy.lce_rounding = pick<ikbo::LceRounding>(
      r, {ikbo::LceRounding::Published, ikbo::LceRounding::RoundOnce,
          ikbo::LceRounding::UserRounded});
  c.map = ikbo::kAllMapKinds[r.uniform_int(std::size(ikbo::kAllMapKinds))];
  c.data_seed = r.next_u64();
  // the CUDA build's select_ikbo_backends: 5 LceStages and l2-chunked with small chunks and
  // the device map check
  c.stage = static_cast<int>(r.uniform_int(6));
  const std::int64_t U = in_range(r, 2, 9);
  if (!attention) {
    ikbo::LceShape& s = c.lce;
    s.B = edge_or(r, {0, 1, 2, 16, 17}, 0, 48);
    s.U = U;
    s.M = edge_or(r, {1, 16, 63, 64, 65}, 1, 96);
    s.N = edge_or(r, {1, 8, 255, 256, 257}, 1, 300);
    s.K_c = edge_or(r, {1, 7, 8, 9, 63, 64, 65}, 1, 200);
    s.K_u = chance(r, 0.2) ? 0 : edge_or(r, {1, 7, 8, 9, 64}, 1, 200);
    while (s.B > 1 && s.B * s.M * s.N * (s.K_c + s.K_u) > budget) s.B /= 2;
    while (s.N > 1 && std::max<std::int64_t>(s.B, 1) * s.M * s.N * (s.K_c + s.K_u) > budget)
      s.N /= 2;
  } else {
    ikbo::AttentionShape& s = c.att;
    s.B = edge_or(r, {0, 1, 2, 9}, 0, 12);
    s.U = U;
    s.n_seed = pick<std::int64_t>(r, {1, 2, 4, 7, 64});
    s.H = in_range(r, 1, 3);
    // mostly what the CUDA kernel runs (Dh 64 / 128); the rest checks its documented limit
    s.Dh = chance(r, 0.75) ? pick<std::int64_t>(r, {64, 128}) : pick<std::int64_t>(r, {1, 3, 8, 16, 33});
    s.S = edge_or(r, {1, 63, 64, 65, 128}, 1, 200);
    s.jagged = chance(r, 0.5);
    s.scale = chance(r, 0.7) ? 0.0 : pick<double>(r, {0.5, 2.0, 0.01});
    auto cost = [&] {
      return std::max<std::int64_t>(s.B, 1) * s.n_seed * s.H * s.Dh * (s.jagged ? 2 : 1) * s.S;
    };
    while (s.B > 1 && cost() > budget) s.B /= 2;
    while (s.S > 1 && cost() > budget) s.S /= 2;
    while (s.n_seed > 1 && cost() > budget) s.n_seed /= 2;
  }
  const std::int64_t B = attention ? c.att.B : c.lce.B;
  if (B > 0 && chance(r, 0.05)) {
    c.bad = chance(r, 0.5) ? BadMap::ValueU : BadMap::Negative;
    c.bad_at = r.uniform_int(B);
  }
  return c;
}

BuiltIkbo build(const IkboFuzzCase& c) {
  BuiltIkbo b;
  std::vector<std::int32_t>* map = nullptr;
  std::int64_t U = 0;
  if (!c.attention) {
    b.lce = ikbo::make_lce_case(c.lce, c.policy, c.map, c.data_seed);
    map = &b.lce->cand_to_user;
    U = b.lce->shape.U;
  } else {
    b.attention = ikbo::make_attention_case(c.att, c.policy, c.map, c.data_seed);
    map = &b.attention->cand_to_user;
    U = b.attention->shape.U;
  }
  if (c.bad != BadMap::None && c.bad_at < static_cast<std::int64_t>(map->size()))
    (*map)[c.bad_at] = c.bad == BadMap::ValueU ? static_cast<std::int32_t>(U) : -1;
  return b;
}

std::string describe(const IkboFuzzCase& c) {
  std::ostringstream os;
  if (!c.attention) {
    const ikbo::LceShape& s = c.lce;
    os << "lce B=" << s.B << " U=" << s.U << " M=" << s.M << " N=" << s.N << " K_c=" << s.K_c
       << " K_u=" << s.K_u;
  } else {
    const ikbo::AttentionShape& s = c.att;
    os << "attention B=" << s.B << " U=" << s.U << " n_seed=" << s.n_seed << " H=" << s.H
       << " Dh=" << s.Dh << " S=" << s.S << (s.jagged ? " jagged" : " dense")
       << " scale=" << s.scale;
  }
  os << " " << ikbo::to_string(c.policy) << " map=" << ikbo::to_string(c.map)
     << " stage=" << c.stage;
  if (c.bad != BadMap::None) os << " bad=" << to_string(c.bad) << "@" << c.bad_at;
  return os.str();
}

IkboJudgement judge_lce_call(ikbo::IkboBackend& dev, const ikbo::LceProblem& p) {
  const std::int64_t numel = p.B * p.M * p.N;
  return judge_call(
      p, numel, [&](const ikbo::LceProblem& q, void* out) { dev.lce(q, out); },
      [](const ikbo::LceProblem& q) { return oracle::compute_lce_enclosures(q); },
      [](const ikbo::LceProblem& q, const oracle::IkboEnclosures& e,
         const std::vector<double>& v) { return oracle::judge_lce(q, e, v); },
      dev.lce_limits(p));
}

IkboJudgement judge_attention_call(ikbo::IkboBackend& dev, const ikbo::AttentionProblem& p) {
  const std::int64_t numel = p.B * p.n_seed * p.H * p.Dh;
  return judge_call(
      p, numel, [&](const ikbo::AttentionProblem& q, void* out) { dev.attention(q, out); },
      [](const ikbo::AttentionProblem& q) { return oracle::compute_attention_enclosures(q); },
      [](const ikbo::AttentionProblem& q, const oracle::IkboEnclosures& e,
         const std::vector<double>& v) { return oracle::judge_attention(q, e, v); },
      dev.attention_limits(p));
}

IkboJudgement judge_ikbo_case(ikbo::IkboBackend& dev, const IkboFuzzCase& c) {
  BuiltIkbo b;
  try {
    b = build(c);
  } catch (const std::exception& e) {
    IkboJudgement j;
    fail(j.verdict, "generator", std::string("could not build the case: ") + e.what());
    return j;
  }
  return b.lce ? judge_lce_call(dev, b.lce->view()) : judge_attention_call(dev, b.attention->view());
}

IkboShrinkResult shrink_ikbo(const IkboFuzzCase& failing, const Verdict& first,
                             const std::function<Verdict(const IkboFuzzCase&)>& judge,
                             const ShrinkLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  IkboShrinkResult r;
  r.shrunk = failing;
  r.verdict = first;
  auto budget = [&] {
    return r.runs < limits.max_runs &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
               limits.max_seconds;
  };
  auto try_accept = [&](IkboFuzzCase cand) {
    if (!budget()) return false;
    ++r.runs;
    Verdict v = judge(cand);
    if (!v.failed || v.device_lost || v.check != first.check) return false;
    r.shrunk = std::move(cand);
    r.verdict = std::move(v);
    ++r.steps;
    return true;
  };
  // A field of the shape tried at 1 (or `floor`), then halved, while that keeps the failure.
  auto shrink_field = [&](auto get, std::int64_t floor) {
    for (bool again = true; again && budget();) {
      again = false;
      const std::int64_t v = get(r.shrunk);
      for (std::int64_t nv : {floor, v / 2, v - 1}) {
        if (nv < floor || nv >= v) continue;
        IkboFuzzCase cand = r.shrunk;
        get(cand) = nv;
        const std::int64_t B = cand.attention ? cand.att.B : cand.lce.B;
        if (cand.bad != BadMap::None) {
          if (B == 0) continue;
          cand.bad_at = std::min(cand.bad_at, B - 1);
        }
        if (try_accept(std::move(cand))) {
          again = true;
          break;
        }
      }
    }
  };
  for (bool progress = true; progress && budget();) {
    const int before = r.steps;
    if (r.shrunk.map != ikbo::MapKind::Sorted) {
      IkboFuzzCase cand = r.shrunk;
      cand.map = ikbo::MapKind::Sorted;
      try_accept(std::move(cand));
    }
    if (!r.shrunk.attention) {
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.B; }, 0);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.U; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.M; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.N; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.K_c; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.lce.K_u; }, 0);
    } else {
      if (r.shrunk.att.jagged) {
        IkboFuzzCase cand = r.shrunk;
        cand.att.jagged = false;
        try_accept(std::move(cand));
      }
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.B; }, 0);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.U; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.n_seed; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.H; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.Dh; }, 1);
      shrink_field([](IkboFuzzCase& c) -> std::int64_t& { return c.att.S; }, 1);
    }
    progress = r.steps > before;
  }
  return r;
}

}  // namespace tbe::fuzz
