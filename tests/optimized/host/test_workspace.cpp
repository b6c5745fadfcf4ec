// tbe/cuda/workspace.h: the 256-byte alignment, the layout builder and next_pow2 (host only).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

#include "tbe/cuda/workspace.h"

using namespace tbe::cuda;

TEST_CASE("workspace: align_up to 256 bytes", "[workspace]") {
  STATIC_REQUIRE(kWorkspaceAlignment == 256);
  STATIC_REQUIRE(align_up(0) == 0);
  CHECK(align_up(1) == 256);
  CHECK(align_up(255) == 256);
  CHECK(align_up(256) == 256);
  CHECK(align_up(257) == 512);
  for (std::size_t x = 0; x < 3000; x += 7) {
    INFO(x);
    const std::size_t a = align_up(x);
    CHECK(a % kWorkspaceAlignment == 0);
    CHECK(a >= x);
    CHECK(a - x < kWorkspaceAlignment);
  }
}

TEST_CASE("workspace: WorkspaceLayout places aligned pieces one after another", "[workspace]") {
  WorkspaceLayout L;
  CHECK(L.add(64) == 0);     // counters
  CHECK(L.add(0) == 256);    // an empty piece takes no space
  CHECK(L.add(1000) == 256);
  CHECK(L.add(256) == 1280);
  CHECK(L.total == 1536);
  // the same offsets as the hand-written chain align_up(previous + bytes)
  WorkspaceLayout M;
  std::size_t at = 0;
  for (std::size_t bytes : {24u, 4096u, 1u, 0u, 255u, 257u}) {
    CHECK(M.add(bytes) == at);
    at = align_up(at + bytes);
  }
  CHECK(M.total == at);
}

TEST_CASE("workspace: next_pow2", "[workspace]") {
  STATIC_REQUIRE(next_pow2(1) == 1);
  CHECK(next_pow2(-5) == 1);
  CHECK(next_pow2(0) == 1);
  CHECK(next_pow2(2) == 2);
  CHECK(next_pow2(3) == 4);
  CHECK(next_pow2(255) == 256);
  CHECK(next_pow2(256) == 256);
  CHECK(next_pow2(257) == 512);
  CHECK(next_pow2(std::int64_t{1} << 30) == (1 << 30));
  for (std::int64_t x = 1; x <= 4096; ++x) {
    const int g = next_pow2(x);
    CHECK((g & (g - 1)) == 0);  // a power of two
    CHECK(g >= x);
    CHECK(g / 2 < x);  // the smallest one
  }
}
