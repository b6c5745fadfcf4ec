// Case folders: write -> read round trips over generated cases (every dtype, pooling, VBE,
// weighted, bounds mode, with and without recorded outputs), and rejection of malformed folders
// with the file and the key named.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "case_test_support.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/io/case_file.h"
#include "tbe/io/npy.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::io;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace case_test;

namespace {

bool same_case(const ForwardCase& a, const ForwardCase& b) {
  return a.weights_dtype == b.weights_dtype && a.weights == b.weights && a.rows == b.rows &&
         a.dims == b.dims && a.table_offsets == b.table_offsets &&
         a.feature_table_map == b.feature_table_map && a.index_dtype == b.index_dtype &&
         a.indices == b.indices && a.offsets == b.offsets &&
         a.per_sample_weights.size() == b.per_sample_weights.size() &&
         std::equal(a.per_sample_weights.begin(), a.per_sample_weights.end(),
                    b.per_sample_weights.begin(),
                    [](float x, float y) { return std::memcmp(&x, &y, 4) == 0; }) &&
         a.batch_size == b.batch_size && a.vbe_batch_sizes == b.vbe_batch_sizes &&
         a.vbe_ranks == b.vbe_ranks && a.options.pooling == b.options.pooling &&
         a.options.bounds_check == b.options.bounds_check && a.options.policy == b.options.policy;
}

// A valid case written by hand (the base of the rejection tests).
CaseFile base_case() {
  WorkloadSpec s;
  s.T = 2;
  s.E = 10;
  s.D = 4;
  s.L = 3;
  s.B = 3;
  s.weighted = true;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  CaseFile c;
  c.name = "base";
  c.provenance = "test_case_file";
  c.seed = 5;
  c.problem = generate(s);
  RecordedOutputs r;
  r.implementation = "cpu-reference";
  r.output_dtype = DType::F32;
  const ForwardProblem p = c.problem.view();
  r.output.resize(static_cast<std::size_t>(make_output_layout(p).numel) * 4);
  r.warnings = forward_reference(p, r.output.data()).warnings;
  c.recorded = r;
  return c;
}

}  // namespace

TEST_CASE("case files: write -> read gives the same case", "[io][case]") {
  const fs::path dir = scratch("rt");
  rc::prop("round trip over generated cases", [&] {
    CaseFile c;
    c.name = *rc::gen::element<std::string>("a", "fuzz/0001", "with \"quotes\" and \xc3\xa9");
    c.provenance = "rapidcheck";
    c.seed = *rc::gen::arbitrary<std::uint64_t>();
    c.problem = gen_small_case();
    const ForwardProblem p = c.problem.view();
    const int recorded = *rc::gen::inRange(0, 3);  // none, output, error
    if (recorded == 1) {
      RecordedOutputs r;
      r.implementation = "cpu-reference";
      r.output_dtype = p.options.policy.output;
      r.output.assign(static_cast<std::size_t>(make_output_layout(p).numel) * dtype_size(r.output_dtype),
                      std::byte{0});
      try {
        r.warnings = forward_reference(p, r.output.data()).warnings;
      } catch (const BoundsCheckError&) {
        r.output.clear();
        r.error = "bounds_check";
      }
      c.recorded = r;
    } else if (recorded == 2) {
      RecordedOutputs r;
      r.implementation = "somebody else";
      r.output_dtype = p.options.policy.output;
      r.error = "invalid_argument";
      c.recorded = r;
    }
    if (*rc::gen::arbitrary<bool>()) c.expect = Expectation{"fail", "semantics.md: MEAN of an empty bag"};
    write_case(dir.string(), c);
    const CaseFile back = read_case(dir.string());
    RC_ASSERT(back.name == c.name);
    RC_ASSERT(back.provenance == c.provenance);
    RC_ASSERT(back.seed == c.seed);
    RC_ASSERT(same_case(back.problem, c.problem));
    RC_ASSERT(bitwise_equal(back, c));
    RC_ASSERT(back.recorded.has_value() == c.recorded.has_value());
    if (c.recorded) {
      RC_ASSERT(back.recorded->implementation == c.recorded->implementation);
      RC_ASSERT(back.recorded->output_dtype == c.recorded->output_dtype);
      RC_ASSERT(back.recorded->output == c.recorded->output);
      RC_ASSERT(back.recorded->warnings == c.recorded->warnings);
      RC_ASSERT(back.recorded->error == c.recorded->error);
    }
    RC_ASSERT(back.expect.has_value() == c.expect.has_value());
    if (c.expect) {
      RC_ASSERT(back.expect->verdict == c.expect->verdict);
      RC_ASSERT(back.expect->rule == c.expect->rule);
    }
  });
  fs::remove_all(dir);
}

