// The mover's software kernels against the scalar reference (reference.h),
// byte for byte, at every ISA level this CPU supports (force_isa), for sizes
// and alignments chosen to hit every head, loop and tail path.
//
// Memory kernels are checked against an "expected image": the whole
// destination buffer, guard bytes around the target range included, as it
// must look afterwards. One memcmp then catches both wrong bytes and writes
// outside the range.
#include "mover/kernels.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "mover/reference.h"
#include "mover/names.h"

namespace deputy::mover::kernels {
namespace {

using test::ref_apply_delta;
using test::ref_crc32c;
using test::ref_create_delta;
using Bytes = std::vector<uint8_t>;

constexpr size_t kGuard = 96;  // bytes either side of every target range
constexpr size_t kBig = (2u << 20) + 3;
// Sizes around every threshold: vector widths, 4x unrolled loops, the 256-byte
// switch to the SIMD loops, pages, and a large odd size.
const std::vector<size_t> kSizes = {0,   1,   7,   31,   32,   63,   64,    65,  129,
                                    255, 256, 257, 1000, 4095, 4096, 65537, kBig};
// (source offset, destination offset) from a 64-byte aligned base.
const std::vector<std::pair<size_t, size_t>> kOffsets = {{0, 0},  {1, 1},  {1, 3},
                                                         {3, 17}, {17, 1}, {17, 0}};
const Store kStores[] = {Store::cached, Store::nontemporal};

std::vector<Isa> supported_isas() {
    std::vector<Isa> isas;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
        if (static_cast<int>(isa) <= static_cast<int>(detected_isa())) isas.push_back(isa);
    }
    return isas;
}

// Random bytes, generated once and sliced: tests need many large buffers.
const uint8_t *random_pool() {
    static const Bytes pool = [] {
        Bytes bytes(2 * kBig + 4096);
        std::mt19937_64 rng(12345);
        for (size_t i = 0; i < bytes.size(); i += 8) {
            const uint64_t v = rng();
            std::memcpy(&bytes[i], &v, std::min<size_t>(8, bytes.size() - i));
        }
        return bytes;
    }();
    return pool.data();
}

// n random bytes; different seed values start at pool offsets far enough apart that
// buffers are not shifted copies of each other at small distances.
Bytes random_bytes(size_t n, size_t seed) {
    const uint8_t *p = random_pool() + seed * 977 % 4096;
    return Bytes(p, p + n);
}

// Random storage for a target of n bytes at at(offset), offset < 64: a 64-byte
// aligned base, kGuard bytes before offset 0 and at least 32 after the target.
struct Buffer {
    Bytes storage;
    uint8_t *base;

    Buffer(size_t n, size_t seed) : storage(random_bytes(n + 2 * kGuard + 64, seed)) {
        const auto addr = reinterpret_cast<uintptr_t>(storage.data());
        base = storage.data() + (64 - addr % 64) % 64;
    }
    uint8_t *at(size_t offset) { return base + kGuard + offset; }
};

::testing::AssertionResult same_bytes(const uint8_t *got, const uint8_t *want, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
            return ::testing::AssertionFailure()
                   << "first mismatch at byte " << i << " of " << n << ": got "
                   << static_cast<int>(got[i]) << ", want " << static_cast<int>(want[i]);
        }
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_image(const Buffer &got, const Bytes &want) {
    return same_bytes(got.storage.data(), want.data(), want.size());
}

// Every kernel test runs once per supported ISA.
class KernelIsaTest : public ::testing::TestWithParam<Isa> {
  protected:
    void SetUp() override {
        force_isa(GetParam());
        ASSERT_EQ(active_isa(), GetParam());
    }
    void TearDown() override { force_isa(detected_isa()); }
};

std::string isa_param_name(const ::testing::TestParamInfo<Isa> &info) {
    return isa_name(info.param);
}

#define DEPUTY_KERNEL_SUITE(name)         \
    class name : public KernelIsaTest {}; \
    INSTANTIATE_TEST_SUITE_P(Isa, name, ::testing::ValuesIn(supported_isas()), isa_param_name)

TEST(KernelDispatchTest, ForceIsaClampsToDetected) {
    const Isa best = detected_isa();
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
        force_isa(isa);
        const Isa want = static_cast<int>(isa) > static_cast<int>(best) ? best : isa;
        EXPECT_EQ(active_isa(), want);
    }
    force_isa(best);
    EXPECT_EQ(active_isa(), best);
    EXPECT_STREQ(isa_name(Isa::scalar), "scalar");
    EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
    EXPECT_STREQ(isa_name(Isa::avx512), "avx512");
}

// ---- copy, move, fill, dualcast -------------------------------------------

DEPUTY_KERNEL_SUITE(KernelCopyTest);

