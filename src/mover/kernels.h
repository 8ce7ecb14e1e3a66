// The mover's software kernels: the byte-moving loops behind each opcode.
//
// Kernels trust their arguments: the device validates descriptors (sizes,
// overlap, dtype, address ranges) before calling them. Each kernel has a
// scalar version and, where it pays, AVX2 and AVX-512 versions chosen once at
// start-up from CPUID (force_isa() overrides, for tests and benchmarks).
#pragma once

#include <deputy/mover.h>

#include <cstddef>
#include <cstdint>

namespace deputy::mover::kernels {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

// The best ISA this CPU supports (cached after the first call).
Isa detected_isa();
// The ISA the dispatched kernels use now: detected_isa() unless forced.
Isa active_isa();
// Use `isa` (clamped to detected_isa()) from now on. Not thread-safe against
// kernels running concurrently: call it before starting work.
void force_isa(Isa isa);
const char *isa_name(Isa isa);

// Destination store policy. Non-temporal stores skip the cache: faster for
// large copies whose destination is not read soon, slower for small ones.
enum class Store { cached, nontemporal };

// dst <- src, n bytes; the ranges must not overlap.
void copy(void *dst, const void *src, size_t n, Store store);
// dst <- src, n bytes; the ranges may overlap (memmove semantics).
void move(void *dst, const void *src, size_t n, Store store);
// dst <- the 8 bytes of `pattern` (little-endian) repeated; the last repeat is
// cut at n.
void fill(void *dst, uint64_t pattern, size_t n, Store store);
// Offset of the first differing byte, or n when equal.
size_t compare(const void *a, const void *b, size_t n);
// Offset of the first byte differing from `pattern` repeated, or n.
size_t compare_pattern(const void *a, uint64_t pattern, size_t n);
// dst1 <- src and dst2 <- src in one pass over src (no overlaps).
void dualcast(void *dst1, void *dst2, const void *src, size_t n, Store store);

// CRC32C (Castagnoli), chainable: crc32c(crc32c(0, a), b) == crc32c(0, a||b),
// crc32c(0, "123456789") == 0xE3069283. Built on ISA-L.
uint32_t crc32c(uint32_t seed, const void *p, size_t n);
// dst <- src and returns crc32c(seed, src).
uint32_t copy_crc32c(void *dst, const void *src, size_t n, uint32_t seed, Store store);

// Delta records (DSA semantics). n is a multiple of 8 and <= DP_DELTA_MAX_SIZE.
// For every 8-byte granule i where a and b differ, appends the entry
// {uint16 i, b[8i..8i+8)} (DP_DELTA_ENTRY_SIZE bytes) to record. Returns the
// record size, or SIZE_MAX when it would exceed max_record bytes (then the
// record's content is unspecified but nothing past max_record is written).
size_t create_delta(const void *a, const void *b, size_t n, void *record, size_t max_record);
// Applies record_size bytes of entries to dst (dst_size bytes). Returns false,
// writing nothing, when record_size is not a multiple of DP_DELTA_ENTRY_SIZE or
// an entry's granule lies outside dst. The record is read exactly once (into
// a copy of the calling thread's), so a submitter rewriting it meanwhile can
// change what is written, never where.
bool apply_delta(void *dst, size_t dst_size, const void *record, size_t record_size);

// Writes back the cache lines of [p, p+n); evicts them unless keep (clwb vs
// clflushopt, falling back to clflush), then fences.
void cache_flush(void *p, size_t n, bool keep);

// Element-wise reduction over `count` elements: dst[i] = a[i] op b[i]. dst may
// equal a or b exactly (in place); no partial overlap. Semantics, bit-exact
// with a scalar loop:
//  - integers wrap (two's complement) for sum and prod;
//  - float16/bfloat16 are widened to float32, combined, rounded back to
//    nearest-even (bfloat16 NaN stays NaN);
//  - min(a,b) = (a < b) ? a : b and max(a,b) = (a > b) ? a : b, for floats
//    too (this is what MINPS/MAXPS compute, NaN handling included);
//  - a float sum or product with one NaN operand is that NaN made quiet; when
//    both are NaN it is one of them made quiet (x86 returns the first, but
//    compilers treat + and * as commutative, so which one is not promised).
void reduce(void *dst, const void *a, const void *b, size_t count, dp_dtype_t dtype, dp_op_t op);

// T10 DIF (mover.h, "DIF operations"). The guard of one block: CRC16
// T10-DIF on ISA-L's crc16_t10dif, seeded and finished as the descriptor's
// op_flags say (DP_DIF_INVERT_*).
uint16_t dif_guard(const void *block, size_t n, unsigned op_flags);

struct DifJob {
    unsigned opcode;     // DP_OP_DIF_*
    uint32_t block;      // data bytes per block
    unsigned op_flags;   // DP_DIF_BLOCK_* | DP_DIF_INVERT_*
    unsigned src_flags;  // DP_DIF_SRC_*
    unsigned dst_flags;  // DP_DIF_DST_*
    uint64_t src_tags;   // DP_DIF_TAGS words: the first block's
    uint64_t dst_tags;
};
struct DifOutcome {
    uint32_t error = 0;      // DP_DIF_ERR_* of the failing block; 0: every block passed
    uint64_t blocks = 0;     // blocks done before it (all of them when none failed)
    uint64_t next_tags = 0;  // the tags of the next block (source's; INSERT: destination's)
};
// Runs `blocks` blocks of a checked DIF job: src holds them (with their
// tuples but for INSERT), dst receives what the opcode writes (nullptr for
// CHECK). Stops at the first block whose tuple fails, writing nothing of it.
DifOutcome dif(const DifJob &job, const void *src, void *dst, uint64_t blocks);
// The tags block `blocks` carries (what a job that processed that many
// blocks reports as next_tags).
uint64_t dif_next_tags(const DifJob &job, uint64_t blocks);

}  // namespace deputy::mover::kernels
