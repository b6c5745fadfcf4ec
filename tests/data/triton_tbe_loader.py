"""Load TorchRec's Triton TBE from unmodified copies of its source, without fbgemm_gpu.

The Triton TBE (`torchrec/distributed/triton_tbe/`, TorchRec's FBTriton kernels) imports
fbgemm_gpu, an AMD-only module and torchrec packages at module level; the GPU machine has none of
them, and the copies are never committed here. `load(peers_dir)` puts small stand-in modules into
`sys.modules` (fbgemm_gpu's enums with FBGEMM's values, the AMD module's names as None, empty
torchrec packages whose `triton_tbe` package path is `peers_dir`), so nothing is patched, and
registers torch implementations of the two FBGEMM index ops the backward calls on
`torch.ops.fbgemm` (`get_infos_metadata`, `transpose_embedding_input`). Non-VBE only.

Get the copies (torchrec 376cac6a was used; `peers_dir` must hold these three files):

    for f in triton_table_batched_embeddings triton_tbe_backward_utils \\
             triton_tbe_backward_long_run_fused; do
      git --git-dir=<torchrec git dir> show \\
        HEAD:torchrec/distributed/triton_tbe/$f.py > .peers/$f.py
    done
"""
import enum
import os
import sys
import types

import torch

PEER_FILES = ("triton_table_batched_embeddings.py", "triton_tbe_backward_utils.py",
              "triton_tbe_backward_long_run_fused.py")


class EmbOptimType(enum.Enum):
    """fbgemm_gpu.split_embedding_configs.EmbOptimType (the names the Triton TBE reads)."""
    SGD = "sgd"
    EXACT_SGD = "exact_sgd"
    EXACT_ROWWISE_ADAGRAD = "exact_row_wise_adagrad"
    ADAM = "adam"
    NONE = "none"


class SparseType(enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    INT2 = "int2"
    BF16 = "bf16"


class BoundsCheckMode(enum.IntEnum):
    """fbgemm_gpu's values; the recorder runs with NONE (valid inputs), as the bounds check is an
    FBGEMM op that is not available here."""
    FATAL = 0
    WARNING = 1
    IGNORE = 2
    NONE = 3
    V2_IGNORE = 4
    V2_WARNING = 5
    V2_FATAL = 6


class PoolingMode(enum.IntEnum):
    SUM = 0
    MEAN = 1
    NONE = 2


class _DisabledGate:
    def is_enabled(self):
        return False


class FeatureGateName:
    DISABLE_OFFSETS_ADJUSTMENT = _DisabledGate()


def _no_vbe(*args, **kwargs):
    raise NotImplementedError("VBE metadata needs fbgemm_gpu (not available to this loader)")


_AMD_NAMES = (
    "_expand_long_runs", "_FIXED_GRID", "_nbit_TBE_forward_kernel_16bits",
    "_nbit_TBE_forward_kernel_32bits", "triton_tbe_backward_long_run_apply_unweighted",
    "triton_tbe_backward_long_run_grad_accum_unweighted",
    "triton_tbe_backward_long_run_grad_accum_weighted", "triton_tbe_backward_short_run_unweighted",
    "triton_tbe_backward_short_run_weighted", "triton_tbe_forward_unweighted_kernel",
    "triton_tbe_forward_weighted_kernel")


def get_infos_metadata(unused, B, T):
    """FBGEMM's adjust_info_B_num_bits: info = (t << info_B_num_bits) | b, 26 bits for b unless T
    needs more than 6 bits."""
    nbits, max_T, max_B = 26, (1 << 6) - 1, (1 << 26) - 1
    while T > max_T and nbits > 0:
        nbits -= 1
        max_T = ((max_T + 1) << 1) - 1
        max_B = ((max_B + 1) >> 1) - 1
    if B > max_B or T > max_T:
        raise ValueError("get_infos_metadata: B=%d, T=%d do not fit 32-bit infos" % (B, T))
    return nbits, (1 << nbits) - 1


def transpose_embedding_input(hash_size_cumsum, total_hash_size_bits, indices, offsets,
                              nobag=False, vbe_b_t_map=None, info_B_num_bits=26,
                              info_B_mask=(1 << 26) - 1, **unused):
    """FBGEMM's transpose_embedding_input for non-VBE bags: linear ids hash_size_cumsum[f] +
    index, sorted stably (position order inside a run), run-length encoded. Returns (linear,
    sorted linear, sorted infos, run ids, run lengths, [num runs], cumulative run lengths)."""
    if nobag or vbe_b_t_map is not None:
        raise NotImplementedError("transpose_embedding_input stand-in: pooled non-VBE only")
    T = hash_size_cumsum.numel() - 1
    total_B = offsets.numel() - 1
    B = total_B // T
    lengths = offsets[1:] - offsets[:-1]
    b_t = torch.repeat_interleave(torch.arange(total_B, device=indices.device), lengths,
                                  output_size=indices.numel())
    t = b_t // B
    b = b_t - t * B
    linear = hash_size_cumsum[t] + indices
    infos = ((t << info_B_num_bits) | b).to(torch.int32)
    lin_sorted, perm = torch.sort(linear, stable=True)
    infos_sorted = infos[perm]
    run, counts = torch.unique_consecutive(lin_sorted, return_counts=True)
    num_runs = torch.tensor([run.numel()], dtype=torch.int32, device=indices.device)
    cumulative = torch.zeros(run.numel() + 1, dtype=torch.int32, device=indices.device)
    cumulative[1:] = torch.cumsum(counts, 0)
    return linear, lin_sorted, infos_sorted, run, counts.to(torch.int32), num_runs, cumulative


def _module(name, package=False, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    if package:
        m.__path__ = []
    sys.modules[name] = m
    return m


def load(peers_dir):
    """Returns the module `torchrec.distributed.triton_tbe.triton_table_batched_embeddings`
    loaded from `peers_dir`. Raises FileNotFoundError naming a missing copy."""
    peers_dir = os.path.abspath(peers_dir)
    for f in PEER_FILES:
        if not os.path.isfile(os.path.join(peers_dir, f)):
            raise FileNotFoundError("%s: missing (the TorchRec copies, see triton_tbe_loader.py)"
                                    % os.path.join(peers_dir, f))
    _module("fbgemm_gpu", package=True)
    _module("fbgemm_gpu.config", FeatureGateName=FeatureGateName)
    _module("fbgemm_gpu.split_embedding_configs", EmbOptimType=EmbOptimType,
            SparseType=SparseType)
    _module("fbgemm_gpu.split_table_batched_embeddings_ops_common",
            BoundsCheckMode=BoundsCheckMode, PoolingMode=PoolingMode)
    _module("fbgemm_gpu.split_table_batched_embeddings_ops_training_common",
            generate_vbe_metadata=_no_vbe)
    for p in ("ads_mkl", "ads_mkl.ops", "ads_mkl.ops.triton", "ads_mkl.ops.triton.amd"):
        _module(p, package=True)
    _module("ads_mkl.ops.triton.amd.triton_table_batched_embeddings",
            **{n: None for n in _AMD_NAMES})
    for p in ("torchrec", "torchrec.distributed"):
        _module(p, package=True)
    _module("torchrec.distributed.triton_tbe", package=True).__path__ = [peers_dir]
    setattr(torch.ops.fbgemm, "get_infos_metadata", get_infos_metadata)
    setattr(torch.ops.fbgemm, "transpose_embedding_input", transpose_embedding_input)
    import torchrec.distributed.triton_tbe.triton_table_batched_embeddings as tt
    return tt
