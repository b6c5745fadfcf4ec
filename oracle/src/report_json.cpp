// JSON form of oracle reports (report_json.h).
#include "tbe/oracle/report_json.h"

#include <cmath>

namespace tbe::oracle {

namespace {
nlohmann::json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}
}  // namespace

void to_json(nlohmann::json& j, const ElementCoord& c) {
  j = nlohmann::json{{"feature", c.feature}, {"sample", c.sample}, {"rank", c.rank},
                     {"row", c.row},         {"column", c.column}, {"flat", c.flat},
                     {"lookup_row", c.lookup_row}, {"table_row", c.table_row}};
}

void to_json(nlohmann::json& j, const ElementVerdict& v) {
  j = nlohmann::json{{"where", v.where},
                     {"lo", number(v.enclosure.lo)},
                     {"hi", number(v.enclosure.hi)},
                     {"value", number(v.value)},
                     {"reference", number(v.reference)},
                     {"position", number(v.position)},
                     {"inside", v.inside}};
}

void to_json(nlohmann::json& j, const CheckReport& r) {
  j = nlohmann::json{{"check", r.check},       {"policy", r.policy},
                     {"elements", r.elements}, {"failures", r.failures},
                     {"passed", r.passed()},   {"summary", r.summary()}};
  if (r.elements > 0) j["worst"] = r.worst;
}

}  // namespace tbe::oracle
