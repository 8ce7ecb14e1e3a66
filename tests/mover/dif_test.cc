// The DIF operations (mover.h, "DIF operations") through the device, against
// the bitwise CRC16 T10-DIF of reference.h, ISA-L's own, and the standard
// check value: every block size and CRC inversion; tags incrementing and
// fixed; pass-through; the T10 escapes; each failure named at its block,
// with nothing of the failing block written; and every field a DIF
// descriptor must not carry refused by name.
#include <deputy/mover.h>
#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include <cstring>
#include <random>
#include <vector>

#include "mover/kernels.h"
#include "mover/reference.h"
#include "mover/test_util.h"

namespace deputy::test {
namespace {

constexpr uint32_t kBlockSizes[4] = {512, 520, 4096, 4104};
constexpr uint32_t kRef = 0x87654321;
constexpr uint16_t kApp = 0xdcba;

dp_desc_t dif_desc(uint8_t op, uint64_t dst, uint64_t src, uint64_t size, unsigned block_code,
                   uint64_t src_tags, uint64_t dst_tags) {
    dp_desc_t d = make_desc(op, dst, src, size, src_tags, dst_tags);
    d.op_flags = uint8_t(block_code);
    return d;
}

// Reads the big-endian tuple after block i of a protected buffer.
struct Tuple {
    uint16_t guard, app;
    uint32_t ref;
};
Tuple tuple_at(const uint8_t *p, uint32_t block, uint64_t i) {
    const uint8_t *t = p + i * (block + DP_DIF_TUPLE_SIZE) + block;
    return {uint16_t(t[0] << 8 | t[1]), uint16_t(t[2] << 8 | t[3]),
            uint32_t(t[4]) << 24 | uint32_t(t[5]) << 16 | uint32_t(t[6]) << 8 | t[7]};
}

using DifTest = MoverFixture;

TEST(DifGuardTest, KnownVectorsAndIsalAgree) {
    const char *check = "123456789";
    EXPECT_EQ(ref_crc16_t10dif(0, check, 9), 0xD0DB);  // CRC-16/T10-DIF's catalogued check value
    EXPECT_EQ(mover::kernels::dif_guard(check, 9, 0), 0xD0DB);
    EXPECT_EQ(crc16_t10dif(0, reinterpret_cast<const unsigned char *>(check), 9), 0xD0DB);
    std::vector<uint8_t> zeros(4104, 0);
    EXPECT_EQ(mover::kernels::dif_guard(zeros.data(), 512, 0), 0);  // a zero block's guard is 0
    // Every block size and inversion, random data: the kernel, ISA-L and
    // the bitwise reference agree.
    std::mt19937 rng(11);
    std::vector<uint8_t> block(4104);
    for (uint32_t n : kBlockSizes) {
        for (unsigned flags = 0; flags < 4; ++flags) {
            const unsigned op_flags = flags << 2;
            for (uint8_t &b : block) b = uint8_t(rng());
            const uint16_t want = ref_dif_guard(block.data(), n, op_flags);
            EXPECT_EQ(mover::kernels::dif_guard(block.data(), n, op_flags), want)
                << n << " flags " << op_flags;
            uint16_t isal = crc16_t10dif(op_flags & DP_DIF_INVERT_CRC_SEED ? 0xffff : 0, block.data(), n);
            if (op_flags & DP_DIF_INVERT_CRC_RESULT) isal = uint16_t(~isal);
            EXPECT_EQ(isal, want);
        }
    }
}

TEST_F(DifTest, InsertWritesEachBlockAndItsTupleForEveryBlockSize) {
    for (unsigned code = 0; code < 4; ++code) {
        const uint32_t block = kBlockSizes[code];
        const uint64_t blocks = 5;
        Guarded src(block * blocks, 3), dst((block + 8) * blocks, 5);
        src.fill_random(code + 1);
        for (unsigned inv = 0; inv < 4; ++inv) {
            dp_desc_t d = dif_desc(DP_OP_DIF_INSERT, dst.address(), src.address(), block * blocks,
                                   code, 0, DP_DIF_TAGS(kRef, 0, kApp));
            d.op_flags |= uint8_t(inv << 2);
            d.redop = DP_DIF_DST_APP_TAG_INCREMENT;
            EXPECT_RECORD(run(d), DP_COMP_SUCCESS, 0, block * blocks,
                          DP_DIF_TAGS(kRef + blocks, 0, kApp + blocks), 0);
            for (uint64_t i = 0; i < blocks; ++i) {
                const uint8_t *out = dst.data() + i * (block + 8);
                ASSERT_EQ(std::memcmp(out, src.data() + i * block, block), 0) << "block " << i;
                const Tuple t = tuple_at(dst.data(), block, i);
                EXPECT_EQ(t.guard, ref_dif_guard(src.data() + i * block, block, inv << 2));
                EXPECT_EQ(t.app, uint16_t(kApp + i));
                EXPECT_EQ(t.ref, kRef + i);
            }
            EXPECT_TRUE(dst.guards_intact());
        }
    }
}

TEST_F(DifTest, CheckStripAndUpdateRoundTrip) {
    for (unsigned code = 0; code < 4; ++code) {
        const uint32_t block = kBlockSizes[code], unit = block + 8;
        const uint64_t blocks = 4;
        Guarded data(block * blocks), prot(unit * blocks), stripped(block * blocks), updated(unit * blocks);
        data.fill_random(40 + code);
        // Insert with the reference's fixed-app, incrementing-ref tags...
        EXPECT_EQ(run(dif_desc(DP_OP_DIF_INSERT, prot.address(), data.address(), block * blocks,
                               code, 0, DP_DIF_TAGS(kRef, 0, kApp)))
                      .status,
                  DP_COMP_SUCCESS);
        std::vector<uint8_t> want(unit * blocks);
        for (uint64_t i = 0; i < blocks; ++i)
            std::memcpy(want.data() + i * unit, data.data() + i * block, block);
        ref_protect(want.data(), block, blocks, kRef, kApp, 0);
        ASSERT_EQ(std::memcmp(prot.data(), want.data(), want.size()), 0) << block;
        // ...checks clean...
        const uint64_t next = DP_DIF_TAGS(kRef + blocks, 0, kApp);
        EXPECT_RECORD(run(dif_desc(DP_OP_DIF_CHECK, 0, prot.address(), unit * blocks, code,
                                   DP_DIF_TAGS(kRef, 0, kApp), 0)),
                      DP_COMP_SUCCESS, 0, unit * blocks, next, 0);
        // ...strips back to the data...
        EXPECT_RECORD(run(dif_desc(DP_OP_DIF_STRIP, stripped.address(), prot.address(), unit * blocks,
                                   code, DP_DIF_TAGS(kRef, 0, kApp), 0)),
                      DP_COMP_SUCCESS, 0, unit * blocks, next, 0);
        EXPECT_EQ(std::memcmp(stripped.data(), data.data(), block * blocks), 0);
        // ...and updates to new tags (fixed ref, incrementing app), keeping the guard.
        dp_desc_t u = dif_desc(DP_OP_DIF_UPDATE, updated.address(), prot.address(), unit * blocks,
                               code, DP_DIF_TAGS(kRef, 0, kApp), DP_DIF_TAGS(7, 0, 100));
        u.redop = DP_DIF_DST_REF_TAG_FIXED | DP_DIF_DST_APP_TAG_INCREMENT;
        EXPECT_RECORD(run(u), DP_COMP_SUCCESS, 0, unit * blocks, next, 0);
        std::vector<uint8_t> want2(want);
        ref_protect(want2.data(), block, blocks, 7, 100, 0, /*ref_fixed=*/true, /*app_increment=*/true);
        EXPECT_EQ(std::memcmp(updated.data(), want2.data(), want2.size()), 0) << block;
        // Pass-through copies the source's fields whatever the new tags say.
        u.redop = DP_DIF_DST_REF_TAG_PASS | DP_DIF_DST_APP_TAG_PASS | DP_DIF_DST_GUARD_PASS;
        EXPECT_EQ(run(u).status, DP_COMP_SUCCESS);
        EXPECT_EQ(std::memcmp(updated.data(), prot.data(), unit * blocks), 0) << block;
        EXPECT_TRUE(updated.guards_intact() && stripped.guards_intact() && prot.guards_intact());
    }
}

TEST_F(DifTest, EachFailureIsNamedAtItsBlockAndNothingOfItIsWritten) {
    const uint32_t block = 512, unit = 520;
    const uint64_t blocks = 6;
    Guarded prot(unit * blocks), out(block * blocks);
    std::vector<uint8_t> clean(unit * blocks);
    std::mt19937 rng(5);
    for (uint8_t &b : clean) b = uint8_t(rng());
    ref_protect(clean.data(), block, blocks, kRef, kApp, 0);
    const uint64_t tags = DP_DIF_TAGS(kRef, 0, kApp);
    auto strip = [&] {
        out.fill_byte(0xEE);
        return run(dif_desc(DP_OP_DIF_STRIP, out.address(), prot.address(), unit * blocks, 0, tags, 0));
    };
    // Each field of block 3's tuple, and its data.
    struct Damage {
        size_t offset;
        uint32_t error;
    } damages[] = {{3 * unit + 100, DP_DIF_ERR_GUARD},
                   {3 * unit + block + 0, DP_DIF_ERR_GUARD},
                   {3 * unit + block + 3, DP_DIF_ERR_APP_TAG},
                   {3 * unit + block + 7, DP_DIF_ERR_REF_TAG}};
    for (const Damage &damage : damages) {
        std::memcpy(prot.data(), clean.data(), clean.size());
        prot.data()[damage.offset] ^= 0x10;
        EXPECT_RECORD(strip(), DP_COMP_DIF_ERROR, damage.error, 3 * unit,
                      DP_DIF_TAGS(kRef + 3, 0, kApp), 0);
        // Blocks 0-2 written, block 3 and after untouched.
        EXPECT_EQ(std::memcmp(out.data(), clean.data(), block), 0);
        EXPECT_EQ(std::memcmp(out.data() + 2 * block, clean.data() + 2 * unit, block), 0);
        for (size_t i = 3 * block; i < blocks * block; ++i) ASSERT_EQ(out.data()[i], 0xEE) << i;
        EXPECT_TRUE(out.guards_intact());
    }
    // Checks turned off do not fail; the app tag mask hides the bits it sets.
    std::memcpy(prot.data(), clean.data(), clean.size());
    prot.data()[3 * unit + block + 7] ^= 1;  // ref tag
    dp_desc_t c = dif_desc(DP_OP_DIF_CHECK, 0, prot.address(), unit * blocks, 0, tags, 0);
    c.dtype = DP_DIF_SRC_REF_TAG_CHECK_OFF;
    EXPECT_EQ(run(c).status, DP_COMP_SUCCESS);
    std::memcpy(prot.data(), clean.data(), clean.size());
    prot.data()[3 * unit + block + 3] ^= 0x0f;  // app tag low bits
    c = dif_desc(DP_OP_DIF_CHECK, 0, prot.address(), unit * blocks, 0, DP_DIF_TAGS(kRef, 0x000f, kApp), 0);
    EXPECT_EQ(run(c).status, DP_COMP_SUCCESS);
    c.src2 = DP_DIF_TAGS(kRef, 0x0007, kApp);
    EXPECT_RECORD(run(c), DP_COMP_DIF_ERROR, DP_DIF_ERR_APP_TAG, 3 * unit,
                  DP_DIF_TAGS(kRef + 3, 0x0007, kApp), 0);
    std::memcpy(prot.data(), clean.data(), clean.size());
    prot.data()[3 * unit + 5] ^= 1;  // data
    c = dif_desc(DP_OP_DIF_CHECK, 0, prot.address(), unit * blocks, 0, tags, 0);
    c.dtype = DP_DIF_SRC_GUARD_CHECK_OFF;
    EXPECT_EQ(run(c).status, DP_COMP_SUCCESS);
}

TEST_F(DifTest, EscapesSkipTheirBlocksAndAnAllOnesTupleFailsWhenAsked) {
    const uint32_t block = 512, unit = 520;
    Guarded prot(unit * 3);
    prot.fill_random(9);
    ref_protect(prot.data(), block, 3, 10, 20, 0);
    const uint64_t tags = DP_DIF_TAGS(10, 0, 20);
    auto check = [&](unsigned src_flags) {
        dp_desc_t c = dif_desc(DP_OP_DIF_CHECK, 0, prot.address(), unit * 3, 0, tags, 0);
        c.dtype = uint8_t(src_flags);
        return run(c);
    };
    // Block 1: application tag 0xffff, garbage elsewhere.
    ref_write_tuple(prot.data() + unit + block, 0x1234, 0xffff, 0x55);
    EXPECT_EQ(check(0).status, DP_COMP_DIF_ERROR);
    EXPECT_EQ(check(DP_DIF_SRC_APP_F_DETECT).status, DP_COMP_SUCCESS);
    EXPECT_EQ(check(DP_DIF_SRC_APP_REF_F_DETECT).status, DP_COMP_DIF_ERROR);  // ref is not all ones
    ref_write_tuple(prot.data() + unit + block, 0x1234, 0xffff, 0xffffffff);
    EXPECT_EQ(check(DP_DIF_SRC_APP_REF_F_DETECT).status, DP_COMP_SUCCESS);
    // All eight bytes ones: an escape, or a failure with ALL_F_ERROR.
    ref_write_tuple(prot.data() + unit + block, 0xffff, 0xffff, 0xffffffff);
    EXPECT_EQ(check(DP_DIF_SRC_ALL_F_DETECT).status, DP_COMP_SUCCESS);
    EXPECT_RECORD(check(DP_DIF_SRC_ALL_F_DETECT | DP_DIF_SRC_ALL_F_ERROR), DP_COMP_DIF_ERROR,
                  DP_DIF_ERR_ALL_F, unit, DP_DIF_TAGS(11, 0, 20), 0);
    // Source tag types: a fixed ref tag and an incrementing app tag.
    ref_protect(prot.data(), block, 3, 10, 20, 0, /*ref_fixed=*/true, /*app_increment=*/true);
    EXPECT_EQ(check(0).status, DP_COMP_DIF_ERROR);
    EXPECT_RECORD(check(DP_DIF_SRC_REF_TAG_FIXED | DP_DIF_SRC_APP_TAG_INCREMENT), DP_COMP_SUCCESS, 0,
                  unit * 3, DP_DIF_TAGS(10, 0, 23), 0);
}

TEST_F(DifTest, FieldsADifDescriptorMustNotCarryAreRefusedByName) {
    Guarded src(520 * 2), dst(520 * 2);
    const uint64_t s = src.address(), d = dst.address();
    const auto before = dst.snapshot();
    auto status = [&](dp_desc_t desc) { return status_text(run(desc).status); };
    const uint64_t tags = DP_DIF_TAGS(1, 0, 2);
    // Sizes: not a whole number of blocks (with tuples, or without for insert).
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_CHECK, 0, s, 1000, 0, tags, 0)), status_text(DP_COMP_INVALID_SIZE));
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_INSERT, d, s, 520, 0, 0, tags)), status_text(DP_COMP_INVALID_SIZE));
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_STRIP, d, s, 512, 0, tags, 0)), status_text(DP_COMP_INVALID_SIZE));
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_UPDATE, d, s, 0, 0, tags, tags)), status_text(DP_COMP_INVALID_SIZE));
    // Fields: op_flags bits above the inversions; destination flags where
    // nothing is written or in their reserved bits; pass-through on insert;
    // source flags on insert; a destination or destination tags on check.
    dp_desc_t x = dif_desc(DP_OP_DIF_CHECK, 0, s, 520, 0, tags, 0);
    x.op_flags |= 0x10;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    x = dif_desc(DP_OP_DIF_CHECK, 0, s, 520, 0, tags, 0);
    x.redop = DP_DIF_DST_REF_TAG_FIXED;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    x = dif_desc(DP_OP_DIF_UPDATE, d, s, 520, 0, tags, tags);
    x.redop = 0x04;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    x = dif_desc(DP_OP_DIF_INSERT, d, s, 512, 0, 0, tags);
    x.redop = DP_DIF_DST_GUARD_PASS;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    x = dif_desc(DP_OP_DIF_INSERT, d, s, 512, 0, 0, tags);
    x.dtype = DP_DIF_SRC_GUARD_CHECK_OFF;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    x = dif_desc(DP_OP_DIF_INSERT, d, s, 512, 0, tags, tags);  // src2 on insert
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FIELD));
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_CHECK, d, s, 520, 0, tags, 0)), status_text(DP_COMP_INVALID_FIELD));
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_STRIP, d, s, 520, 0, tags, tags)), status_text(DP_COMP_INVALID_FIELD));
    // Overlap of source and destination; a flag only REDUCE takes.
    EXPECT_EQ(status(dif_desc(DP_OP_DIF_UPDATE, s + 8, s, 520, 0, tags, tags)), status_text(DP_COMP_OVERLAP));
    x = dif_desc(DP_OP_DIF_STRIP, d, s, 520, 0, tags, 0);
    x.flags = DP_FLAG_ACCUMULATE;
    EXPECT_EQ(status(x), status_text(DP_COMP_INVALID_FLAGS));
    // Nothing refused wrote a byte.
    EXPECT_TRUE(dst.unchanged_since(before));
}

}  // namespace
}  // namespace deputy::test