TEST_P(KernelCopyTest, CopyMatchesReference) {
    for (Store store : kStores) {
        for (size_t n : kSizes) {
            for (auto [so, dof] : kOffsets) {
                Buffer src(n, 1), dst(n, 2);
                Bytes want = dst.storage;
                std::memcpy(want.data() + (dst.at(dof) - dst.storage.data()), src.at(so), n);
                copy(dst.at(dof), src.at(so), n, store);
                ASSERT_TRUE(same_image(dst, want))
                    << "n=" << n << " src+" << so << " dst+" << dof
                    << (store == Store::nontemporal ? " nt" : " cached");
            }
        }
    }
}

TEST_P(KernelCopyTest, MoveDisjointMatchesReference) {
    for (Store store : kStores) {
        for (size_t n : kSizes) {
            for (auto [so, dof] : kOffsets) {
                Buffer src(n, 3), dst(n, 4);
                Bytes want = dst.storage;
                std::memcpy(want.data() + (dst.at(dof) - dst.storage.data()), src.at(so), n);
                move(dst.at(dof), src.at(so), n, store);
                ASSERT_TRUE(same_image(dst, want)) << "n=" << n << " src+" << so << " dst+" << dof;
            }
        }
    }
}

// Overlapping moves in both directions, by distances below, at and above the
// vector widths and a large one, checked against memmove on a copy.
TEST_P(KernelCopyTest, MoveOverlappingBothDirections) {
    const size_t shifts[] = {1, 3, 17, 31, 32, 63, 64, 65, 200, 4096};
    for (Store store : kStores) {
        for (size_t n : kSizes) {
            if (n == 0) continue;
            for (size_t shift : shifts) {
                for (bool up : {true, false}) {
                    Buffer buf(n + shift, 5);
                    const size_t from = up ? 5 : 5 + shift, to = up ? 5 + shift : 5;
                    Bytes want = buf.storage;
                    const size_t base = buf.at(0) - buf.storage.data();
                    std::memmove(want.data() + base + to, want.data() + base + from, n);
                    move(buf.at(to), buf.at(from), n, store);
                    ASSERT_TRUE(same_image(buf, want))
                        << "n=" << n << " shift=" << shift << (up ? " dst>src" : " dst<src");
                }
            }
        }
    }
}

TEST_P(KernelCopyTest, MoveOntoItselfChangesNothing) {
    Buffer buf(4096, 6);
    const Bytes want = buf.storage;
    for (Store store : kStores) move(buf.at(3), buf.at(3), 4096, store);
    EXPECT_TRUE(same_image(buf, want));
}

TEST_P(KernelCopyTest, FillRepeatsPatternCutAtN) {
    const uint64_t patterns[] = {0x0807060504030201ull, 0xffeeddccbbaa9988ull, 0};
    const size_t dst_offsets[] = {0, 1, 3, 5, 17, 63};
    for (Store store : kStores) {
        for (uint64_t pattern : patterns) {
            for (size_t n : kSizes) {
                for (size_t off : dst_offsets) {
                    Buffer dst(n, 7);
                    Bytes want = dst.storage;
                    const size_t base = dst.at(off) - dst.storage.data();
                    for (size_t i = 0; i < n; ++i) {
                        want[base + i] = static_cast<uint8_t>(pattern >> (8 * (i % 8)));
                    }
                    fill(dst.at(off), pattern, n, store);
                    ASSERT_TRUE(same_image(dst, want))
                        << "n=" << n << " dst+" << off << " pattern=" << std::hex << pattern;
                }
            }
        }
    }
}

TEST_P(KernelCopyTest, DualcastWritesBothDestinations) {
    // (src, dst1, dst2) offsets: same and different alignments of the two.
    const size_t offsets[][3] = {{0, 0, 0}, {3, 1, 1}, {1, 3, 17}, {5, 17, 0}, {0, 32, 0}};
    for (Store store : kStores) {
        for (size_t n : kSizes) {
            for (const auto &o : offsets) {
                Buffer src(n, 8), d1(n, 9), d2(n, 10);
                Bytes want1 = d1.storage, want2 = d2.storage;
                std::memcpy(want1.data() + (d1.at(o[1]) - d1.storage.data()), src.at(o[0]), n);
                std::memcpy(want2.data() + (d2.at(o[2]) - d2.storage.data()), src.at(o[0]), n);
                dualcast(d1.at(o[1]), d2.at(o[2]), src.at(o[0]), n, store);
                ASSERT_TRUE(same_image(d1, want1)) << "dst1 n=" << n << " offsets " << o[1];
                ASSERT_TRUE(same_image(d2, want2)) << "dst2 n=" << n << " offsets " << o[2];
            }
        }
    }
}

// ---- compare, compare_pattern ---------------------------------------------

DEPUTY_KERNEL_SUITE(KernelCompareTest);

// Positions of the first difference: all of them for small sizes; otherwise
// the edges of every vector width and loop, the middle, and the tail.
std::vector<size_t> difference_positions(size_t n) {
    std::vector<size_t> at;
    if (n <= 300) {
        for (size_t i = 0; i < n; ++i) at.push_back(i);
        return at;
    }
    for (size_t i :
         {size_t{0},  size_t{1},   size_t{7},   size_t{8}, size_t{31}, size_t{32}, size_t{63},
          size_t{64}, size_t{255}, size_t{256}, n / 2,     n - 257,    n - 65,     n - 64,
          n - 33,     n - 32,      n - 31,      n - 9,     n - 8,      n - 2,      n - 1}) {
        at.push_back(i);
    }
    return at;
}

