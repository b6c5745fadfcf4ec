// The dispatch layer (optimized/dispatch/dispatch.h) on the host, without a device: the one
// DType -> storage list, the compiled-combination tables, the helpers (right tags, InvalidArgument
// naming the argument and the combination otherwise), and that every type combination the
// operators' can_implement accepts is dispatchable (the throws are unreachable for valid inputs).
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/dispatch.h"
#include "tbe/backward_case.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/forward.h"
#include "tbe/host_case.h"

using namespace tbe;
namespace dispatch = tbe::cuda::dispatch;
using dispatch::TypeCombo;

namespace {

const std::vector<DType> kAllDTypes = {DType::F16, DType::BF16, DType::F32,
                                       DType::F64, DType::I32, DType::I64};

/// A valid one-table forward case (E = 4, D = 8, B = 2, 3 lookups) with the given types.
ForwardCase small_case(DType weights, DType accumulation, DType output, DType index) {
  ForwardCase c;
  c.set_tables(weights, {4}, {8});
  c.feature_table_map = {0};
  c.indices = {0, 3, 1};
  c.offsets = {0, 2, 3};
  c.batch_size = 2;
  c.index_dtype = index;
  c.options.policy.weights = weights;  // set directly: make_policy rejects non-storage types
  c.options.policy.output = output;
  c.options.policy.accumulation = accumulation;
  return c;
}

/// Expects `f` to throw InvalidArgument naming `argument` with `text` in its message.
template <class F>
void expect_invalid(F&& f, const std::string& argument, const std::string& text) {
  try {
    f();
    FAIL("no InvalidArgument (want argument " << argument << ")");
  } catch (const InvalidArgument& e) {
    INFO(e.what());
    CHECK(e.argument() == argument);
    CHECK(std::string(e.what()).find(text) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("dispatch: one DType -> storage type list", "[dispatch]") {
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::F32>, float>);
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::F16>, __half>);
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::BF16>, __nv_bfloat16>);
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::F64>, double>);
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::I32>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<dispatch::storage_t<DType::I64>, std::int64_t>);
  for (DType t : kAllDTypes) {
    INFO(to_string(t));
    // the storage type has the DType's size
    const std::size_t bytes = [&] {
      switch (t) {
        case DType::F16: return sizeof(dispatch::storage_t<DType::F16>);
        case DType::BF16: return sizeof(dispatch::storage_t<DType::BF16>);
        case DType::F32: return sizeof(dispatch::storage_t<DType::F32>);
        case DType::F64: return sizeof(dispatch::storage_t<DType::F64>);
        case DType::I32: return sizeof(dispatch::storage_t<DType::I32>);
        case DType::I64: return sizeof(dispatch::storage_t<DType::I64>);
      }
      return std::size_t{0};
    }();
    CHECK(bytes == dtype_size(t));
  }
  CHECK(dispatch::data_type(DType::F32, "x") == CUDA_R_32F);
  CHECK(dispatch::data_type(DType::F16, "x") == CUDA_R_16F);
  CHECK(dispatch::data_type(DType::BF16, "x") == CUDA_R_16BF);
  expect_invalid([] { dispatch::data_type(DType::I32, "lce.policy.storage"); },
                 "lce.policy.storage", "lce.policy.storage: int32 is not supported by the CUDA backend");
}

TEST_CASE("dispatch: helpers hand the matching tag, or throw naming the argument", "[dispatch]") {
  for (DType t : kAllDTypes) {
    INFO(to_string(t));
    const bool is_index = t == DType::I32 || t == DType::I64;
    if (is_index) {
      const DType got = dispatch::dispatch_index(t, "lookups.index_dtype",
                                                 [](auto tag) { return decltype(tag)::value; });
      CHECK(got == t);
    } else {
      expect_invalid([&] { dispatch::dispatch_index(t, "lookups.index_dtype", [](auto) {}); },
                     "lookups.index_dtype",
                     "lookups.index_dtype: " + to_string(t) + " is not supported by the CUDA backend");
    }
    const bool is_storage = t == DType::F32 || t == DType::F16 || t == DType::BF16;
    if (is_storage) {
      const std::size_t size = dispatch::dispatch_float(t, "tables.dtype", [](auto tag) {
        return sizeof(dispatch::storage_t<decltype(tag)::value>);
      });
      CHECK(size == dtype_size(t));
    } else {
      expect_invalid([&] { dispatch::dispatch_float(t, "tables.dtype", [](auto) {}); },
                     "tables.dtype", "tables.dtype: " + to_string(t));
    }
    const bool is_acc = t == DType::F32 || t == DType::F64;
    if (!is_acc)
      expect_invalid([&] { dispatch::dispatch_accumulation(t, "options.policy.accumulation", [](auto) {}); },
                     "options.policy.accumulation", to_string(t));
  }
  // F32 storage has no fused tensor-core LCE kernel: never a silent 16-bit fallback
  expect_invalid([] { dispatch::dispatch_dtype<dispatch::kMmaStorageTypes>(DType::F32, "lce.policy.storage", [](auto) {}); },
                 "lce.policy.storage", "fp32 is not supported");
}

