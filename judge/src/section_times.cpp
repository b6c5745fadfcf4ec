// Seconds per section of a suite run (section_times.h).
#include "tbe/judge/section_times.h"

#include <cstdio>

namespace tbe::judge {

void SectionTimes::add(const std::string& section, double seconds) {
  for (auto& [name, s] : entries_)
    if (name == section) {
      s += seconds;
      return;
    }
  entries_.emplace_back(section, seconds);
}

void SectionTimes::add(const SectionTimes& other) {
  for (const auto& [name, s] : other.entries_) add(name, s);
}

double SectionTimes::seconds(const std::string& section) const {
  for (const auto& [name, s] : entries_)
    if (name == section) return s;
  return 0.0;
}

double SectionTimes::total() const {
  double t = 0.0;
  for (const auto& e : entries_) t += e.second;
  return t;
}

std::string SectionTimes::text() const {
  if (entries_.empty()) return "-";
  std::string out;
  char buf[64];
  for (const auto& [name, s] : entries_) {
    std::snprintf(buf, sizeof buf, " %.2f s", s);
    out += (out.empty() ? "" : ", ") + name + buf;
  }
  return out;
}

nlohmann::json SectionTimes::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : entries_) j[name] = s;
  return j;
}

}  // namespace tbe::judge