size_t ref_compare(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (a[i] != b[i]) return i;
    }
    return n;
}

TEST_P(KernelCompareTest, FindsFirstDifferingByte) {
    for (size_t n : kSizes) {
        for (auto [ao, bo] : kOffsets) {
            Buffer a(n, 11), b(n, 12);
            std::memcpy(b.at(bo), a.at(ao), n);
            ASSERT_EQ(compare(a.at(ao), b.at(bo), n), n) << "equal, n=" << n;
            for (size_t pos : difference_positions(n)) {
                // A low-bit and a high-bit change, and a later difference
                // that must not be the one reported.
                for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
                    b.at(bo)[pos] ^= flip;
                    if (pos + 1 < n) b.at(bo)[n - 1] ^= 0x40;
                    const size_t want = ref_compare(a.at(ao), b.at(bo), n);
                    ASSERT_EQ(want, pos);
                    ASSERT_EQ(compare(a.at(ao), b.at(bo), n), want)
                        << "n=" << n << " pos=" << pos << " a+" << ao << " b+" << bo;
                    b.at(bo)[pos] ^= flip;
                    if (pos + 1 < n) b.at(bo)[n - 1] ^= 0x40;
                }
            }
        }
    }
}

TEST_P(KernelCompareTest, ComparePatternFindsFirstDifferingByte) {
    const uint64_t pattern = 0x8877665544332211ull;
    for (size_t n : kSizes) {
        for (size_t off : {size_t{0}, size_t{1}, size_t{3}, size_t{17}}) {
            Buffer a(n, 12);
            for (size_t i = 0; i < n; ++i) {
                a.at(off)[i] = static_cast<uint8_t>(pattern >> (8 * (i % 8)));
            }
            ASSERT_EQ(compare_pattern(a.at(off), pattern, n), n) << "equal, n=" << n;
            for (size_t pos : difference_positions(n)) {
                a.at(off)[pos] ^= 0x10;
                if (pos + 1 < n) a.at(off)[n - 1] ^= 0x02;
                ASSERT_EQ(compare_pattern(a.at(off), pattern, n), pos)
                    << "n=" << n << " pos=" << pos << " a+" << off;
                a.at(off)[pos] ^= 0x10;
                if (pos + 1 < n) a.at(off)[n - 1] ^= 0x02;
            }
        }
    }
}

// ---- CRC32C ---------------------------------------------------------------

DEPUTY_KERNEL_SUITE(KernelCrcTest);

TEST(KernelCrcVectorsTest, KnownValues) {
    const char *check = "123456789";
    EXPECT_EQ(crc32c(0, check, 9), 0xE3069283u);
    EXPECT_EQ(ref_crc32c(0, check, 9), 0xE3069283u);
    EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
    // RFC 3720 B.4 (iSCSI) test vectors.
    uint8_t zeros[32] = {}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; ++i) {
        ones[i] = 0xff;
        up[i] = static_cast<uint8_t>(i);
        down[i] = static_cast<uint8_t>(31 - i);
    }
    EXPECT_EQ(crc32c(0, zeros, 32), 0x8A9136AAu);
    EXPECT_EQ(crc32c(0, ones, 32), 0x62A8AB43u);
    EXPECT_EQ(crc32c(0, up, 32), 0x46DD794Eu);
    EXPECT_EQ(crc32c(0, down, 32), 0x113FDB5Cu);
    EXPECT_EQ(ref_crc32c(0, zeros, 32), 0x8A9136AAu);
}

TEST(KernelCrcVectorsTest, MatchesBitwiseReferenceAndChains) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{4095},
                     size_t{65537}, size_t{200003}}) {
        for (size_t off : {size_t{0}, size_t{1}, size_t{17}}) {
            const Bytes data = random_bytes(n + off, 13);
            const uint8_t *p = data.data() + off;
            for (uint32_t seed : {0u, 0xdeadbeefu}) {
                const uint32_t want = ref_crc32c(seed, p, n);
                ASSERT_EQ(crc32c(seed, p, n), want) << "n=" << n << " off=" << off;
                for (size_t split : {size_t{0}, n / 3, n / 2 + 1, n}) {
                    if (split > n) continue;
                    ASSERT_EQ(crc32c(crc32c(seed, p, split), p + split, n - split), want)
                        << "n=" << n << " split=" << split;
                }
            }
        }
    }
}

// ISA-L takes an int length: a buffer past INT_MAX must be fed in pieces.
// Past 4 GiB, since some ISA-L builds happen to read a negative int as its
// unsigned value, so only a length that loses high bits shows the bug. The
// buffer is untouched anonymous memory, which reads as zeros without using
// physical memory.
TEST(KernelCrcVectorsTest, LengthBeyondIntMax) {
    const size_t n = (size_t{1} << 32) + 6;
    void *p = mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    madvise(p, n, MADV_HUGEPAGE);  // the huge zero page, where available: fewer faults
    const auto *z = static_cast<const uint8_t *>(p);
    const size_t first = n / 2 + 12345;
    const uint32_t whole = crc32c(0, z, n);
    const uint32_t chained = crc32c(crc32c(0, z, first), z + first, n - first);
    munmap(p, n);
    EXPECT_EQ(whole, chained);
}