TEST_CASE("dispatch: compiled-combination tables", "[dispatch]") {
  // forward: the full product storage × accumulation × storage, no duplicates
  std::set<std::tuple<DType, DType, DType>> forward;
  for (const TypeCombo& c : dispatch::kCompiledForward) forward.insert({c.weights, c.accumulation, c.output});
  CHECK(forward.size() == std::size(dispatch::kCompiledForward));
  for (DType w : dispatch::kStorageTypes)
    for (DType a : dispatch::kAccumulationTypes)
      for (DType o : dispatch::kStorageTypes) CHECK(forward.count({w, a, o}) == 1);
  CHECK(forward.size() == 18);
  // the tuning variants are forward rows with FP32 output
  for (const TypeCombo& c : dispatch::kCompiledPooledTuning) {
    CHECK(dispatch::contains(dispatch::kCompiledForward, c));
    CHECK(c.output == DType::F32);
  }
  // backward: FP32 weights with FP32/FP64, 16-bit weights with FP32; every grad type
  std::set<std::tuple<DType, DType, DType>> backward;
  for (const TypeCombo& c : dispatch::kCompiledBackward) backward.insert({c.weights, c.accumulation, c.output});
  CHECK(backward.size() == std::size(dispatch::kCompiledBackward));
  CHECK(backward.size() == 12);
  for (DType w : dispatch::kStorageTypes)
    for (DType a : dispatch::kAccumulationTypes)
      for (DType o : dispatch::kStorageTypes) {
        const bool want = w == DType::F32 || a == DType::F32;
        CHECK(dispatch::contains(dispatch::kCompiledBackward, TypeCombo{w, a, o}) == want);
      }
}

TEST_CASE("dispatch: dispatch_combo runs the row's instance or names the combination", "[dispatch]") {
  for (const TypeCombo& c : dispatch::kCompiledBackward) {
    const TypeCombo got = dispatch::dispatch_combo<dispatch::kCompiledBackward>(
        c, "options.policy", [](auto w, auto a, auto o) {
          return TypeCombo{decltype(w)::value, decltype(a)::value, decltype(o)::value};
        });
    CHECK(got == c);
  }
  // an unsupported combination: InvalidArgument naming the argument and the combination
  expect_invalid([] {
    dispatch::dispatch_combo<dispatch::kCompiledBackward>(
        TypeCombo{DType::F16, DType::F64, DType::BF16}, "options.policy", [](auto, auto, auto) {});
  }, "options.policy", "weights/accumulation/output fp16/fp64/bf16 has no compiled CUDA kernel");
}

TEST_CASE("dispatch: every combination can_implement accepts is compiled", "[dispatch][validate]") {
  // Forward: all DType quadruples; whatever passes ForwardOp::can_implement dispatches (the
  // launchers' type checks and the table lookups never throw for it).
  int forward_ok = 0, backward_ok = 0;
  for (DType w : kAllDTypes)
    for (DType a : kAllDTypes)
      for (DType o : kAllDTypes)
        for (DType i : kAllDTypes) {
          ForwardCase c = small_case(w, a, o, i);
          const ForwardProblem p = c.view();
          if (!cuda::ForwardOp::can_implement(p).ok()) continue;
          ++forward_ok;
          INFO(to_string(w) << " " << to_string(a) << " " << to_string(o) << " " << to_string(i));
          CHECK(dispatch::contains(dispatch::kCompiledForward, TypeCombo{w, a, o}));
          CHECK_NOTHROW(dispatch::dispatch_index(i, "lookups.index_dtype", [](auto) {}));
          if (i != DType::I32 && i != DType::I64) continue;
          BackwardCase b;
          b.forward = c;
          b.resize_grad_output();
          const BackwardProblem bp = b.view();
          if (!cuda::BackwardOp::can_implement(bp).ok()) continue;
          ++backward_ok;
          CHECK(dispatch::contains(dispatch::kCompiledBackward, TypeCombo{w, a, o}));
        }
  CHECK(forward_ok == 18 * 2);   // every compiled forward triple, both index types
  CHECK(backward_ok == 12 * 2);  // every compiled backward triple, both index types
}
