// Host tensors borrowed from Python objects, and NumPy arrays made for results, without a
// compile-time dependency on NumPy or torch.
//
// Accepted inputs, in this order: the buffer protocol (NumPy arrays, memoryview, array.array),
// `__dlpack__` (CPU torch tensors, bfloat16 included; NumPy >= 1.22), `__array__` (anything
// NumPy-like; its result must support the buffer protocol). A tensor must live in host memory, be
// C-contiguous (row-major, no gaps) and have one of the element types below; anything else is a
// TypeError / ValueError naming the argument before any element is read.
//
// Element types: float16 -> fp16, float32 -> fp32, float64 -> fp64, int32 -> int32,
// int64 -> int64, DLPack bfloat16 -> bf16, and uint16 -> bf16 read as raw bits (NumPy has no
// bfloat16; the case files store bf16 that way too). Big-endian buffers are rejected.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tbe/types.h"

namespace tbe::python {

namespace py = pybind11;

/// A read-only view of a host tensor owned by a Python object, kept alive (and its buffer export
/// held) as long as this value lives. Copies share the export. Destroy with the GIL held.
class HostTensor {
 public:
  /// Borrows `obj` (see the header comment for what is accepted). `what` names the argument in
  /// errors. Throws py::type_error (not an array, unsupported element type, device memory) or
  /// py::value_error (not C-contiguous).
  static HostTensor borrow(py::handle obj, const std::string& what);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t ndim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const { return numel_; }
  /// First element; non-null whenever numel() > 0.
  const void* data() const { return data_; }
  /// The Python object the caller passed (for read-only attributes of the problem classes).
  const py::object& source() const { return source_; }
  const std::string& name() const { return name_; }

  /// Throws py::type_error "<name>: dtype <actual> but <reason> needs <expected>".
  void expect_dtype(DType expected, const std::string& reason) const;
  /// Throws InvalidArgument "<name>: <ndim>-D array (shape [..]) but a <ndim>-D array is needed".
  void expect_ndim(std::int64_t ndim) const;
  /// Throws InvalidArgument "<name>: <numel> elements but <reason> needs <expected>".
  void expect_numel(std::int64_t expected, const std::string& reason) const;
  /// The elements as FP64 (exact for every DType).
  std::vector<double> to_double() const;
  /// "[2, 3]".
  std::string shape_string() const;

 private:
  DType dtype_ = DType::F32;
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  const void* data_ = nullptr;
  py::object source_;  ///< what the caller passed
  py::object export_;  ///< the memoryview or DLPack capsule that pins the memory
  std::string name_;
};

/// Borrows `obj` unless it is None.
std::optional<HostTensor> borrow_optional(py::handle obj, const std::string& what);

/// A Python int argument (not bool) as int64; TypeError / InvalidArgument naming `what`.
std::int64_t int_arg(py::handle obj, const std::string& what);
/// "[2, 3]".
std::string shape_text(const std::vector<std::int64_t>& shape);

/// Small integer metadata (rows, dims, feature_table_map, ...): a Python sequence of ints or a
/// 1-D integer tensor. Every value must fit the target type (InvalidArgument naming the element).
std::vector<std::int64_t> int64_list(py::handle obj, const std::string& what);
std::vector<std::int32_t> int32_list(py::handle obj, const std::string& what);

/// A new NumPy array of `shape` and element type `t` (bf16 as uint16 raw bits) holding the
/// values `data` (numel(shape) elements of t, host). Imports numpy.
py::object make_array(DType t, const std::vector<std::int64_t>& shape, const void* data);
/// Same for FP64 / int64 / int32 / FP32 vectors.
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const double> v);
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const std::int64_t> v);
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const std::int32_t> v);
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const float> v);
/// A new NumPy array of `shape` and type `t`, zero-filled, and a pointer to its first element
/// (valid while the array lives). For results a C++ operator writes into.
py::object new_array(DType t, const std::vector<std::int64_t>& shape, void** data);

}  // namespace tbe::python
