// read_any_case: one parse of case.json, then the reader of its operator (any_case_file.h).
#include "tbe/io/any_case_file.h"

#include "case_file_internal.h"

namespace tbe::io {

AnyCaseFile read_any_case(const std::string& dir) {
  const detail::CaseJson cj = detail::parse_case_json(dir);
  switch (detail::peek_operator(cj.j).value_or(CaseOperator::Forward)) {
    case CaseOperator::Forward: return detail::read_forward_json(cj);
    case CaseOperator::Backward: return detail::read_backward_json(cj);
    case CaseOperator::IkboLce: return detail::read_lce_json(cj);
    case CaseOperator::IkboAttention: return detail::read_attention_json(cj);
  }
  return detail::read_forward_json(cj);
}

void write_case(const std::string& dir, const AnyCaseFile& c) {
  std::visit([&](const auto& one) { write_case(dir, one); }, c);
}

CaseOperator case_operator(const AnyCaseFile& c) {
  static constexpr CaseOperator kByIndex[] = {CaseOperator::Forward, CaseOperator::Backward,
                                              CaseOperator::IkboLce, CaseOperator::IkboAttention};
  return kByIndex[c.index()];
}

bool bitwise_equal(const AnyCaseFile& a, const AnyCaseFile& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) { return bitwise_equal(x, std::get<std::decay_t<decltype(x)>>(b)); }, a);
}

}  // namespace tbe::io