TEST_CASE("case files: bf16 is stored as <u2 raw bits, indices in their own width", "[io][case]") {
  const fs::path dir = scratch("bf16");
  CaseFile c = base_case();
  c.problem.weights_dtype = DType::BF16;
  c.problem.options.policy = make_policy(PolicyKind::FbgemmCuda, DType::BF16, DType::F32);
  c.problem.index_dtype = DType::I32;
  write_case(dir.string(), c);
  CHECK(read_npy((dir / "weights.npy").string()).descr == "<u2");
  CHECK(read_npy((dir / "indices.npy").string()).descr == "<i4");
  CHECK(read_npy((dir / "offsets.npy").string()).descr == "<i4");
  CHECK(read_npy((dir / "per_sample_weights.npy").string()).descr == "<f4");
  CHECK(read_npy((dir / "output.npy").string()).descr == "<f4");
  const json j = load_json(dir);
  CHECK(j["tables"]["dtype"] == "bf16");
  CHECK(j["lookups"]["index_dtype"] == "int32");
  // Rewriting without per-sample weights / output removes the stale files.
  c.problem.per_sample_weights.clear();
  c.recorded.reset();
  write_case(dir.string(), c);
  CHECK_FALSE(fs::exists(dir / "per_sample_weights.npy"));
  CHECK_FALSE(fs::exists(dir / "output.npy"));
  CHECK(same_case(read_case(dir.string()).problem, c.problem));
  fs::remove_all(dir);
}

