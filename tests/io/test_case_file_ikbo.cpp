// IKBO case folders (ikbo-lce, ikbo-attention): write -> read round trips over generated cases
// (every map kind, policy, K_u = 0, B = 0, dense and jagged), the named workload shapes with the
// reference's output recorded, and rejection of malformed folders naming the file and the key.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <functional>
#include <string>
#include <vector>

#include "case_test_support.h"
#include "ikbo_test_support.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/io/npy.h"

using namespace tbe;
using namespace tbe::io;
using namespace case_test;

namespace {

IkboRecordedOutput record_lce(const ikbo::LceCase& c) {
  IkboRecordedOutput r;
  r.implementation = "cpu-reference";
  r.output = c.make_output();
  ikbo::lce_reference(c.view(), r.output->data());
  return r;
}

IkboRecordedOutput record_attention(const ikbo::AttentionCase& c) {
  IkboRecordedOutput r;
  r.implementation = "cpu-reference";
  r.output = c.make_output();
  ikbo::attention_reference(c.view(), r.output->data());
  return r;
}

/// A recording drawn by RapidCheck: none, the reference's output, or an error.
template <class Record>
std::optional<IkboRecordedOutput> gen_recorded(Record&& record) {
  switch (*rc::gen::inRange(0, 3)) {
    case 1: return record();
    case 2: return IkboRecordedOutput{"somebody else", std::nullopt, std::string("device_error")};
    default: return std::nullopt;
  }
}

// Bases of the rejection tests: B = 5, U = 3, M = 2, N = 3, K_c = 4, K_u = 2, FP16.
LceCaseFile base_lce() {
  LceCaseFile c;
  c.name = "base-lce";
  c.provenance = "test_case_file_ikbo";
  c.seed = 3;
  const ikbo::IkboPolicy pol{DType::F16, DType::F32, ikbo::LceRounding::UserRounded};
  c.problem = ikbo::make_lce_case(ikbo::LceShape{5, 3, 2, 3, 4, 2}, pol, ikbo::MapKind::Unsorted, 17);
  c.recorded = record_lce(c.problem);
  return c;
}

// B = 4, U = 3, n_seed = 2, H = 2, Dh = 3, jagged lengths 0, 2, 5 (k_offsets 0 0 2 7), BF16.
AttentionCaseFile base_attention() {
  AttentionCaseFile c;
  c.name = "base-attention";
  c.provenance = "test_case_file_ikbo";
  c.seed = 4;
  ikbo::AttentionShape sh;
  sh.B = 4;
  sh.U = 3;
  sh.n_seed = 2;
  sh.H = 2;
  sh.Dh = 3;
  sh.S = 2;
  sh.jagged = true;
  sh.lengths = {0, 2, 5};
  sh.scale = 0.25;
  const ikbo::IkboPolicy pol{DType::BF16, DType::F32, ikbo::LceRounding::RoundOnce};
  c.problem = ikbo::make_attention_case(sh, pol, ikbo::MapKind::Sorted, 21);
  c.recorded = record_attention(c.problem);
  return c;
}

template <class T>
void overwrite(const fs::path& file, DType t, std::vector<std::int64_t> shape, std::vector<T> values) {
  write_npy(file.string(), make_npy(t, std::move(shape), values.data()));
}

struct Mutation {
  const char* what;
  std::function<void(json&, const fs::path&)> apply;
  std::string file;  // the file the message must name
  std::vector<std::string> parts;
};

template <class CaseT, class Read>
void run_mutations(const fs::path& dir, const CaseT& good, Read&& read, const std::vector<Mutation>& mutations) {
  for (const Mutation& m : mutations) {
    DYNAMIC_SECTION(m.what) {
      write_case(dir.string(), good);
      json j = load_json(dir);
      m.apply(j, dir);
      save_json(dir, j);
      if (m.parts.empty()) {
        CHECK_NOTHROW(read(dir.string()));
      } else {
        expect_rejected_by(read, dir, m.file, m.parts);
      }
    }
  }
}

auto read_lce = [](const std::string& d) { return read_lce_case(d); };
auto read_attention = [](const std::string& d) { return read_attention_case(d); };

}  // namespace