TEST_P(KernelCrcTest, CopyCrcCopiesAndMatchesReference) {
    for (Store store : kStores) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{65536},
                         size_t{65537}, size_t{200003}}) {
            for (auto [so, dof] : kOffsets) {
                Buffer src(n, 14), dst(n, 15);
                Bytes want = dst.storage;
                std::memcpy(want.data() + (dst.at(dof) - dst.storage.data()), src.at(so), n);
                const uint32_t crc = copy_crc32c(dst.at(dof), src.at(so), n, 0x12345678u, store);
                ASSERT_EQ(crc, ref_crc32c(0x12345678u, src.at(so), n)) << "n=" << n;
                ASSERT_TRUE(same_image(dst, want)) << "n=" << n;
            }
        }
    }
}

// ---- delta records --------------------------------------------------------

DEPUTY_KERNEL_SUITE(KernelDeltaTest);

// b = a with the given bytes changed (those inside a: callers list positions
// for the larger sizes).
Bytes with_changes(const Bytes &a, const std::vector<size_t> &bytes) {
    Bytes b = a;
    for (size_t i : bytes) {
        if (i < b.size()) b[i] ^= 0x5a;
    }
    return b;
}

// Records a -> b with the kernel and the reference, checks they agree, that
// nothing past the record was written, and that applying it to a gives b.
void check_round_trip(const Bytes &a, const Bytes &b) {
    const size_t n = a.size();
    const size_t max_record = n / 8 * DP_DELTA_ENTRY_SIZE;
    Bytes record(max_record + kGuard, 0xee), want(max_record + kGuard, 0xee);
    const size_t size = create_delta(a.data(), b.data(), n, record.data(), max_record);
    const size_t want_size = ref_create_delta(a.data(), b.data(), n, want.data(), max_record);
    ASSERT_EQ(size, want_size) << "n=" << n;
    ASSERT_TRUE(same_bytes(record.data(), want.data(), record.size())) << "n=" << n;
    Bytes applied = a;
    ASSERT_TRUE(apply_delta(applied.data(), n, record.data(), size));
    ASSERT_TRUE(same_bytes(applied.data(), b.data(), n)) << "n=" << n;
}

TEST_P(KernelDeltaTest, RoundTrip) {
    std::mt19937_64 rng(16);
    for (size_t n : {size_t{0}, size_t{8}, size_t{64}, size_t{4096}, size_t{65536},
                     size_t{DP_DELTA_MAX_SIZE}}) {
        const Bytes a = random_bytes(n, 17);
        check_round_trip(a, a);  // empty delta
        if (n == 0) continue;
        check_round_trip(a, with_changes(a, {0}));
        check_round_trip(a, with_changes(a, {n - 1}));
        check_round_trip(a, with_changes(a, {7, 8, n / 2 + 3, n - 8}));
        std::vector<size_t> every(n / 8), sparse;
        for (size_t g = 0; g < n / 8; ++g) every[g] = 8 * g + g % 8;  // dense, any byte
        check_round_trip(a, with_changes(a, every));
        for (size_t i = 0; i < n / 100 + 1; ++i) sparse.push_back(rng() % n);
        check_round_trip(a, with_changes(a, sparse));
    }
}

TEST_P(KernelDeltaTest, OverflowExactlyAtLimit) {
    const size_t n = 4096;
    const Bytes a = random_bytes(n, 18);
    const Bytes b = with_changes(a, {0, 100, 801, 2047, 4095});  // 5 granules
    const size_t fits = 5 * DP_DELTA_ENTRY_SIZE;
    for (size_t max_record :
         {fits + 10, fits, fits - 1, fits - DP_DELTA_ENTRY_SIZE, size_t{1}, size_t{0}}) {
        Bytes record(fits + kGuard, 0xee);
        const size_t size = create_delta(a.data(), b.data(), n, record.data(), max_record);
        EXPECT_EQ(size, max_record >= fits ? fits : SIZE_MAX) << "max_record=" << max_record;
        for (size_t i = max_record; i < record.size(); ++i) {
            ASSERT_EQ(record[i], 0xee) << "wrote byte " << i << " past max_record=" << max_record;
        }
    }
    // No difference needs no room at all.
    EXPECT_EQ(create_delta(a.data(), a.data(), n, nullptr, 0), 0u);
}

