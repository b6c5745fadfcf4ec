// Reading and writing NumPy .npy files (format version 1.0/2.0/3.0, C order, little-endian), the
// standard tensor container readable by numpy.load and torch. A file is untrusted input: every
// field of the header is validated (magic, version, header length, dict syntax, descr, fortran
// order, shape, and that the payload size equals prod(shape)·itemsize) with errors naming the
// file, the field, the value and the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/types.h"

namespace tbe::io {

/// A host tensor as stored in a .npy file. `descr` is the NumPy type string ("<f4", "<f2", "<f8",
/// "<i4", "<i8", "<u2", "|u1", ...); data holds prod(shape) elements of that type, little-endian.
struct NpyArray {
  std::string descr;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;
  std::int64_t numel() const;
  std::size_t itemsize() const;
};

/// Limits applied while reading (defaults: 4 GiB payload, 8 dims, 64 KiB header).
struct NpyLimits {
  std::int64_t max_bytes = std::int64_t{4} << 30;
  int max_dims = 8;
  std::int64_t max_header_bytes = 65536;
};

/// Parses a whole .npy image held in memory. Throws InvalidArgument naming `what` (e.g. the file
/// name) and the offending field.
NpyArray parse_npy(const std::byte* bytes, std::size_t size, const std::string& what = "npy",
                   const NpyLimits& limits = {});
/// Reads a file (throws InvalidArgument if it cannot be opened or is malformed).
NpyArray read_npy(const std::string& path, const NpyLimits& limits = {});
/// Serialises (format 1.0; header padded to a multiple of 64 bytes as NumPy writes it).
std::vector<std::byte> serialize_npy(const NpyArray& a);
void write_npy(const std::string& path, const NpyArray& a);
/// (addition) Writes a 1-D array of n elements of dtype t straight from `data` (no copy; large
/// tables are written without a second buffer).
void write_npy(const std::string& path, DType t, std::int64_t n, const void* data);
/// Writes prod(shape) elements of dtype t straight from `data` (row-major, no copy) as an array
/// of `shape` (e.g. [B, K_c, N]). Throws InvalidArgument for a negative dimension, a product
/// overflowing int64, null data for a non-empty array, or an I/O error.
void write_npy(const std::string& path, DType t, const std::vector<std::int64_t>& shape,
               const void* data);

/// The NumPy descr of a project dtype. BF16 has no NumPy type: it is stored as raw bits "<u2" and
/// the case file records the logical dtype.
std::string npy_descr(DType t);
/// Makes an array from host data of dtype t (copied).
NpyArray make_npy(DType t, std::vector<std::int64_t> shape, const void* data);

}  // namespace tbe::io