TEST_CASE("ikbo-lce case files: write -> read gives the same case, bitwise", "[io][case][ikbo]") {
  const fs::path dir = scratch("lce_rt");
  rc::prop("round trip over generated LCE cases", [&] {
    const ikbo_test::LceSpec spec = *ikbo_test::gen_lce_spec();
    LceCaseFile c;
    c.name = "lce";
    c.provenance = "rapidcheck";
    c.seed = spec.seed;
    c.problem = ikbo_test::build(spec);
    c.recorded = gen_recorded([&] { return record_lce(c.problem); });
    if (*rc::gen::arbitrary<bool>()) c.expect = Expectation{"fail", "docs/ikbo.md LCE: published rounding"};
    write_case(dir.string(), c);
    RC_ASSERT(bitwise_equal(read_lce_case(dir.string()), c));
  });
  fs::remove_all(dir);
}

TEST_CASE("ikbo-attention case files: write -> read gives the same case, bitwise", "[io][case][ikbo]") {
  const fs::path dir = scratch("att_rt");
  rc::prop("round trip over generated attention cases", [&] {
    const ikbo_test::AttentionSpec spec = *ikbo_test::gen_attention_spec();
    AttentionCaseFile c;
    c.name = "attention";
    c.provenance = "rapidcheck";
    c.seed = spec.seed;
    c.problem = ikbo_test::build(spec);
    // The folder stores k_offsets; a read case has the lengths they give.
    if (c.problem.shape.jagged && c.problem.shape.lengths.empty())
      for (std::size_t u = 0; u + 1 < c.problem.k_offsets.size(); ++u)
        c.problem.shape.lengths.push_back(c.problem.k_offsets[u + 1] - c.problem.k_offsets[u]);
    c.recorded = gen_recorded([&] { return record_attention(c.problem); });
    write_case(dir.string(), c);
    RC_ASSERT(bitwise_equal(read_attention_case(dir.string()), c));
  });
  fs::remove_all(dir);
}