TEST_P(KernelDeltaTest, BadRecordWritesNothing) {
    const size_t n = 256;
    const Bytes a = random_bytes(n, 19);
    const Bytes b = with_changes(a, {3, 70, 255});
    Bytes record(3 * DP_DELTA_ENTRY_SIZE);
    ASSERT_EQ(create_delta(a.data(), b.data(), n, record.data(), record.size()), record.size());

    Bytes dst = a;
    // Not a whole number of entries.
    EXPECT_FALSE(apply_delta(dst.data(), n, record.data(), record.size() - 1));
    EXPECT_FALSE(ref_apply_delta(dst.data(), n, record.data(), record.size() - 1));
    // The last granule lies outside a smaller (or not 8-aligned) destination;
    // the valid entries before it must not be applied either.
    EXPECT_FALSE(apply_delta(dst.data(), 248, record.data(), record.size()));
    EXPECT_FALSE(apply_delta(dst.data(), 255, record.data(), record.size()));
    Bytes bad = record;
    bad[DP_DELTA_ENTRY_SIZE * 2] = 0x00;
    bad[DP_DELTA_ENTRY_SIZE * 2 + 1] = 0x01;  // granule 256 of a 32-granule dst
    EXPECT_FALSE(apply_delta(dst.data(), n, bad.data(), bad.size()));
    EXPECT_TRUE(same_bytes(dst.data(), a.data(), n));
    // The last granule exactly inside is fine.
    EXPECT_TRUE(apply_delta(dst.data(), n, record.data(), record.size()));
    EXPECT_TRUE(same_bytes(dst.data(), b.data(), n));
    EXPECT_TRUE(apply_delta(dst.data(), n, record.data(), 0));  // empty record
}

// ---- cache flush ----------------------------------------------------------

TEST(KernelCacheFlushTest, KeepsContents) {
    for (bool keep : {true, false}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4097}}) {
            for (size_t off : {size_t{0}, size_t{1}, size_t{63}}) {
                Buffer buf(n, 20);
                const Bytes want = buf.storage;
                cache_flush(buf.at(off), n, keep);
                ASSERT_TRUE(same_image(buf, want)) << "n=" << n << " keep=" << keep;
            }
        }
    }
}

// ---- reduce ---------------------------------------------------------------

DEPUTY_KERNEL_SUITE(KernelReduceTest);

const dp_dtype_t kDtypes[] = {DP_INT8,    DP_INT16,    DP_INT32,   DP_INT64,
                              DP_UINT8,   DP_UINT16,   DP_UINT32,  DP_UINT64,
                              DP_FLOAT16, DP_BFLOAT16, DP_FLOAT32, DP_FLOAT64};
const dp_op_t kOps[] = {DP_SUM,  DP_PROD, DP_MIN,  DP_MAX,  DP_LAND,
                        DP_LOR,  DP_LXOR, DP_BAND, DP_BOR,  DP_BXOR};
const size_t kCounts[] = {0, 1, 7, 63, 64, 65, 1003};

size_t element_size(dp_dtype_t d) {
    switch (d) {
        case DP_INT8:
        case DP_UINT8:
            return 1;
        case DP_INT16:
        case DP_UINT16:
        case DP_FLOAT16:
        case DP_BFLOAT16:
            return 2;
        case DP_INT32:
        case DP_UINT32:
        case DP_FLOAT32:
            return 4;
        case DP_FLOAT64_INT32:
        case DP_INT64_INT32:
        case DP_FLOAT64_FLOAT64:
            return 16;  // C's struct { 8 bytes; 4 bytes (+ 4 of padding) }
        default:
            return 8;
    }
}

bool is_float(dp_dtype_t d) {
    return d >= DP_FLOAT16 && d <= DP_FLOAT64;
}

// Bit patterns worth combining with everything: zeros of both signs,
// infinities, quiet and signalling NaNs with payloads, extremes, subnormals,
// values whose sum or product overflows; for integers MIN, MAX, -1 and
// neighbours.
std::vector<uint64_t> special_values(dp_dtype_t d) {
    switch (d) {
        case DP_FLOAT16:
            return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d55, 0x7bff, 0xfbff,
                    0x0400, 0x0001, 0x83ff, 0x3c00, 0xbc00, 0x4000, 0x3bff, 0x7800, 0x3c01};
        case DP_BFLOAT16:
            return {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fa5, 0x7f7f,
                    0xff7f, 0x0080, 0x0001, 0x807f, 0x3f80, 0xbf80, 0x4000, 0x3f7f, 0x3f81};
        case DP_FLOAT32:
            return {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                    0xffc00000, 0x7f800001, 0x7fa00000, 0x7fc12345, 0x7f7fffff,
                    0xff7fffff, 0x00800000, 0x00000001, 0x807fffff, 0x3f800000,
                    0xbf800000, 0x40000000, 0x3f7fffff, 0x33800001};
        case DP_FLOAT64:
            return {0x0000000000000000, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
                    0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0x7ff4000000000000,
                    0x7ff80000deadbeef, 0x7fefffffffffffff, 0xffefffffffffffff, 0x0010000000000000,
                    0x0000000000000001, 0x800fffffffffffff, 0x3ff0000000000000, 0xbff0000000000000,
                    0x4000000000000000, 0x3fefffffffffffff};
        default: {
            const int bits = static_cast<int>(8 * element_size(d));
            const uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
            const uint64_t min = 1ull << (bits - 1), max = min - 1;
            return {0, 1, 2, all, all - 1, min, min + 1, max, max - 1, min >> 1, 3};
        }
    }
}