TEST_CASE("case files: malformed case.json is rejected naming the key", "[io][case][untrusted]") {
  const fs::path dir = scratch("bad");
  const CaseFile good = base_case();
  write_case(dir.string(), good);
  REQUIRE_NOTHROW(read_case(dir.string()));
  const json j0 = load_json(dir);

  struct Mutation {
    const char* what;
    std::function<void(json&)> apply;
    std::vector<std::string> parts;
  };
  const std::vector<Mutation> mutations = {
      {"missing key", [](json& j) { j.erase("options"); }, {"options", "missing required key"}},
      {"missing nested key", [](json& j) { j["tables"].erase("rows"); }, {"tables.rows", "missing"}},
      {"unknown key", [](json& j) { j["expectt"] = 1; }, {"expectt", "unknown key"}},
      // found by fuzz_case_reader: an empty top-level key gave an error with an empty argument()
      {"empty key", [](json& j) { j[""] = 1; }, {"case.json[\"\"]", "unknown key"}},
      {"wrong format", [](json& j) { j["format"] = "npz"; }, {"format", "npz"}},
      {"wrong version", [](json& j) { j["version"] = 2; }, {"version", "2"}},
      {"wrong type: string for int", [](json& j) { j["lookups"]["batch_size"] = "3"; },
       {"lookups.batch_size", "expected an integer", "string"}},
      {"wrong type: float for int", [](json& j) { j["lookups"]["batch_size"] = 3.5; },
       {"lookups.batch_size", "expected an integer", "3.5"}},
      {"wrong type: array element", [](json& j) { j["tables"]["dims"][0] = true; },
       {"tables.dims[0]", "expected an integer"}},
      {"wrong type: object", [](json& j) { j["options"] = 3; }, {"options", "expected an object"}},
      {"wrong type: bool", [](json& j) { j["lookups"]["weighted"] = 1; }, {"lookups.weighted", "true or false"}},
      {"negative seed", [](json& j) { j["seed"] = -1; }, {"seed", "negative"}},
      {"unknown dtype", [](json& j) { j["tables"]["dtype"] = "fp8"; }, {"tables.dtype", "fp8"}},
      {"integer weights", [](json& j) { j["tables"]["dtype"] = "int32"; }, {"tables.dtype", "not a weight type"}},
      {"unknown pooling", [](json& j) { j["options"]["pooling"] = "max"; }, {"options.pooling", "max"}},
      {"unknown bounds mode", [](json& j) { j["options"]["bounds_check"] = "loud"; },
       {"options.bounds_check", "loud"}},
      {"unknown policy", [](json& j) { j["options"]["policy"]["kind"] = "fast"; },
       {"options.policy.kind", "fast"}},
      {"unknown rounding", [](json& j) { j["options"]["policy"]["write_back"] = "rtz"; },
       {"options.policy.write_back", "rtz"}},
      {"D over the limit", [](json& j) { j["tables"]["dims"][0] = 4096; }, {"tables.dims[0]", "4096", "2048"}},
      {"E zero", [](json& j) { j["tables"]["rows"][1] = 0; }, {"tables.rows[1]", "outside"}},
      {"E·D overflow", [](json& j) { j["tables"]["rows"][0] = std::int64_t{1} << 62; },
       {"tables.rows[0]", "overflows"}},
      {"rows vs dims length", [](json& j) { j["tables"]["dims"].push_back(4); }, {"tables.dims", "length 3"}},
      {"table offset past the weights", [](json& j) { j["tables"]["table_offsets"][1] = 41; },
       {"tables.table_offsets[1]", "41"}},
      {"feature map out of range", [](json& j) { j["tables"]["feature_table_map"][1] = 2; },
       {"tables.feature_table_map[1]", "outside"}},
      {"offsets vs T·B+1", [](json& j) { j["lookups"]["batch_size"] = 4; }, {"offsets", "T·B + 1", "9"}},
      {"T·B overflow", [](json& j) { j["lookups"]["batch_size"] = std::int64_t{1} << 62; },
       {"lookups.batch_size", "overflows"}},
      {"VBE length", [](json& j) { j["lookups"]["vbe_ranks"] = 2; j["lookups"]["vbe_batch_sizes"] = {3, 3, 0}; },
       {"lookups.vbe_batch_sizes", "T·R = 4"}},
      {"VBE total", [](json& j) { j["lookups"]["vbe_ranks"] = 2; j["lookups"]["vbe_batch_sizes"] = {3, 0, 2, 0}; },
       {"offsets", "Σ vbe_batch_sizes + 1", "6"}},
      {"VBE without ranks", [](json& j) { j["lookups"]["vbe_batch_sizes"] = {3, 3}; },
       {"lookups.vbe_ranks", "R = 0"}},
      {"index dtype vs files", [](json& j) { j["lookups"]["index_dtype"] = "int32"; },
       {"offsets", "<i8", "<i4"}},
      {"weights dtype vs file", [](json& j) { j["tables"]["dtype"] = "bf16"; j["options"]["policy"]["weights"] = "bf16"; },
       {"weights.npy", "tables.weights", "<f2", "<u2"}},
      {"policy vs tables (validate)", [](json& j) { j["options"]["policy"]["weights"] = "fp32"; },
       {"options.policy.weights", "fp32"}},
      {"NONE with per-sample weights (validate)", [](json& j) { j["options"]["pooling"] = "none"; },
       {"lookups.per_sample_weights", "NONE"}},
      {"recorded dtype", [](json& j) { j["recorded"]["output_dtype"] = "fp16"; }, {"recorded.output_dtype", "fp16"}},
      {"recorded error kind", [](json& j) { j["recorded"]["error"] = "segfault"; }, {"recorded.error", "segfault"}},
      {"recorded output and error", [](json& j) { j["recorded"]["error"] = "bounds_check"; },
       {"recorded.output", "together with error"}},
      {"recorded nothing", [](json& j) { j["recorded"]["output"] = nullptr; }, {"recorded.output", "null"}},
      {"recorded path traversal", [](json& j) { j["recorded"]["output"] = "../../etc/passwd"; },
       {"recorded.output", "etc/passwd"}},
      {"expect verdict", [](json& j) { j["expect"] = {{"verdict", "maybe"}, {"rule", ""}}; }, {"expect.verdict", "maybe"}},
      {"expect fail without rule", [](json& j) { j["expect"] = {{"verdict", "fail"}}; }, {"expect.rule", "required"}},
      {"weighted without file", [](json& j) { j["lookups"]["weighted"] = false; j["expect"] = {{"verdict", "pass"}}; },
       {}},  // accepted: the file is ignored (unweighted)
  };
  for (const Mutation& m : mutations) {
    DYNAMIC_SECTION(m.what) {
      write_case(dir.string(), good);
      json j = j0;
      m.apply(j);
      save_json(dir, j);
      if (m.parts.empty()) {
        CHECK_NOTHROW(read_case(dir.string()));
      } else {
        expect_rejected(dir, dir.string(), m.parts);
      }
    }
  }
  SECTION("not JSON, not an object, too deep") {
    std::ofstream(dir / "case.json", std::ios::trunc) << "{\"format\": ";
    expect_rejected(dir, "case.json", {"not valid JSON"});
    std::ofstream(dir / "case.json", std::ios::trunc) << "[1, 2]";
    expect_rejected(dir, "case.json", {"expected an object"});
    std::ofstream(dir / "case.json", std::ios::trunc) << std::string(100000, '[') << std::string(100000, ']');
    expect_rejected(dir, "case.json", {"nesting deeper"});
  }
  SECTION("no folder, no case.json") {
    expect_rejected(dir / "nope", "nope", {"not a case folder"});
    fs::remove(dir / "case.json");
    expect_rejected(dir, "case.json", {"missing"});
  }
  fs::remove_all(dir);
}