TEST_CASE("ikbo case files: the named workloads, recorded by the reference", "[io][case][ikbo]") {
  const fs::path dir = scratch("ikbo_named");
  SECTION("ikbo-lce at B = 4 (M=433, N=256, K_c=866, K_u=1178, U=15): files in their shapes") {
    LceCaseFile c;
    c.name = "ikbo-lce-b4";
    c.provenance = "make_lce_case(named_lce_shape(\"ikbo-lce\", 4), seed 9)";
    c.problem = ikbo::make_lce_case(ikbo::named_lce_shape("ikbo-lce", 4),
                                    ikbo::IkboPolicy{DType::BF16, DType::F32, ikbo::LceRounding::Published},
                                    ikbo::MapKind::Sorted, 9);
    c.recorded = record_lce(c.problem);
    write_case(dir.string(), c);
    CHECK(read_npy((dir / "e_u.npy").string()).shape == std::vector<std::int64_t>{15, 1178, 256});
    CHECK(read_npy((dir / "w_c.npy").string()).shape == std::vector<std::int64_t>{433, 866});
    CHECK(read_npy((dir / "cand_to_user.npy").string()).descr == "<i4");
    CHECK(read_npy((dir / "output.npy").string()).shape == std::vector<std::int64_t>{4, 433, 256});
    CHECK(load_json(dir)["policy"]["lce_rounding"] == "published");
    CHECK(read_case_operator(dir.string()) == CaseOperator::IkboLce);
    CHECK(bitwise_equal(read_lce_case(dir.string()), c));
  }
  SECTION("ikbo-fa at B = 64, S = 16, jagged, FP16") {
    AttentionCaseFile c;
    c.name = "ikbo-fa-b64";
    c.problem = ikbo::make_attention_case(
        [] {
          ikbo::AttentionShape sh = ikbo::named_attention_shape("ikbo-fa", 16, 64);
          sh.jagged = true;
          return sh;
        }(),
        ikbo::IkboPolicy{DType::F16, DType::F32, ikbo::LceRounding::RoundOnce}, ikbo::MapKind::OneUser, 5);
    c.recorded = record_attention(c.problem);
    write_case(dir.string(), c);
    CHECK(read_npy((dir / "q.npy").string()).shape == std::vector<std::int64_t>{64 * 64, 2, 128});
    CHECK(read_npy((dir / "k_offsets.npy").string()).shape == std::vector<std::int64_t>{2});
    const AttentionCaseFile back = read_attention_case(dir.string());
    CHECK(back.problem.shape.lengths == std::vector<std::int64_t>{0});  // user 0 is empty
    CHECK(back.problem.k_offsets == c.problem.k_offsets);
    CHECK(back.recorded->output == c.recorded->output);
    c.problem.shape.lengths = back.problem.shape.lengths;
    CHECK(bitwise_equal(back, c));
  }
  SECTION("dense attention: no k_offsets.npy; a stale one is removed") {
    AttentionCaseFile c = base_attention();
    write_case(dir.string(), c);
    REQUIRE(fs::exists(dir / "k_offsets.npy"));
    c.problem = ikbo::make_attention_case(ikbo_test::dense_shape(3, 2, 1, 1, 4, 5), c.problem.policy,
                                          ikbo::MapKind::Unsorted, 8);
    c.recorded.reset();
    write_case(dir.string(), c);
    CHECK_FALSE(fs::exists(dir / "k_offsets.npy"));
    CHECK_FALSE(fs::exists(dir / "output.npy"));
    CHECK(bitwise_equal(read_attention_case(dir.string()), c));
  }
  SECTION("the writer refuses in-memory cases it cannot store") {
    LceCaseFile l = base_lce();
    l.problem.e_c.pop_back();
    CHECK_THROWS_WITH(write_case(dir.string(), l), Catch::Contains("e_c"));
    AttentionCaseFile a = base_attention();
    a.problem.shape.lengths = {1, 1, 5};
    CHECK_THROWS_WITH(write_case(dir.string(), a), Catch::Contains("shape.lengths"));
    a = base_attention();
    a.problem.k_offsets.clear();
    CHECK_THROWS_WITH(write_case(dir.string(), a), Catch::Contains("k_offsets"));
    a = base_attention();
    a.recorded->error = "device_error";
    CHECK_THROWS_WITH(write_case(dir.string(), a), Catch::Contains("together with error"));
  }
  fs::remove_all(dir);
}

