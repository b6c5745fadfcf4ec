// HostTensor: the buffer protocol, DLPack and __array__ readers; NumPy result arrays.
#include "tensor.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include "tbe/errors.h"
#include "tbe/host_case.h"

namespace tbe::python {
namespace {

// DLPack (dmlc/dlpack, dlpack.h v0.8 ABI, the legacy unversioned "dltensor" capsule that
// `__dlpack__()` returns without arguments). Only the fields read here.
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr std::int32_t kDLCPU = 1;
constexpr std::uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4;

const char* device_name(std::int32_t type) {
  switch (type) {
    case 2: return "CUDA";
    case 3: return "CUDA host (pinned)";
    case 4: return "OpenCL";
    case 7: return "Vulkan";
    case 8: return "Metal";
    case 10: return "ROCm";
    case 13: return "CUDA managed";
    default: return "non-CPU";
  }
}

std::int64_t checked_numel(const std::vector<std::int64_t>& shape, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw py::value_error(what + ": negative extent in shape " + shape_text(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw py::value_error(what + ": shape " + shape_text(shape) + " overflows int64");
    n *= d;
  }
  return n;
}

/// Element type of a buffer-protocol format string (struct module syntax, one item).
std::optional<DType> buffer_dtype(const char* format, Py_ssize_t itemsize, const std::string& what) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '>' || f[0] == '!'))
    throw py::type_error(what + ": big-endian buffer (format '" + f +
                         "'); convert it to native byte order first");
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
  if (f.size() != 1) return std::nullopt;
  switch (f[0]) {
    case 'e': return DType::F16;
    case 'f': return DType::F32;
    case 'd': return DType::F64;
    case 'H': return itemsize == 2 ? std::optional(DType::BF16) : std::nullopt;
    case 'b': case 'h': case 'i': case 'l': case 'q':
      if (itemsize == 4) return DType::I32;
      if (itemsize == 8) return DType::I64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<DType> dlpack_dtype(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 16) return DType::F16;
  if (t.code == kDLFloat && t.bits == 32) return DType::F32;
  if (t.code == kDLFloat && t.bits == 64) return DType::F64;
  if (t.code == kDLBfloat && t.bits == 16) return DType::BF16;
  if (t.code == kDLUInt && t.bits == 16) return DType::BF16;  // raw bits, as for NumPy uint16
  if (t.code == kDLInt && t.bits == 32) return DType::I32;
  if (t.code == kDLInt && t.bits == 64) return DType::I64;
  return std::nullopt;
}

const char* numpy_name(DType t) {
  switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "uint16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
  }
  return "float32";
}

const char* kAccepted =
    "a host array: NumPy array, CPU torch tensor, or any object with the buffer protocol, "
    "__dlpack__ or __array__";
const char* kTypes = "float16, float32, float64, int32, int64, bfloat16 (uint16 raw bits)";

}  // namespace

namespace {
/// "[a, b, c]" of n integers.
template <class Int>
std::string list_text(const Int* v, std::size_t n) {
  std::string s = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  s += "]";
  return s;
}
}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return list_text(shape.data(), shape.size());
}

std::int64_t int_arg(py::handle obj, const std::string& what) {
  if (!py::isinstance<py::int_>(obj) || py::isinstance<py::bool_>(obj))
    throw py::type_error(what + ": " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
                         " is not an int");
  try {
    return obj.cast<std::int64_t>();
  } catch (const py::cast_error&) {
    throw InvalidArgument(what, what + ": " + std::string(py::str(obj)) + " does not fit int64");
  }
}