TEST_CASE("case files: malformed tensors are rejected naming the file", "[io][case][untrusted]") {
  const fs::path dir = scratch("badnpy");
  const CaseFile good = base_case();
  const std::int64_t N = static_cast<std::int64_t>(good.problem.indices.size());
  SECTION("missing tensor") {
    write_case(dir.string(), good);
    fs::remove(dir / "offsets.npy");
    expect_rejected(dir, "offsets.npy", {"missing"});
  }
  SECTION("per-sample weights length != N") {
    write_case(dir.string(), good);
    std::vector<float> w(static_cast<std::size_t>(N + 1), 1.0f);
    write_npy((dir / "per_sample_weights.npy").string(), make_npy(DType::F32, {N + 1}, w.data()));
    expect_rejected(dir, "per_sample_weights.npy", {"lookups.per_sample_weights", "len(indices) N"});
  }
  SECTION("weights length != Σ E·D") {
    write_case(dir.string(), good);
    std::vector<std::uint16_t> w(79, 0);
    write_npy((dir / "weights.npy").string(), make_npy(DType::F16, {79}, w.data()));
    expect_rejected(dir, "weights.npy", {"tables.weights", "79", "Σ E·D = 80"});
  }
  SECTION("2-D input tensor") {
    write_case(dir.string(), good);
    std::vector<std::int64_t> o(good.problem.offsets);
    write_npy((dir / "offsets.npy").string(), make_npy(DType::I64, {1, static_cast<std::int64_t>(o.size())}, o.data()));
    expect_rejected(dir, "offsets.npy", {"1-D"});
  }
  SECTION("output of the wrong size; 2-D output of the right size is fine") {
    write_case(dir.string(), good);
    std::vector<float> out(25, 0.0f);
    write_npy((dir / "output.npy").string(), make_npy(DType::F32, {25}, out.data()));
    expect_rejected(dir, "output.npy", {"recorded.output", "25", "24"});
    out.resize(24);
    write_npy((dir / "output.npy").string(), make_npy(DType::F32, {3, 8}, out.data()));
    CHECK_NOTHROW(read_case(dir.string()));
  }
  SECTION("corrupt npy inside a case") {
    write_case(dir.string(), good);
    std::ofstream(dir / "indices.npy", std::ios::binary | std::ios::trunc)
        << std::string("\x93NUMPY\x01\x00\xff\xff{", 11);
    expect_rejected(dir, "indices.npy", {"header_len"});
  }
  SECTION("bounds none with a bad index: refused (running it would read out of bounds)") {
    CaseFile c = good;
    c.problem.options.bounds_check = BoundsCheckMode::None;
    c.problem.indices[1] = 10;  // E = 10
    write_case(dir.string(), c);
    expect_rejected(dir, "case.json", {"options.bounds_check", "violates bounds", "index 10"});
  }
  SECTION("int32 offsets that do not fit") {
    CaseFile c = good;
    c.problem.index_dtype = DType::I32;
    c.problem.offsets.back() = std::int64_t{1} << 40;
    CHECK_THROWS_AS(write_case(dir.string(), c), InvalidArgument);
  }
  fs::remove_all(dir);
}