// Random elements: a quarter special values, a quarter random bits (every
// class of float, NaNs included), half moderate values whose sums and
// products round in interesting ways.
Bytes reduce_input(dp_dtype_t d, size_t count, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::vector<uint64_t> specials = special_values(d);
    const size_t size = element_size(d);
    Bytes out(count * size);
    for (size_t i = 0; i < count; ++i) {
        uint64_t v = rng();
        const uint64_t kind = rng() % 4;
        if (kind == 0) {
            v = specials[rng() % specials.size()];
        } else if (kind >= 2) {
            const double x = static_cast<double>(static_cast<int64_t>(v % 20001) - 10000) / 7.0;
            float f = static_cast<float>(x);
            switch (d) {
                case DP_FLOAT16:
                    v = test::ref_float_to_half(f);
                    break;
                case DP_BFLOAT16:
                    v = test::ref_float_to_bfloat(f);
                    break;
                case DP_FLOAT32:
                    v = test::ref_float_bits(f);
                    break;
                case DP_FLOAT64:
                    std::memcpy(&v, &x, 8);
                    break;
                default:
                    v = static_cast<uint64_t>(static_cast<int64_t>(v % 301) - 150);
                    break;
            }
        }
        std::memcpy(&out[i * size], &v, size);  // little-endian: the low bytes
    }
    return out;
}

std::string hex(const uint8_t *p, size_t size) {
    uint64_t v = 0;
    std::memcpy(&v, p, size);
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
}

// got must equal ref_reduce(a, b) element for element. For float sums and
// products the kernel may also return b's NaN where both operands are NaN
// (kernels.h): ref_reduce(b, a) differs from ref_reduce(a, b) exactly there.
::testing::AssertionResult reduce_matches(const uint8_t *got, const uint8_t *a, const uint8_t *b,
                                          size_t count, dp_dtype_t d, dp_op_t op) {
    const size_t size = element_size(d);
    Bytes want(count * size + 1), alt(count * size + 1);
    test::ref_reduce(want.data(), a, b, count, d, op);
    test::ref_reduce(alt.data(), b, a, count, d, op);
    const bool commutes = is_float(d) && (op == DP_SUM || op == DP_PROD);
    for (size_t i = 0; i < count; ++i) {
        const size_t at = i * size;
        if (std::memcmp(got + at, &want[at], size) == 0) continue;
        if (commutes && std::memcmp(got + at, &alt[at], size) == 0) continue;
        return ::testing::AssertionFailure()
               << "dtype " << d << " op " << op << " element " << i << " of " << count << ": "
               << hex(a + at, size) << " op " << hex(b + at, size) << " = " << hex(got + at, size)
               << ", want " << hex(&want[at], size);
    }
    return ::testing::AssertionSuccess();
}

// Runs the kernel with dst separate, dst == a and dst == b, at aligned and at
// odd addresses, and checks the result and the guard bytes around dst.
void check_reduce(const Bytes &a, const Bytes &b, size_t count, dp_dtype_t d, dp_op_t op) {
    const size_t bytes = count * element_size(d);
    for (size_t misalign : {size_t{0}, size_t{1}}) {
        for (int placement = 0; placement < 3; ++placement) {
            Buffer ba(bytes, 21), bb(bytes, 22), bd(bytes, 23);
            uint8_t *pa = ba.at(misalign), *pb = bb.at(3 * misalign), *pd = bd.at(5 * misalign);
            if (bytes != 0) {  // an empty vector's data() may be null
                std::memcpy(pa, a.data(), bytes);
                std::memcpy(pb, b.data(), bytes);
            }
            Buffer &out = placement == 0 ? bd : placement == 1 ? ba : bb;
            uint8_t *dst = placement == 0 ? pd : placement == 1 ? pa : pb;
            Bytes image = out.storage;  // only dst's range may change
            reduce(dst, pa, pb, count, d, op);
            ASSERT_TRUE(reduce_matches(dst, a.data(), b.data(), count, d, op))
                << "placement " << placement << " misalign " << misalign;
            std::memcpy(image.data() + (dst - out.storage.data()), dst, bytes);
            ASSERT_TRUE(same_image(out, image)) << "wrote outside dst";
        }
    }
}

TEST_P(KernelReduceTest, EveryDtypeAndOpMatchesReference) {
    uint64_t seed = 100;
    for (dp_dtype_t d : kDtypes) {
        for (dp_op_t op : kOps) {
            if (!deputy::mover::op_applies(unsigned(d), unsigned(op))) continue;
            for (size_t count : kCounts) {
                const Bytes a = reduce_input(d, count, ++seed), b = reduce_input(d, count, ++seed);
                check_reduce(a, b, count, d, op);
                if (HasFatalFailure()) return;
            }
        }
    }
}

