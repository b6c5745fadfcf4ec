// Host allocator settings of the judging tools (tbe-verify, tbe-fuzz).
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tbe::cli {

/// Keeps freed heap memory mapped for the next allocation instead of returning it to the kernel.
/// The tools allocate and free buffers of hundreds of MB per row or case (tables, references,
/// enclosures); with glibc's defaults each of them is a fresh mmap whose pages fault in (and are
/// zeroed by the kernel) on first touch, serialised on the process's page tables: measured on a
/// backward row (2 cores) 16.7M page faults and 55 s of system time over the 48 rows at B = 2048,
/// 0.8M and 5 s with these settings (wall 197 s -> 133 s; docs/main-job.md). glibc only: no mmap
/// for large blocks (M_MMAP_MAX 0: they come from the heap and are reused), no trimming of the
/// heap's top (M_TRIM_THRESHOLD -1), the heap grown 64 MiB at a time. The results of the
/// tools do not depend on it. Call first thing in main().
inline void retain_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never trim (mallopt(3))
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

}  // namespace tbe::cli
