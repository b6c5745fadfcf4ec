// JSON form of oracle reports (for tbe-verify / tbe-fuzz output next to the human summary line).
// Non-finite numbers (an infinite position, a NaN value) are written as the strings "inf",
// "-inf" and "nan", since JSON has no such numbers.
#pragma once

#include <nlohmann/json.hpp>

#include "tbe/oracle/forward_oracle.h"

namespace tbe::oracle {

/// {"feature", "sample", "rank", "row", "column", "flat", "lookup_row", "table_row"}
void to_json(nlohmann::json& j, const ElementCoord& c);
/// {"where", "lo", "hi", "value", "reference", "position", "inside"}
void to_json(nlohmann::json& j, const ElementVerdict& v);
/// {"check", "policy", "elements", "failures", "passed", "worst", "summary"}
void to_json(nlohmann::json& j, const CheckReport& r);

}  // namespace tbe::oracle