// Every special value against every other, in both orders.
TEST_P(KernelReduceTest, AllPairsOfSpecialValues) {
    for (dp_dtype_t d : kDtypes) {
        const std::vector<uint64_t> specials = special_values(d);
        const size_t k = specials.size(), size = element_size(d);
        Bytes a(k * k * size), b(k * k * size);
        for (size_t i = 0; i < k; ++i) {
            for (size_t j = 0; j < k; ++j) {
                std::memcpy(&a[(i * k + j) * size], &specials[i], size);
                std::memcpy(&b[(i * k + j) * size], &specials[j], size);
            }
        }
        for (dp_op_t op : kOps) {
            if (!deputy::mover::op_applies(unsigned(d), unsigned(op))) continue;
            check_reduce(a, b, k * k, d, op);
            if (HasFatalFailure()) return;
        }
    }
}

// MINLOC / MAXLOC on every pair type: values from {-1, 0, 1} (and NaN where
// the value is floating), indices from 0..3, so that most elements tie on
// value, many on both; the padding random (it travels with the winner).
struct PairLayout {
    dp_dtype_t d;
    size_t vsize, ioff, isize;
    bool vfloat, ifloat;
};
const PairLayout kPairs[] = {
    {DP_FLOAT32_INT32, 4, 4, 4, true, false},    {DP_FLOAT64_INT32, 8, 8, 4, true, false},
    {DP_INT64_INT32, 8, 8, 4, false, false},     {DP_INT32_INT32, 4, 4, 4, false, false},
    {DP_INT16_INT32, 2, 4, 4, false, false},     {DP_FLOAT32_FLOAT32, 4, 4, 4, true, true},
    {DP_FLOAT64_FLOAT64, 8, 8, 8, true, true},
};
static_assert(std::size(kPairs) == size_t(DP_DTYPE_COUNT - DP_FLOAT32_INT32), "every pair");

void put_number(uint8_t *at, size_t size, bool floating, int64_t v, bool nan) {
    if (floating && size == 4) {
        const float f = nan ? std::nanf("") : float(v);
        std::memcpy(at, &f, 4);
    } else if (floating) {
        const double x = nan ? std::nan("") : double(v);
        std::memcpy(at, &x, 8);
    } else {
        std::memcpy(at, &v, size);  // little-endian: the low bytes
    }
}

Bytes pair_input(const PairLayout &p, size_t count, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const size_t size = element_size(p.d);
    Bytes out(count * size);
    for (auto &byte : out) byte = uint8_t(rng());
    for (size_t i = 0; i < count; ++i) {
        uint8_t *at = &out[i * size];
        put_number(at, p.vsize, p.vfloat, int64_t(rng() % 3) - 1, p.vfloat && rng() % 8 == 0);
        put_number(at + p.ioff, p.isize, p.ifloat, int64_t(rng() % 4), false);
    }
    return out;
}

TEST_P(KernelReduceTest, LocationOpsOnEveryPairWithTies) {
    uint64_t seed = 500;
    for (const PairLayout &p : kPairs) {
        ASSERT_EQ(element_size(p.d), deputy::mover::dtype_size(p.d)) << p.d;
        for (dp_op_t op : {DP_MINLOC, DP_MAXLOC}) {
            ASSERT_TRUE(deputy::mover::op_applies(unsigned(p.d), unsigned(op)));
            for (size_t count : kCounts) {
                const Bytes a = pair_input(p, count, ++seed), b = pair_input(p, count, ++seed);
                check_reduce(a, b, count, p.d, op);
                if (HasFatalFailure()) return;
            }
        }
        for (dp_op_t op : kOps) EXPECT_FALSE(deputy::mover::op_applies(unsigned(p.d), unsigned(op)));
    }
    for (dp_dtype_t d : kDtypes)
        for (dp_op_t op : {DP_MINLOC, DP_MAXLOC})
            EXPECT_FALSE(deputy::mover::op_applies(unsigned(d), unsigned(op))) << d;
}

// The tie rule itself, spelled out (a reference and a kernel could share a
// mistake): MAXLOC of (1, 3) and (1, 2) is (1, 2) whichever comes first;
// MINLOC of (-1, 3) and (0, 0) is (-1, 3).
TEST_P(KernelReduceTest, LocationOpsFollowMpisRule) {
    struct P {
        int32_t v, i;
    };
    const P a[] = {{1, 3}, {1, 2}, {-1, 3}, {0, 0}, {5, 1}};
    const P b[] = {{1, 2}, {1, 3}, {0, 0}, {-1, 3}, {5, 1}};
    P got[5];
    reduce(got, a, b, 5, DP_INT32_INT32, DP_MAXLOC);
    const P want_max[] = {{1, 2}, {1, 2}, {0, 0}, {0, 0}, {5, 1}};
    for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(got[k].v, want_max[k].v) << k;
        EXPECT_EQ(got[k].i, want_max[k].i) << k;
    }
    reduce(got, a, b, 5, DP_INT32_INT32, DP_MINLOC);
    const P want_min[] = {{1, 2}, {1, 2}, {-1, 3}, {-1, 3}, {5, 1}};
    for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(got[k].v, want_min[k].v) << k;
        EXPECT_EQ(got[k].i, want_min[k].i) << k;
    }
}