TEST_CASE("ikbo-lce case files: malformed folders are rejected naming the key", "[io][case][ikbo][untrusted]") {
  const fs::path dir = scratch("lce_bad");
  const std::vector<Mutation> mutations = {
      {"unknown key", [](json& j, const fs::path&) { j["bias"] = nullptr; }, "case.json", {"case.json[\"bias\"]", "unknown key"}},
      {"unknown shape key", [](json& j, const fs::path&) { j["shape"]["K"] = 3; }, "case.json", {"shape[\"K\"]", "unknown key"}},
      {"missing shape key", [](json& j, const fs::path&) { j["shape"].erase("M"); }, "case.json", {"shape.M", "missing required key"}},
      {"missing map", [](json& j, const fs::path&) { j.erase("map"); }, "case.json", {"map", "missing required key"}},
      {"wrong type", [](json& j, const fs::path&) { j["shape"]["N"] = 3.0; }, "case.json", {"shape.N", "expected an integer", "3.0"}},
      {"M zero", [](json& j, const fs::path&) { j["shape"]["M"] = 0; }, "case.json", {"shape.M", "outside [1"}},
      {"U zero", [](json& j, const fs::path&) { j["shape"]["U"] = 0; }, "case.json", {"shape.U", "outside [1"}},
      {"K_u negative", [](json& j, const fs::path&) { j["shape"]["K_u"] = -1; }, "case.json", {"shape.K_u", "outside [0"}},
      {"unknown map kind", [](json& j, const fs::path&) { j["map"] = "random"; }, "case.json", {"map", "random"}},
      {"integer storage", [](json& j, const fs::path&) { j["policy"]["storage"] = "int32"; }, "case.json",
       {"policy.storage", "not a storage type"}},
      {"unknown storage", [](json& j, const fs::path&) { j["policy"]["storage"] = "fp8"; }, "case.json", {"policy.storage", "fp8"}},
      {"fp16 accumulation", [](json& j, const fs::path&) { j["policy"]["accumulation"] = "fp16"; }, "case.json",
       {"policy.accumulation", "fp16", "fp32, fp64"}},
      {"unknown rounding", [](json& j, const fs::path&) { j["policy"]["lce_rounding"] = "twice"; }, "case.json",
       {"policy.lce_rounding", "twice"}},
      {"unknown policy key", [](json& j, const fs::path&) { j["policy"]["output"] = "fp16"; }, "case.json",
       {"policy[\"output\"]", "unknown key"}},
      {"element count overflow", [](json& j, const fs::path&) { j["shape"]["K_c"] = std::int64_t{1} << 40; j["shape"]["N"] = std::int64_t{1} << 30; },
       "case.json", {"shape.B", "B·K_c·N", "overflows int64"}},
      {"tensor over the payload limit", [](json& j, const fs::path&) { j["shape"]["K_c"] = std::int64_t{1} << 31; },
       "w_c.npy", {"w_c", "exceed the .npy payload limit"}},
      {"transposed weights", [](json&, const fs::path& d) { overwrite<std::uint16_t>(d / "w_c.npy", DType::F16, {4, 2}, std::vector<std::uint16_t>(8)); },
       "w_c.npy", {"w_c", "shape (4, 2) != [M, K_c] = (2, 4)"}},
      {"flat candidate embeddings", [](json&, const fs::path& d) { overwrite<std::uint16_t>(d / "e_c.npy", DType::F16, {60}, std::vector<std::uint16_t>(60)); },
       "e_c.npy", {"e_c", "[B, K_c, N] = (5, 4, 3)"}},
      {"user embeddings of the wrong dtype", [](json&, const fs::path& d) { overwrite<float>(d / "e_u.npy", DType::F32, {3, 2, 3}, std::vector<float>(18)); },
       "e_u.npy", {"e_u", "<f4", "<f2", "policy.storage fp16"}},
      {"missing tensor", [](json&, const fs::path& d) { fs::remove(d / "w_u.npy"); }, "w_u.npy", {"missing"}},
      {"map value out of range", [](json&, const fs::path& d) { overwrite<std::int32_t>(d / "cand_to_user.npy", DType::I32, {5}, {0, 1, 3, 2, 1}); },
       "cand_to_user.npy", {"cand_to_user[2]", "3 outside [0, U=3)"}},
      {"negative map value", [](json&, const fs::path& d) { overwrite<std::int32_t>(d / "cand_to_user.npy", DType::I32, {5}, {0, -1, 0, 0, 0}); },
       "cand_to_user.npy", {"cand_to_user[1]", "-1 outside"}},
      {"int64 map", [](json&, const fs::path& d) { overwrite<std::int64_t>(d / "cand_to_user.npy", DType::I64, {5}, {0, 0, 0, 0, 0}); },
       "cand_to_user.npy", {"cand_to_user", "<i8", "<i4"}},
      {"map of the wrong length", [](json&, const fs::path& d) { overwrite<std::int32_t>(d / "cand_to_user.npy", DType::I32, {4}, {0, 0, 0, 0}); },
       "cand_to_user.npy", {"cand_to_user", "[B] = (5,)"}},
      {"recorded output of the wrong size", [](json&, const fs::path& d) { overwrite<std::uint16_t>(d / "output.npy", DType::F16, {29}, std::vector<std::uint16_t>(29)); },
       "output.npy", {"recorded.output", "29", "B·M·N = 30"}},
      {"recorded output flat is fine", [](json&, const fs::path& d) { overwrite<std::uint16_t>(d / "output.npy", DType::F16, {30}, std::vector<std::uint16_t>(30)); },
       "", {}},
      {"recorded bounds_check error (no bounds check in IKBO)", [](json& j, const fs::path&) { j["recorded"]["output"] = nullptr; j["recorded"]["error"] = "bounds_check"; },
       "case.json", {"recorded.error", "bounds_check", "invalid_argument, device_error"}},
      {"recorded nothing", [](json& j, const fs::path&) { j["recorded"]["output"] = nullptr; }, "case.json", {"recorded.output", "null"}},
      {"recorded path traversal", [](json& j, const fs::path&) { j["recorded"]["output"] = "/etc/passwd"; }, "case.json",
       {"recorded.output", "/etc/passwd"}},
      {"recorded unknown key", [](json& j, const fs::path&) { j["recorded"]["output_dtype"] = "fp16"; }, "case.json",
       {"recorded[\"output_dtype\"]", "unknown key"}},
      {"expect verdict", [](json& j, const fs::path&) { j["expect"] = {{"verdict", "maybe"}}; }, "case.json", {"expect.verdict", "maybe"}},
      {"wrong operator", [](json& j, const fs::path&) { j["operator"] = "ikbo-attention"; }, "case.json",
       {"operator", "'ikbo-attention' is not 'ikbo-lce'"}},
      {"unknown operator", [](json& j, const fs::path&) { j["operator"] = "ikbo-gemm"; }, "case.json",
       {"operator", "ikbo-gemm", "allowed: forward, backward, ikbo-lce, ikbo-attention"}},
      {"K_u = 0 with empty user tensors", [](json& j, const fs::path& d) {
         j["shape"]["K_u"] = 0;
         overwrite<std::uint16_t>(d / "w_u.npy", DType::F16, {2, 0}, {});
         overwrite<std::uint16_t>(d / "e_u.npy", DType::F16, {3, 0, 3}, {});
       }, "", {}},
  };
  run_mutations(dir, base_lce(), read_lce, mutations);
  fs::remove_all(dir);
}