HostTensor HostTensor::borrow(py::handle obj, const std::string& what) {
  HostTensor t;
  t.name_ = what;
  t.source_ = py::reinterpret_borrow<py::object>(obj);
  if (obj.is_none()) throw py::type_error(what + ": None, expected " + std::string(kAccepted));

  py::object target = t.source_;
  if (!PyObject_CheckBuffer(target.ptr()) && !py::hasattr(target, "__dlpack__") &&
      py::hasattr(target, "__array__"))
    target = target.attr("__array__")();

  if (PyObject_CheckBuffer(target.ptr())) {
    py::object view = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(target.ptr()));
    if (!view) throw py::error_already_set();
    const Py_buffer* b = PyMemoryView_GET_BUFFER(view.ptr());
    auto dt = buffer_dtype(b->format, b->itemsize, what);
    if (!dt)
      throw py::type_error(what + ": element format '" + std::string(b->format ? b->format : "B") +
                           "' (itemsize " + std::to_string(b->itemsize) +
                           ") is not supported (allowed: " + kTypes + ")");
    t.dtype_ = *dt;
    for (int i = 0; i < b->ndim; ++i) t.shape_.push_back(b->shape[i]);  // PyBUF_FULL_RO: shape set
    t.numel_ = checked_numel(t.shape_, what);
    if (!PyBuffer_IsContiguous(b, 'C')) {
      const std::string strides =
          b->strides ? list_text(b->strides, static_cast<std::size_t>(b->ndim)) : "[]";
      throw py::value_error(what + ": not C-contiguous (shape " + t.shape_string() +
                            ", byte strides " + strides + "); pass a contiguous copy, e.g. "
                            "numpy.ascontiguousarray(x) or x.contiguous()");
    }
    t.data_ = b->buf;
    t.export_ = std::move(view);
    return t;
  }

  if (py::hasattr(target, "__dlpack__")) {
    py::object cap = target.attr("__dlpack__")();
    if (!PyCapsule_IsValid(cap.ptr(), "dltensor"))
      throw py::type_error(what + ": __dlpack__() did not return a 'dltensor' capsule");
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    // Protocol: the consumer renames the capsule and becomes responsible for the deleter.
    if (PyCapsule_SetName(cap.ptr(), "used_dltensor") != 0) throw py::error_already_set();
    t.export_ = py::capsule(m, [](void* p) {
      auto* mt = static_cast<DLManagedTensor*>(p);
      if (mt->deleter) mt->deleter(mt);
    });
    const DLTensor& d = m->dl_tensor;
    if (d.device.device_type != kDLCPU)
      throw py::type_error(what + ": a tensor in " + std::string(device_name(d.device.device_type)) +
                           " memory (DLPack device type " + std::to_string(d.device.device_type) +
                           "); tbe_verify runs on the host: pass x.cpu()");
    auto dt = dlpack_dtype(d.dtype);
    if (!dt)
      throw py::type_error(what + ": DLPack dtype (code " + std::to_string(d.dtype.code) + ", " +
                           std::to_string(d.dtype.bits) + " bits, " +
                           std::to_string(d.dtype.lanes) + " lanes) is not supported (allowed: " +
                           kTypes + ")");
    t.dtype_ = *dt;
    if (d.ndim < 0) throw py::value_error(what + ": negative ndim in the DLPack tensor");
    t.shape_.assign(d.shape, d.shape + d.ndim);
    t.numel_ = checked_numel(t.shape_, what);
    if (d.strides != nullptr && t.numel_ > 0) {
      std::int64_t expected = 1;
      for (std::int32_t i = d.ndim - 1; i >= 0; --i) {
        if (t.shape_[i] != 1 && d.strides[i] != expected) {
          throw py::value_error(what + ": not C-contiguous (shape " + t.shape_string() +
                                ", element strides " +
                                list_text(d.strides, static_cast<std::size_t>(d.ndim)) +
                                "); pass x.contiguous()");
        }
        expected *= t.shape_[i];
      }
    }
    t.data_ = static_cast<const char*>(d.data) + d.byte_offset;
    if (t.numel_ > 0 && d.data == nullptr)
      throw py::value_error(what + ": DLPack tensor with " + std::to_string(t.numel_) +
                            " elements has a null data pointer");
    return t;
  }
  throw py::type_error(what + ": " + std::string(py::str(py::type::of(t.source_).attr("__name__"))) +
                       " is not " + kAccepted);
}

std::optional<HostTensor> borrow_optional(py::handle obj, const std::string& what) {
  if (obj.is_none()) return std::nullopt;
  return HostTensor::borrow(obj, what);
}

void HostTensor::expect_dtype(DType expected, const std::string& reason) const {
  if (dtype_ != expected)
    throw py::type_error(name_ + ": dtype " + to_string(dtype_) + " but " + reason + " needs " +
                         to_string(expected));
}

void HostTensor::expect_ndim(std::int64_t ndim) const {
  if (this->ndim() != ndim)
    throw InvalidArgument(name_, name_ + ": " + std::to_string(this->ndim()) + "-D array (shape " +
                                     shape_string() + ") but a " + std::to_string(ndim) +
                                     "-D array is needed");
}

