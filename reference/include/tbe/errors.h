// Errors and the validation status shared by every backend (reference and CUDA), so both agree on
// what is an error: validation runs once, on the host, before any launch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tbe {

/// Outcome of a validate() step. ok() or an error naming the argument, the value and the limit.
struct Status {
  bool ok_ = true;
  std::string argument;  ///< name of the offending argument, e.g. "offsets"
  std::string message;   ///< full human-readable message naming argument, value and limit
  bool ok() const { return ok_; }
  static Status Ok() { return {}; }
  static Status Invalid(std::string argument, std::string message) {
    return Status{false, std::move(argument), std::move(message)};
  }
};

/// Base class of every error this project throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad argument (shape, dtype, limit). `argument()` names it; what() names value and limit.
class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string argument, const std::string& message)
      : Error(message), argument_(std::move(argument)) {}
  explicit InvalidArgument(const Status& s) : Error(s.message), argument_(s.argument) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

/// Throws InvalidArgument if !s.ok().
inline void throw_if_error(const Status& s) {
  if (!s.ok()) throw InvalidArgument(s);
}

/// The first offender found by BoundsCheckMode::Fatal (docs/semantics.md "Bounds check"). Offender order, lowest first:
/// bad bags by bag index k (then the last offset, k = T·B), then bad indices by position.
struct BoundsViolation {
  enum class Kind : std::uint8_t { Bag, LastOffset, Index } kind = Kind::Index;
  std::int64_t feature = -1;   ///< feature f of the bag (-1 for LastOffset)
  std::int64_t sample = -1;    ///< sample b inside feature f (VBE: rank-major bag index in f)
  std::int64_t position = -1;  ///< Bag/LastOffset: position k in offsets; Index: position in indices
  std::int64_t value = 0;      ///< the offending offset or index value
  std::int64_t limit = 0;      ///< Index: E_t of the feature's table; Bag/LastOffset: N = len(indices)
  bool operator==(const BoundsViolation&) const = default;
};
std::string to_string(const BoundsViolation& v);

/// Thrown by BoundsCheckMode::Fatal. Nothing was computed or modified.
class BoundsCheckError : public Error {
 public:
  explicit BoundsCheckError(const BoundsViolation& v) : Error(to_string(v)), violation_(v) {}
  const BoundsViolation& violation() const { return violation_; }

 private:
  BoundsViolation violation_;
};

/// A CUDA runtime/driver failure (optimized backend only).
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace tbe
