"""Shared helpers of the tbe_verify tests (python/tests).

The module under test is the one CMake built: ctest puts its folder on PYTHONPATH (test
python_tests). Small-integer fills keep every expected value exact (docs: CUTLASS-style testbed).
"""
import os
import pathlib

import numpy as np
import pytest

tv = pytest.importorskip("tbe_verify")

REPO_ROOT = pathlib.Path(os.environ.get("TBE_REPO_ROOT", pathlib.Path(__file__).resolve().parents[2]))


def int_table(E, D, dtype=np.float32, base=0):
    """[E, D] table with W[r, d] = base + 10*r + d (exact in fp16/bf16/fp32 for small E, D)."""
    r = np.arange(E).reshape(E, 1)
    d = np.arange(D).reshape(1, D)
    return (base + 10 * r + d).astype(dtype)


def to_bf16_bits(x):
    """float32 values exactly representable in bf16 -> uint16 raw bits (truncation is exact)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32) >> 16
    assert np.array_equal((bits << 16).view(np.float32), x), "not exact in bf16"
    return bits.astype(np.uint16)


def from_bf16_bits(bits):
    """uint16 raw bits -> float32 values."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)