void HostTensor::expect_numel(std::int64_t expected, const std::string& reason) const {
  if (numel_ != expected)
    throw InvalidArgument(name_, name_ + ": " + std::to_string(numel_) + " elements (shape " +
                                     shape_string() + ") but " + reason + " needs " +
                                     std::to_string(expected));
}

std::vector<double> HostTensor::to_double() const {
  std::vector<double> v(static_cast<std::size_t>(numel_));
  for (std::int64_t i = 0; i < numel_; ++i) v[i] = load_as_double(dtype_, data_, i);
  return v;
}

std::string HostTensor::shape_string() const { return shape_text(shape_); }

namespace {
template <class Int>
std::vector<Int> int_list(py::handle obj, const std::string& what) {
  std::vector<std::int64_t> wide;
  if (PyObject_CheckBuffer(obj.ptr()) || py::hasattr(obj, "__dlpack__") ||
      py::hasattr(obj, "__array__")) {
    HostTensor t = HostTensor::borrow(obj, what);
    if (t.dtype() != DType::I32 && t.dtype() != DType::I64)
      throw py::type_error(what + ": dtype " + to_string(t.dtype()) +
                           " but integer metadata needs int32 or int64");
    t.expect_ndim(1);
    for (std::int64_t i = 0; i < t.numel(); ++i) wide.push_back(load_index(t.dtype(), t.data(), i));
  } else if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    for (std::size_t i = 0; i < seq.size(); ++i) {
      wide.push_back(int_arg(seq[i], what + "[" + std::to_string(i) + "]"));
    }
  } else {
    throw py::type_error(what + ": " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
                         " is not a sequence of ints or a 1-D integer array");
  }
  std::vector<Int> out;
  out.reserve(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < std::numeric_limits<Int>::min() || wide[i] > std::numeric_limits<Int>::max())
      throw InvalidArgument(what + "[" + std::to_string(i) + "]",
                            what + "[" + std::to_string(i) + "]: " + std::to_string(wide[i]) +
                                " does not fit " + (sizeof(Int) == 4 ? "int32" : "int64"));
    out.push_back(static_cast<Int>(wide[i]));
  }
  return out;
}
}  // namespace

std::vector<std::int64_t> int64_list(py::handle obj, const std::string& what) {
  return int_list<std::int64_t>(obj, what);
}
std::vector<std::int32_t> int32_list(py::handle obj, const std::string& what) {
  return int_list<std::int32_t>(obj, what);
}

py::object new_array(DType t, const std::vector<std::int64_t>& shape, void** data) {
  py::object np = py::module_::import("numpy");
  py::tuple dims(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) dims[i] = py::int_(shape[i]);
  py::object a = np.attr("zeros")(dims, py::arg("dtype") = numpy_name(t));
  Py_buffer b;
  if (PyObject_GetBuffer(a.ptr(), &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
    throw py::error_already_set();
  *data = b.buf;
  PyBuffer_Release(&b);  // the array owns the memory; it stays valid while `a` lives
  return a;
}

py::object make_array(DType t, const std::vector<std::int64_t>& shape, const void* data) {
  void* dst = nullptr;
  py::object a = new_array(t, shape, &dst);
  const std::int64_t n = checked_numel(shape, "result");
  if (n > 0) std::memcpy(dst, data, static_cast<std::size_t>(n) * dtype_size(t));
  return a;
}

namespace {
template <class T>
py::object vector_array(DType t, const std::vector<std::int64_t>& shape, std::span<const T> v) {
  if (checked_numel(shape, "result") != static_cast<std::int64_t>(v.size()))
    throw std::logic_error("make_array: " + std::to_string(v.size()) +
                           " values for shape " + shape_text(shape));
  return make_array(t, shape, v.data());
}
}  // namespace

py::object make_array(const std::vector<std::int64_t>& shape, std::span<const double> v) {
  return vector_array(DType::F64, shape, v);
}
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const std::int64_t> v) {
  return vector_array(DType::I64, shape, v);
}
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const std::int32_t> v) {
  return vector_array(DType::I32, shape, v);
}
py::object make_array(const std::vector<std::int64_t>& shape, std::span<const float> v) {
  return vector_array(DType::F32, shape, v);
}

}  // namespace tbe::python
