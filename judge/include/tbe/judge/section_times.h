// Wall time of a suite run split by what the time went to (generation, reference, enclosures,
// device calls with their transfers, judging, CPU emulations, ...): each suite (forward matrix,
// backward rows, IKBO rows) keeps one and tbe-verify prints and writes them (docs/architecture.md
// "Where the time goes").
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tbe::judge {

/// Seconds (steady_clock wall time) per named section, summed over every timed call, in the order
/// each section first appeared. Not thread-safe: time whole parallel regions from one thread.
class SectionTimes {
 public:
  /// Adds `seconds` to `section` (created at the end of the order if new).
  void add(const std::string& section, double seconds);
  /// Runs `fn()` and adds its wall time to `section` (also when it throws); returns its result.
  template <class Fn>
  decltype(auto) time(const std::string& section, Fn&& fn) {
    struct Stop {
      SectionTimes& self;
      const std::string& name;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
      ~Stop() {
        self.add(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    } stop{*this, section};
    return fn();
  }
  /// Adds every section of `other` (created at the end of the order if new).
  void add(const SectionTimes& other);
  /// Seconds of `section` (0 if it never ran).
  double seconds(const std::string& section) const;
  /// Σ over the sections.
  double total() const;
  const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }
  /// "generation 1.20 s, reference 3.40 s, ..." ("-" when nothing was timed).
  std::string text() const;
  /// {"generation": 1.2, "reference": 3.4, ...}
  nlohmann::json to_json() const;

 private:
  std::vector<std::pair<std::string, double>> entries_;
};

}  // namespace tbe::judge
