// One forward call on a backend under judgement (forward_call.h).
#include "tbe/judge/forward_call.h"

#include <sstream>

namespace tbe::judge {

std::string ForwardCall::error_text() const {
  switch (outcome) {
    case Outcome::Output:
      return "";
    case Outcome::BoundsError:
      return "BoundsCheckError(" + to_string(violation) + ")";
    case Outcome::InvalidArgument:
      return "InvalidArgument[" + argument + "]: " + what;
    case Outcome::DeviceError:
      return "DeviceError: " + what;
    case Outcome::OtherError:
      break;
  }
  return "unexpected error: " + what;
}

std::string ForwardCall::error_name() const {
  switch (outcome) {
    case Outcome::Output:
      return "";
    case Outcome::BoundsError:
      return "bounds_check";
    case Outcome::InvalidArgument:
      return "invalid_argument";
    default:
      return "device_error";
  }
}

ForwardCall call_forward(Backend& dev, const ForwardProblem& p, const ForwardStrategy& strategy,
                         void* output) {
  ForwardCall c;
  try {
    c.stats = dev.forward(p, output, strategy);
  } catch (const BoundsCheckError& e) {
    c.outcome = ForwardCall::Outcome::BoundsError;
    c.violation = e.violation();
    c.what = e.what();
  } catch (const InvalidArgument& e) {
    c.outcome = ForwardCall::Outcome::InvalidArgument;
    c.argument = e.argument();
    c.what = e.what();
  } catch (const DeviceError& e) {
    c.outcome = ForwardCall::Outcome::DeviceError;
    c.what = e.what();
  } catch (const std::exception& e) {
    c.outcome = ForwardCall::Outcome::OtherError;
    c.what = e.what();
  }
  return c;
}

io::RecordedOutputs recorded_outputs(const ForwardCall& call, std::vector<std::byte> output,
                                     DType output_dtype, const std::string& implementation) {
  io::RecordedOutputs rec;
  rec.implementation = implementation;
  rec.output_dtype = output_dtype;
  if (call.ok()) {
    rec.output = std::move(output);
    rec.warnings = call.stats.warnings;
  } else {
    rec.error = call.error_name();
  }
  return rec;
}

bool same_repair(const RepairResult& expected, const RepairResult& got, std::string* why) {
  const RepairResult& a = expected;
  const RepairResult& b = got;
  std::ostringstream os;
  if (a.warnings != b.warnings) os << "warnings " << a.warnings << " vs " << b.warnings << "; ";
  if (a.bad_bags != b.bad_bags) os << "bad_bags " << a.bad_bags << " vs " << b.bad_bags << "; ";
  if (a.bad_last_offset != b.bad_last_offset)
    os << "bad_last_offset " << a.bad_last_offset << " vs " << b.bad_last_offset << "; ";
  if (a.bad_indices != b.bad_indices)
    os << "bad_indices " << a.bad_indices << " vs " << b.bad_indices << "; ";
  auto first_diff = [](const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y) {
    if (x.size() != y.size()) return std::int64_t{-2};
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i]) return static_cast<std::int64_t>(i);
    return std::int64_t{-1};
  };
  if (auto d = first_diff(a.offsets, b.offsets); d != -1)
    os << (d == -2 ? std::string("offsets lengths differ; ")
                   : "offsets differ first at " + std::to_string(d) + "; ");
  if (auto d = first_diff(a.indices, b.indices); d != -1)
    os << (d == -2 ? std::string("indices lengths differ; ")
                   : "indices differ first at " + std::to_string(d) + "; ");
  *why = os.str();
  return why->empty();
}

}  // namespace tbe::judge
