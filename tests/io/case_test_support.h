// Shared helpers of the case-folder tests (tests/io): scratch folders, editing case.json in place,
// the rejection check every malformed-case test uses, the generator of small forward cases.
#pragma once

#include <catch2/catch.hpp>
#include <rapidcheck.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scratch_dir.h"
#include "tbe/errors.h"
#include "tbe/io/case_file.h"
#include "tbe/workloads.h"

namespace case_test {

namespace fs = std::filesystem;
using nlohmann::json;

/// A fresh scratch folder of this suite (tbe::test::scratch_dir).
inline fs::path scratch(const std::string& name) { return tbe::test::scratch_dir("test_io", name); }

inline json load_json(const fs::path& dir) {
  std::ifstream in(dir / "case.json");
  return json::parse(in);
}
inline void save_json(const fs::path& dir, const json& j) {
  std::ofstream out(dir / "case.json", std::ios::trunc);
  out << j.dump(1);
}

/// read(dir) must throw InvalidArgument naming `file`, a non-empty argument, and every part.
template <class Read>
void expect_rejected_by(Read&& read, const fs::path& dir, const std::string& file,
                        const std::vector<std::string>& parts) {
  try {
    (void)read(dir.string());
    FAIL("accepted a malformed case; expected an error mentioning " << parts.front());
  } catch (const tbe::InvalidArgument& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find(file) != std::string::npos);
    CHECK_FALSE(e.argument().empty());  // every error names its argument
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
  }
}

/// expect_rejected_by with the forward reader read_case.
inline void expect_rejected(const fs::path& dir, const std::string& file,
                            const std::vector<std::string>& parts) {
  expect_rejected_by([](const std::string& d) { return tbe::io::read_case(d); }, dir, file, parts);
}

/// A small generated forward case (tbe::generate) over every axis the format stores (inside a
/// RapidCheck property): every dtype, pooling, VBE, weighted, bounds mode, a bad index sometimes.
inline tbe::ForwardCase gen_small_case() {
  using namespace tbe;
  WorkloadSpec s;
  s.T = *rc::gen::inRange<std::int64_t>(1, 4);
  const int tables = *rc::gen::inRange(1, static_cast<int>(s.T) + 1);
  const PoolingMode pooling = *rc::gen::element(PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None);
  const std::int32_t D = *rc::gen::element(1, 3, 4, 8, 17);
  for (int t = 0; t < tables; ++t) {
    s.table_rows.push_back(*rc::gen::inRange<std::int64_t>(1, 40));
    s.table_dims.push_back(pooling == PoolingMode::None ? D : *rc::gen::element(1, 2, 5, 8, 16));
  }
  for (std::int64_t f = 0; f < s.T; ++f)
    s.feature_table_map.push_back(*rc::gen::inRange(0, tables));
  s.L = *rc::gen::inRange<std::int64_t>(0, 6);
  s.B = *rc::gen::inRange<std::int64_t>(0, 5);
  s.lengths = *rc::gen::element(LengthDistribution::Fixed, LengthDistribution::Uniform);
  s.length_spread = 2;
  s.distribution = *rc::gen::element(IndexDistribution::Uniform, IndexDistribution::Zipf);
  s.vbe_ranks = *rc::gen::element(0, 0, 1, 3);
  s.weighted = pooling != PoolingMode::None && *rc::gen::arbitrary<bool>();
  s.index_dtype = *rc::gen::element(DType::I32, DType::I64);
  const DType w = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
  const DType out = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
  const PolicyKind kind = *rc::gen::element(PolicyKind::SeedDefault, PolicyKind::FbgemmCuda);
  s.options.pooling = pooling;
  s.options.bounds_check = *rc::gen::element(BoundsCheckMode::Fatal, BoundsCheckMode::Warning,
                                             BoundsCheckMode::Ignore, BoundsCheckMode::None);
  s.options.policy = make_policy(kind, w, out);
  s.seed = *rc::gen::arbitrary<std::uint64_t>();
  ForwardCase c = generate(s);
  // A bad index or offset now and then (the format stores them as they are).
  // (not under NONE: a case that breaks NONE's promise of valid input is refused)
  if (!c.indices.empty() && s.options.bounds_check != BoundsCheckMode::None &&
      *rc::gen::arbitrary<bool>())
    c.indices[0] = -7;
  return c;
}

}  // namespace case_test
