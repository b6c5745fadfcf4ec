// Host allocator settings of the judging tools (tbe-verify, tbe-fuzz).
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tbe::cli {

/// Keeps freed heap memory mapped for the next allocation instead of returning it to the kernel.
/// The tools allocate and free buffers of hundreds of MB per row or case (tables, references,
/// enclosures); with glibc's defaults each of them is a fresh mmap whose pages fault in (and are
/// zeroed by the kernel) on first touch. Measured (docs/architecture.md "Where the time goes"):
/// tbe-verify's forward section on the H200 machine 56.8 s -> 14.1 s; the 48 backward rows at
/// B = 2048 on 2 cores 197 s -> 133 s (16.7M page faults -> 0.8M). glibc only: no mmap for large
/// blocks (M_MMAP_MAX 0: they come from the heap and are reused), no trimming of the heap's top
/// (M_TRIM_THRESHOLD -1), the heap grown 64 MiB at a time, and one arena for all threads
/// (M_ARENA_MAX 1: a thread's own arena cannot take such blocks without mmap, so the rows that
/// run concurrently faulted fresh pages again; 48 CPU backward rows at B = 1024, --jobs 2, 2
/// cores: 6.5M page faults -> 0.84M, 68 s -> 57 s wall). The tools' results do not depend on
/// it. Call first thing in main().
inline void retain_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never trim (mallopt(3))
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_ARENA_MAX, 1);
#endif
}

}  // namespace tbe::cli
