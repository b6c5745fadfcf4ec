// The tools' command lines on CLI11: one set of conventions (a repeated option keeps its last
// value, flags take no value, integers are decimal), the parse that turns CLI11's errors into the
// tools' exit statuses (cli_exit.h), a check that reuses a project parser's message, and decimal
// integer options (CLI11's own conversion reads 010 as octal, 0x10 as hex, -1 as 2^64 - 1).
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cli/cli_exit.h"

namespace tbe::cli {

/// The tools' conventions on `app` (call before adding options; subcommands added later inherit
/// them): a repeated option keeps its last value (as the hand-written parsers did), a flag takes
/// no value ("--full=1" is a usage error).
inline void set_conventions(CLI::App& app) {
  app.option_defaults()->take_last()->disable_flag_override();
}

/// A usage error of `app`: "<tool>: <what>\n(see <tool> [<subcommand>] --help)\n", status 2.
/// `app` is the root; the subcommand named is the one the command line selected, if any.
inline Exit usage_error(const CLI::App& app, const std::string& what) {
  std::string see = app.get_name();
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    see += " " + sub->get_name();
  }
  return Exit{kUsageError, app.get_name() + ": " + what + "\n(see " + see + " --help)\n"};
}

/// Parses argv (argv[0] is the program) with `app`. nullopt: the command line is good (the
/// options hold their values). Otherwise how to end: --help / -h of the root or of a subcommand
/// gives status 0 with that command's help; any other CLI::ParseError (unknown flag, missing or
/// extra value, a failed check) is a usage error whose message names the flag.
inline std::optional<Exit> parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return Exit{0, app.help()};
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what());
  }
  return std::nullopt;
}

/// Check: a non-empty value; `what` names it in the message ("the file name is empty").
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        return text.empty() ? what + " is empty" : std::string();
      },
      "", "non-empty");
}

/// Check: a positive, finite number of seconds ("--seconds 0.5"; "0", "-1", "inf", "1s" refused).
inline CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::size_t used = 0;
        double x = 0;
        try {
          x = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (text.empty() || used != text.size() || !(x > 0) || !std::isfinite(x))
          return "'" + text + "' is not a positive number of seconds";
        return "";
      },
      "");
}

/// Check: the values `parse` accepts. parse(text) (any return type) throws a std::exception whose
/// message says why, and what is allowed, for a bad value; CLI11 reports "<flag>: <message>",
/// so a message that already starts with "<flag>: " loses that prefix.
template <class Parse>
CLI::Validator parsed_by(const std::string& flag, Parse parse) {
  return CLI::Validator(
      [flag, parse](std::string& text) -> std::string {
        try {
          (void)parse(text);
        } catch (const std::exception& e) {
          std::string why = e.what();
          const std::string prefix = flag + ": ";
          if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
          return why;
        }
        return {};
      },
      "", "parsed");
}

/// Adds the option `flag VALUE` to `app`, storing parse(VALUE) in `target` (checked by
/// parsed_by(flag, parse) first, so a bad value is a usage error naming the flag).
template <class T, class Parse>
CLI::Option* add_parsed(CLI::App& app, const std::string& flag, T& target, Parse parse,
                        const std::string& description) {
  return app
      .add_option_function<std::string>(
          flag, [&target, parse](const std::string& text) { target = parse(text); }, description)
      ->check(parsed_by(flag, parse));
}

/// A whole decimal integer in [lo, hi]: digits only (no sign, no base prefix, no spaces).
/// Throws std::invalid_argument "'<text>' is not a decimal integer (digits 0-9 only)" for any
/// other character (or an empty text), "'<text>' is out of range [lo, hi]" for digits whose value
/// is outside [lo, hi] (or outside T).
template <class T>
T parse_decimal(const std::string& text, T lo, T hi) {
  static_assert(std::is_integral_v<T>);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("'" + text + "' is not a decimal integer (digits 0-9 only)");
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
  if (ec != std::errc() || ptr != end || v < lo || v > hi)
    throw std::invalid_argument("'" + text + "' is out of range [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return v;
}

/// Adds the option `flag NAME` to `app`: a decimal integer in [lo, hi] (parse_decimal) stored in
/// `target`; the help shows "NAME:[lo, hi]" (just NAME when the range is the whole type's).
template <class T, class Target>
CLI::Option* add_decimal(CLI::App& app, const std::string& flag, const std::string& name,
                         Target& target, T lo, T hi, const std::string& description) {
  const bool whole = lo == std::numeric_limits<T>::min() && hi == std::numeric_limits<T>::max();
  return add_parsed(app, flag, target,
                    [lo, hi](const std::string& text) { return parse_decimal(text, lo, hi); },
                    description)
      ->type_name(whole ? name
                        : name + ":[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace tbe::cli
