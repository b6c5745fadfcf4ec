// The case generator of tbe-fuzz: random forward cases biased to the edges (bag lengths
// 0/1/255/256/257, D = 1, odd and 2048, E = 1, tables with E·D just above 2^31, VBE,
// offsets[0] > 0, int32/int64, SUM/MEAN/NONE, per-sample weights, FP32/FP16/BF16 weights and
// outputs, both precision policies, every bounds-check mode with malformed inputs for the checking
// modes, a few invalid arguments).
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/fuzz_case.h"
#include "tbe/rng.h"

namespace tbe::fuzz {

/// Size profile of the generated cases (the edges are drawn in both):
///  - Small (default): N <= 6000 lookups, E·D <= 2^16 elements per table, B <= 64, output
///    <= 2^17 elements: the fast profile of long campaigns (every edge value still drawn:
///    D = 2048 with E <= 32, L = 257).
///  - Large: N <= 250000, E·D <= 2^22 per table, B <= 512, output <= 2^23 elements.
enum class Shapes : std::uint8_t { Small, Large };
std::string to_string(Shapes s);  ///< "small", "large"

/// Case `case_index` of campaign `seed`: drawn from Rng(seed, "fuzz" + case_index) alone, so a
/// campaign is reproducible case by case. With huge_every > 0, the cases with
/// case_index % huge_every == huge_every / 2 have a table with E·D just above 2^31 elements
/// (host memory up to ~9 GiB); 0 turns them off.
FuzzCase generate_case(std::uint64_t seed, std::uint64_t case_index, std::int64_t huge_every,
                       Shapes shapes = Shapes::Small);

/// The forward case drawn from stream `r` (generate_case's body; the backward generator starts
/// from it with its own stream). `huge`: a table with E·D just above 2^31 elements.
FuzzCase generate_case_from(Rng r, bool huge, Shapes shapes);

/// True if generate_case(·, case_index, huge_every) is a huge-table case.
bool is_huge_case(std::uint64_t case_index, std::int64_t huge_every);

}  // namespace tbe::fuzz