TEST_CASE("ikbo-attention case files: malformed folders are rejected naming the key", "[io][case][ikbo][untrusted]") {
  const fs::path dir = scratch("att_bad");
  const std::vector<Mutation> mutations = {
      {"unknown shape key", [](json& j, const fs::path&) { j["shape"]["causal"] = true; }, "case.json", {"shape[\"causal\"]", "unknown key"}},
      {"missing jagged", [](json& j, const fs::path&) { j["shape"].erase("jagged"); }, "case.json", {"shape.jagged", "missing"}},
      {"Dh zero", [](json& j, const fs::path&) { j["shape"]["Dh"] = 0; }, "case.json", {"shape.Dh", "outside [1"}},
      {"scale negative", [](json& j, const fs::path&) { j["shape"]["scale"] = -0.5; }, "case.json", {"shape.scale", "-0.5"}},
      {"scale a string", [](json& j, const fs::path&) { j["shape"]["scale"] = "1/sqrt(Dh)"; }, "case.json",
       {"shape.scale", "expected a number"}},
      {"k_offsets not monotone", [](json&, const fs::path& d) { overwrite<std::int64_t>(d / "k_offsets.npy", DType::I64, {4}, {0, 3, 2, 7}); },
       "k_offsets.npy", {"k_offsets[2]", "2 < k_offsets[1] = 3", "non-decreasing"}},
      {"k_offsets not from 0", [](json&, const fs::path& d) { overwrite<std::int64_t>(d / "k_offsets.npy", DType::I64, {4}, {1, 1, 3, 7}); },
       "k_offsets.npy", {"k_offsets[0]", "must be 0"}},
      {"k_offsets of the wrong length", [](json&, const fs::path& d) { overwrite<std::int64_t>(d / "k_offsets.npy", DType::I64, {3}, {0, 0, 2}); },
       "k_offsets.npy", {"k_offsets", "[U + 1] = (4,)"}},
      {"k_offsets int32", [](json&, const fs::path& d) { overwrite<std::int32_t>(d / "k_offsets.npy", DType::I32, {4}, {0, 0, 2, 7}); },
       "k_offsets.npy", {"k_offsets", "<i4", "<i8"}},
      {"k_offsets missing", [](json&, const fs::path& d) { fs::remove(d / "k_offsets.npy"); }, "k_offsets.npy", {"missing"}},
      {"keys against k_offsets", [](json&, const fs::path& d) { overwrite<std::int64_t>(d / "k_offsets.npy", DType::I64, {4}, {0, 0, 2, 6}); },
       "k.npy", {"k", "[keys, H, Dh] = (6, 2, 3)"}},
      {"dense with S = 0", [](json& j, const fs::path&) { j["shape"]["jagged"] = false; j["shape"]["S"] = 0; }, "case.json",
       {"shape.S", "0 must be >= 1 in dense mode"}},
      {"dense with S < 0: the dense rule", [](json& j, const fs::path&) { j["shape"]["jagged"] = false; j["shape"]["S"] = -3; },
       "case.json", {"shape.S", "-3 must be >= 1 in dense mode (shape.jagged is false)"}},
      {"jagged with S < 0", [](json& j, const fs::path&) { j["shape"]["S"] = -3; }, "case.json",
       {"shape.S", "value -3 is outside [0, "}},
      {"dense with k_offsets.npy present", [](json& j, const fs::path&) { j["shape"]["jagged"] = false; }, "k_offsets.npy",
       {"k_offsets", "shape.jagged is false"}},
      {"dense keys U·S against k.npy", [](json& j, const fs::path& d) { j["shape"]["jagged"] = false; fs::remove(d / "k_offsets.npy"); },
       "k.npy", {"k", "[keys, H, Dh] = (6, 2, 3)"}},
      {"queries of the wrong shape", [](json& j, const fs::path&) { j["shape"]["n_seed"] = 3; }, "q.npy",
       {"q", "[B·n_seed, H, Dh] = (12, 2, 3)"}},
      {"map value out of range", [](json&, const fs::path& d) { overwrite<std::int32_t>(d / "cand_to_user.npy", DType::I32, {4}, {0, 1, 2, 5}); },
       "cand_to_user.npy", {"cand_to_user[3]", "5 outside [0, U=3)"}},
      {"keys over the payload limit", [](json& j, const fs::path& d) { j["shape"]["jagged"] = false; j["shape"]["S"] = std::int64_t{1} << 40; fs::remove(d / "k_offsets.npy"); },
       "k.npy", {"k", "exceed the .npy payload limit"}},
      {"U·S overflow", [](json& j, const fs::path& d) { j["shape"]["jagged"] = false; j["shape"]["S"] = std::int64_t{1} << 62; fs::remove(d / "k_offsets.npy"); },
       "case.json", {"shape.S", "U·S", "overflows int64"}},
      {"recorded output of the wrong size", [](json&, const fs::path& d) { overwrite<std::uint16_t>(d / "output.npy", DType::BF16, {47}, std::vector<std::uint16_t>(47)); },
       "output.npy", {"recorded.output", "47", "B·n_seed·H·Dh = 48"}},
      {"an LCE key", [](json& j, const fs::path&) { j["shape"]["K_c"] = 3; }, "case.json", {"shape[\"K_c\"]", "unknown key"}},
      {"scale 0 means 1/sqrt(Dh)", [](json& j, const fs::path&) { j["shape"]["scale"] = 0; }, "", {}},
  };
  run_mutations(dir, base_attention(), read_attention, mutations);
  fs::remove_all(dir);
}
