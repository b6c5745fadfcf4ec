"""The timing every GPU peer script under bench/ shares with tbe-bench (bench/bench_common.h):
3 warm-up calls (then, with warmup_ms > 0, untimed (flush, call) pairs for that many milliseconds
of wall clock, like tbe-bench ikbo-fa --warmup-ms), a 256 MiB L2-flush write before every timed
iteration, CUDA events around the call, and (median, min, max) in milliseconds over `iters`
iterations. Imported by the peer scripts, which run as `python3 bench/peer_<name>.py` (their
folder is on sys.path)."""
import statistics
import time

import torch

L2_FLUSH_BYTES = 256 << 20


def l2_flush_buffer(device="cuda"):
    """The buffer time_cuda writes before every iteration (larger than the H200's 60 MiB L2)."""
    return torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)


def time_cuda(fn, iters, flush, warmup_ms=0.0):
    """(median, min, max) ms of fn() over `iters` iterations, each after writing `flush`; before
    them 3 warm-up calls and `warmup_ms` milliseconds of untimed (flush, call) pairs."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, i = time.monotonic(), 0
    while warmup_ms > 0 and (time.monotonic() - start) * 1e3 < warmup_ms:
        flush.fill_(i & 0xFF)
        fn()
        torch.cuda.synchronize()
        i += 1
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
