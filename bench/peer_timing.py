"""The timing every GPU peer script under bench/ shares with tbe-bench (bench/bench_timing.h):
3 warm-up calls, a 256 MiB L2-flush write before every timed iteration, CUDA events around the
call, and (median, min, max) in milliseconds over `iters` iterations. Imported by the peer
scripts, which run as `python3 bench/peer_<name>.py` (their folder is on sys.path)."""
import statistics

import torch

L2_FLUSH_BYTES = 256 << 20


def l2_flush_buffer(device="cuda"):
    """The buffer time_cuda writes before every iteration (larger than the H200's 60 MiB L2)."""
    return torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)


def time_cuda(fn, iters, flush):
    """(median, min, max) ms of fn() over `iters` iterations, each after writing `flush`."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        flush.fill_(i & 0xFF)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times)