// Every float16 and bfloat16 value as an operand (so every conversion path
// and rounding case of the 16-bit types is exercised at every ISA level).
TEST_P(KernelReduceTest, Every16BitFloatValue) {
    std::mt19937_64 rng(24);
    Bytes a(2 * 65536), b(2 * 65536), got(2 * 65536);
    for (size_t i = 0; i < 65536; ++i) {
        const auto v = static_cast<uint16_t>(i), w = static_cast<uint16_t>(rng());
        std::memcpy(&a[2 * i], &v, 2);
        std::memcpy(&b[2 * i], &w, 2);
    }
    for (dp_dtype_t d : {DP_FLOAT16, DP_BFLOAT16}) {
        for (dp_op_t op : kOps) {
            if (!deputy::mover::op_applies(unsigned(d), unsigned(op))) continue;
            reduce(got.data(), a.data(), b.data(), 65536, d, op);
            ASSERT_TRUE(reduce_matches(got.data(), a.data(), b.data(), 65536, d, op));
            reduce(got.data(), a.data(), a.data(), 65536, d, op);  // x op x
            ASSERT_TRUE(reduce_matches(got.data(), a.data(), a.data(), 65536, d, op));
        }
    }
}

// ---- the reference's own conversions, against the hardware ----------------

// The CPU's own conversions: F16C on x86-64, FCVT (in every Armv8-A CPU,
// reached through __fp16) on aarch64; both IEEE, rounding to nearest even.
#if defined(__x86_64__)
bool hw_half_available() { return __builtin_cpu_supports("f16c"); }
__attribute__((target("f16c"))) float hw_half_to_float(uint16_t h) {
    return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#elif defined(__aarch64__)
bool hw_half_available() { return true; }
float hw_half_to_float(uint16_t h) {
    __fp16 v;
    std::memcpy(&v, &h, 2);
    return float(v);
}
uint16_t hw_float_to_half(float f) {
    const __fp16 v = f;
    uint16_t h;
    std::memcpy(&h, &v, 2);
    return h;
}
#else
bool hw_half_available() { return false; }
float hw_half_to_float(uint16_t) { return 0; }
uint16_t hw_float_to_half(float) { return 0; }
#endif

TEST(KernelReferenceTest, HalfConversionsMatchTheCpu) {
    if (!hw_half_available()) GTEST_SKIP() << "no half-precision conversions on this CPU";
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto v = static_cast<uint16_t>(h);
        ASSERT_EQ(test::ref_float_bits(test::ref_half_to_float(v)),
                  test::ref_float_bits(hw_half_to_float(v)))
            << std::hex << h;
    }
    std::vector<float> floats;
    for (uint64_t x = 0; x <= 0xffffffffull; x += 65521) {  // a sweep of all classes
        floats.push_back(test::ref_bits_float(static_cast<uint32_t>(x)));
    }
    // Each finite half, the midpoint to its successor (a tie), and a float
    // either side of that midpoint, with both signs.
    for (uint32_t h = 0; h < 0x7c00; ++h) {
        const double lo = test::ref_half_to_float(static_cast<uint16_t>(h));
        const double hi =
            h == 0x7bff ? 65536.0 : test::ref_half_to_float(static_cast<uint16_t>(h + 1));
        const auto mid = static_cast<float>((lo + hi) / 2);
        for (float f : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f),
                        std::nextafter(mid, INFINITY)}) {
            floats.push_back(f);
            floats.push_back(-f);
        }
    }
    for (float f : floats) {
        ASSERT_EQ(test::ref_float_to_half(f), hw_float_to_half(f))
            << std::hex << test::ref_float_bits(f);
    }
}

TEST(KernelReferenceTest, BfloatConversions) {
    const std::pair<uint32_t, uint16_t> cases[] = {
        {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80},  // tie, even stays
        {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},  // tie, odd rounds up; above tie
        {0x3f807fff, 0x3f80}, {0xbf818000, 0xbf82},  // below tie; negative
        {0x7f7fffff, 0x7f80}, {0xff7fffff, 0xff80},  // overflow to infinity
        {0x7f7f7fff, 0x7f7f}, {0x7f800000, 0x7f80},  // largest that stays; infinity
        {0x7f800001, 0x7fc0}, {0xff812345, 0xffc1},  // NaNs: quiet, top bits kept
        {0x7fffffff, 0x7fff}, {0x00008000, 0x0000},  // NaN all ones; subnormal tie to even
        {0x00018000, 0x0002}, {0x80000000, 0x8000},  // subnormal tie to odd; -0
    };
    for (auto [in, want] : cases) {
        EXPECT_EQ(test::ref_float_to_bfloat(test::ref_bits_float(in)), want) << std::hex << in;
    }
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto v = static_cast<uint16_t>(h);
        const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        ASSERT_EQ(test::ref_float_to_bfloat(test::ref_bfloat_to_float(v)), nan ? (v | 0x40) : v);
    }
}

}  // namespace
}  // namespace deputy::mover::kernels
