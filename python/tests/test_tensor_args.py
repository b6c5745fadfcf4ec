"""Array arguments without torch: the buffer protocol (NumPy, memoryview, array.array),
__dlpack__ (NumPy's, standing in for a CPU torch tensor) and __array__; arrays are borrowed, not
copied; big-endian data is refused."""
import array

import numpy as np
import pytest

from conftest import i64, int_table, tv


class OnlyArray:
    """An object NumPy can convert (like a torch tensor's __array__), nothing else."""
    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a


class OnlyDLPack:
    """An object exporting DLPack only (as CPU torch tensors do)."""
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def expected_sum():
    return [[10, 12, 14], [30, 31, 32]]


@pytest.mark.parametrize("wrap", [OnlyArray, OnlyDLPack, lambda a: memoryview(a)])
def test_weights_through_every_protocol(wrap):
    W = int_table(4, 3)
    p = tv.ForwardProblem(wrap(W), wrap(i64(0, 1, 3)), wrap(i64(0, 2, 3)))
    np.testing.assert_array_equal(tv.forward_reference(p), expected_sum())
    out = tv.forward_reference(p)
    assert tv.check_forward(p, wrap(out)).passed


def test_array_module_and_sequences_for_metadata():
    W = int_table(4, 3).ravel()
    p = tv.ForwardProblem(W, array.array("q", [0, 1, 3]), array.array("q", [0, 2, 3]),
                          rows=np.array([4], np.int32), dims=(3,), feature_table_map=range(1))
    np.testing.assert_array_equal(tv.forward_reference(p), expected_sum())


def test_arrays_are_borrowed_not_copied():
    W = int_table(4, 3)
    p = tv.ForwardProblem(W, i64(0, 1, 3), i64(0, 2, 3))
    assert p.weights is W
    W[3] = 0  # the problem reads the caller's memory
    np.testing.assert_array_equal(tv.forward_reference(p)[1], [0, 0, 0])


def test_dlpack_contiguity_is_checked():
    W = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    with pytest.raises(ValueError, match=r"weights: not C-contiguous \(shape \[4, 3\], element strides \[6, 2\]\)"):
        tv.ForwardProblem(OnlyDLPack(W), i64(0), i64(0, 1))


def test_big_endian_is_refused():
    with pytest.raises(TypeError, match="big-endian"):
        tv.ForwardProblem(int_table(2, 2).astype(">f4"), i64(0), i64(0, 1))


def test_zero_size_arrays():
    p = tv.ForwardProblem(int_table(2, 2), np.zeros(0, np.int64), i64(0, 0, 0))
    np.testing.assert_array_equal(tv.forward_reference(p), np.zeros((2, 2)))
