// Invalid descriptors, batches and fences through the public C API. Every
// refused descriptor must report its exact status with zero result, bytes and
// value, and leave every destination byte for byte as it was.
#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mover/reference.h"
#include "mover/test_util.h"

namespace deputy::test {
namespace {

constexpr uint64_t kPattern = 0x0123456789abcdefull;

struct Case {
    std::string name;
    dp_desc_t desc;
    uint8_t status;
};

class InvalidTest : public ::testing::Test {
  protected:
    static constexpr size_t kN = 4096;

    void SetUp() override {
        mover_ = open_mover();
        ASSERT_NE(mover_, nullptr);
        src_.fill_random(1);
        src2_.fill_random(2);
        dst_.fill_byte(0x5a);
        dst2_.fill_byte(0x6b);
        big_.fill_random(3);
    }

    // Runs every case, then checks that not one byte of any buffer changed.
    void expect_rejected(const std::vector<Case> &cases) {
        std::vector<std::vector<uint8_t>> before;
        for (Guarded *g : all()) before.push_back(g->snapshot());
        uint64_t user = 1000;
        for (const Case &c : cases) {
            SCOPED_TRACE(c.name);
            dp_desc_t d = c.desc;
            d.user = ++user;
            EXPECT_RECORD(run(mover_.get(), d), c.status, 0, 0, 0, user);
            size_t i = 0;
            for (Guarded *g : all()) {
                ASSERT_TRUE(g->unchanged_since(before[i])) << "buffer " << i << " was written";
                ++i;
            }
        }
    }

    std::vector<Guarded *> all() { return {&src_, &src2_, &dst_, &dst2_, &big_}; }

    MoverPtr mover_;
    Guarded src_{kN, 0}, src2_{kN, 3}, dst_{kN, 0}, dst2_{kN, 1};
    Guarded big_{4 * kN, 0};  // one buffer for overlapping ranges
};

dp_desc_t with_flags(dp_desc_t d, uint32_t flags) {
    d.flags |= flags;
    return d;
}

TEST_F(InvalidTest, InvalidOpcode) {
    std::vector<Case> cases;
    for (int op : {0x0a, 0x0b, 0x0f, 0x16, 0x17, 0x21, 0x3f, 0x41, 0x80, 0xff}) {
        cases.push_back({"opcode " + std::to_string(op),
                         make_desc(uint8_t(op), dst_.address(), src_.address(), kN),
                         DP_COMP_INVALID_OPCODE});
    }
    expect_rejected(cases);
}

TEST_F(InvalidTest, InvalidFlags) {
    const uint64_t d = dst_.address(), s = src_.address();
    expect_rejected({
        {"unknown flag bit 5", with_flags(make_desc(DP_OP_MEMMOVE, d, s, kN), 1u << 5),
         DP_COMP_INVALID_FLAGS},
        {"unknown flag bit 31", with_flags(make_desc(DP_OP_MEMMOVE, d, s, kN), 1u << 31),
         DP_COMP_INVALID_FLAGS},
        {"cached and nontemporal",
         with_flags(make_desc(DP_OP_MEMMOVE, d, s, kN), DP_FLAG_CACHED | DP_FLAG_NONTEMPORAL),
         DP_COMP_INVALID_FLAGS},
        {"cached and nontemporal fill",
         with_flags(make_desc(DP_OP_FILL, d, 0, kN, kPattern),
                    DP_FLAG_CACHED | DP_FLAG_NONTEMPORAL),
         DP_COMP_INVALID_FLAGS},
        {"fence outside a batch", with_flags(make_desc(DP_OP_MEMMOVE, d, s, kN), DP_FLAG_FENCE),
         DP_COMP_INVALID_FLAGS},
        {"fence on a lone noop", with_flags(make_desc(DP_OP_NOOP, 0, 0, 0), DP_FLAG_FENCE),
         DP_COMP_INVALID_FLAGS},
        {"accumulate on memmove",
         with_flags(make_desc(DP_OP_MEMMOVE, d, s, kN), DP_FLAG_ACCUMULATE), DP_COMP_INVALID_FLAGS},
        {"accumulate on fill",
         with_flags(make_desc(DP_OP_FILL, d, 0, kN, kPattern), DP_FLAG_ACCUMULATE),
         DP_COMP_INVALID_FLAGS},
        {"accumulate on copy_crc32c",
         with_flags(make_desc(DP_OP_COPY_CRC32C, d, s, kN), DP_FLAG_ACCUMULATE),
         DP_COMP_INVALID_FLAGS},
    });
}

TEST_F(InvalidTest, NonZeroUnusedFields) {
    const uint64_t d = dst_.address(), s = src_.address(), s2 = src2_.address();
    auto memmove = [&] { return make_desc(DP_OP_MEMMOVE, d, s, kN); };
    dp_desc_t with_src2 = memmove(), with_aux = memmove(), with_dtype = memmove(),
              with_redop = memmove(), with_op_flags = memmove();
    with_src2.src2 = s2;
    with_aux.aux = 10;
    with_dtype.dtype = DP_INT32;
    with_redop.redop = DP_MAX;
    with_op_flags.op_flags = 1;
    dp_desc_t crc_seed_wide = make_desc(DP_OP_CRC32C, 0, s, kN, uint64_t(1) << 32);
    dp_desc_t copy_crc_seed_wide = make_desc(DP_OP_COPY_CRC32C, d, s, kN, ~uint64_t(0));
    dp_desc_t accumulate_src2 = make_reduce(DP_INT32, DP_SUM, d, s, s2, kN, true);
    expect_rejected({
        {"memmove src2", with_src2, DP_COMP_INVALID_FIELD},
        {"memmove aux", with_aux, DP_COMP_INVALID_FIELD},
        {"memmove dtype", with_dtype, DP_COMP_INVALID_FIELD},
        {"memmove redop", with_redop, DP_COMP_INVALID_FIELD},
        {"memmove op_flags", with_op_flags, DP_COMP_INVALID_FIELD},
        {"fill src", make_desc(DP_OP_FILL, d, s, kN, kPattern), DP_COMP_INVALID_FIELD},
        {"noop dst", make_desc(DP_OP_NOOP, d, 0, 0), DP_COMP_INVALID_FIELD},
        {"compare dst", make_desc(DP_OP_COMPARE, d, s, kN, s2), DP_COMP_INVALID_FIELD},
        {"crc32c dst", make_desc(DP_OP_CRC32C, d, s, kN), DP_COMP_INVALID_FIELD},
        {"cache_flush src", make_desc(DP_OP_CACHE_FLUSH, d, s, kN), DP_COMP_INVALID_FIELD},
        {"dualcast aux", make_desc(DP_OP_DUALCAST, d, s, kN, dst2_.address(), 10),
         DP_COMP_INVALID_FIELD},
        {"apply_delta src2", make_desc(DP_OP_APPLY_DELTA, d, s, kN, s2, 10), DP_COMP_INVALID_FIELD},
        {"crc32c seed above 32 bits", crc_seed_wide, DP_COMP_INVALID_FIELD},
        {"copy_crc32c seed above 32 bits", copy_crc_seed_wide, DP_COMP_INVALID_FIELD},
        {"reduce accumulate with src2", accumulate_src2, DP_COMP_INVALID_FIELD},
        {"reduce dtype count", make_reduce(dp_dtype_t(DP_DTYPE_COUNT), DP_SUM, d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
        {"reduce dtype 255", make_reduce(dp_dtype_t(255), DP_SUM, d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
        {"reduce redop count", make_reduce(DP_INT32, dp_op_t(DP_OP_COUNT), d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
        {"reduce redop 200", make_reduce(DP_FLOAT32, dp_op_t(200), d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
        // Logical and bitwise reductions take integer types only.
        {"reduce float32 band", make_reduce(DP_FLOAT32, DP_BAND, d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
        {"reduce bfloat16 land", make_reduce(DP_BFLOAT16, DP_LAND, d, s, s2, kN),
         DP_COMP_INVALID_FIELD},
    });
}

TEST_F(InvalidTest, InvalidSizes) {
    const uint64_t d = dst_.address(), s = src_.address(), s2 = src2_.address();
    expect_rejected({
        {"noop with size", make_desc(DP_OP_NOOP, 0, 0, 1), DP_COMP_INVALID_SIZE},
        {"reduce int32 size 6", make_reduce(DP_INT32, DP_SUM, d, s, s2, 6), DP_COMP_INVALID_SIZE},
        {"reduce float64 size 12", make_reduce(DP_FLOAT64, DP_MIN, d, s, s2, 12),
         DP_COMP_INVALID_SIZE},
        {"reduce bfloat16 size 4095", make_reduce(DP_BFLOAT16, DP_MAX, d, s, s2, 4095),
         DP_COMP_INVALID_SIZE},
        {"create_delta aux 0", make_desc(DP_OP_CREATE_DELTA, d, s, 64, s2, 0),
         DP_COMP_INVALID_SIZE},
        {"create_delta aux 15", make_desc(DP_OP_CREATE_DELTA, d, s, 64, s2, 15),
         DP_COMP_INVALID_SIZE},
        {"apply_delta aux 15", make_desc(DP_OP_APPLY_DELTA, d, s, 64, 0, 15), DP_COMP_INVALID_SIZE},
        // 64 bytes of dst are 8 granules: a record holds at most 8 entries.
        {"apply_delta aux 90 over 64 bytes", make_desc(DP_OP_APPLY_DELTA, d, s, 64, 0, 90),
         DP_COMP_INVALID_SIZE},
        {"create_delta size 12", make_desc(DP_OP_CREATE_DELTA, d, s, 12, s2, 20),
         DP_COMP_INVALID_SIZE},
    });
}

TEST_F(InvalidTest, AboveMaxTransferSize) {
    dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
    config.max_transfer_size = kN;
    mover_ = open_mover(config);
    ASSERT_NE(mover_, nullptr);
    const uint64_t d = dst_.address(), s = src_.address(), s2 = src2_.address();
    Guarded wide(kN + 8);
    // Exactly the limit is fine.
    EXPECT_RECORD(run(mover_.get(), make_desc(DP_OP_CRC32C, 0, s, kN, 0, 0, 1)), DP_COMP_SUCCESS, 0,
                  kN, ref_crc32c(0, src_.data(), kN), 1);
    expect_rejected({
        {"memmove", make_desc(DP_OP_MEMMOVE, d, wide.address(), kN + 1), DP_COMP_INVALID_SIZE},
        {"fill", make_desc(DP_OP_FILL, wide.address(), 0, kN + 1, 7), DP_COMP_INVALID_SIZE},
        {"crc32c", make_desc(DP_OP_CRC32C, 0, wide.address(), kN + 1), DP_COMP_INVALID_SIZE},
        {"reduce", make_reduce(DP_INT32, DP_SUM, d, s, s2, kN + 4), DP_COMP_INVALID_SIZE},
        {"compare", make_desc(DP_OP_COMPARE, 0, s, kN + 8, wide.address()), DP_COMP_INVALID_SIZE},
    });
}

TEST_F(InvalidTest, AddressZeroIsDenied) {
    const uint64_t d = dst_.address(), s = src_.address(), s2 = src2_.address();
    expect_rejected({
        {"memmove src 0", make_desc(DP_OP_MEMMOVE, d, 0, kN), DP_COMP_ADDRESS_DENIED},
        {"memmove dst 0", make_desc(DP_OP_MEMMOVE, 0, s, kN), DP_COMP_ADDRESS_DENIED},
        {"fill dst 0", make_desc(DP_OP_FILL, 0, 0, kN, kPattern), DP_COMP_ADDRESS_DENIED},
        {"compare src2 0", make_desc(DP_OP_COMPARE, 0, s, kN, 0), DP_COMP_ADDRESS_DENIED},
        {"dualcast dst2 0", make_desc(DP_OP_DUALCAST, d, s, kN, 0), DP_COMP_ADDRESS_DENIED},
        {"crc32c src 0", make_desc(DP_OP_CRC32C, 0, 0, kN), DP_COMP_ADDRESS_DENIED},
        {"copy_crc32c dst 0", make_desc(DP_OP_COPY_CRC32C, 0, s, kN), DP_COMP_ADDRESS_DENIED},
        {"cache_flush dst 0", make_desc(DP_OP_CACHE_FLUSH, 0, 0, kN), DP_COMP_ADDRESS_DENIED},
        {"reduce src2 0", make_reduce(DP_INT32, DP_SUM, d, s, 0, kN), DP_COMP_ADDRESS_DENIED},
        {"reduce accumulate dst 0", make_reduce(DP_INT32, DP_SUM, 0, s, 0, kN, true),
         DP_COMP_ADDRESS_DENIED},
        {"create_delta record 0", make_desc(DP_OP_CREATE_DELTA, 0, s, 64, s2, 80),
         DP_COMP_ADDRESS_DENIED},
        {"apply_delta record 0", make_desc(DP_OP_APPLY_DELTA, d, 0, 64, 0, 10),
         DP_COMP_ADDRESS_DENIED},
        // A range that wraps past the top of the address space.
        {"memmove src wraps", make_desc(DP_OP_MEMMOVE, d, UINT64_MAX - 100, kN),
         DP_COMP_ADDRESS_DENIED},
    });
}

TEST_F(InvalidTest, OverlapWhereForbidden) {
    const uint64_t b = big_.address(), s = src_.address(), s2 = src2_.address();
    expect_rejected({
        {"copy_crc32c dst inside src", make_desc(DP_OP_COPY_CRC32C, b + 1, b, kN), DP_COMP_OVERLAP},
        {"copy_crc32c src inside dst", make_desc(DP_OP_COPY_CRC32C, b, b + kN - 1, kN),
         DP_COMP_OVERLAP},
        {"copy_crc32c same buffer", make_desc(DP_OP_COPY_CRC32C, b, b, kN), DP_COMP_OVERLAP},
        {"dualcast dst over src", make_desc(DP_OP_DUALCAST, b + 100, b, kN, b + 2 * kN + 100),
         DP_COMP_OVERLAP},
        {"dualcast dst2 over dst", make_desc(DP_OP_DUALCAST, b, s, kN, b + kN - 8),
         DP_COMP_OVERLAP},
        {"dualcast dst2 over src", make_desc(DP_OP_DUALCAST, b + 2 * kN, b + kN, kN, b + 8),
         DP_COMP_OVERLAP},
        {"create_delta record over src", make_desc(DP_OP_CREATE_DELTA, b + 64, b, 256, s2, 320),
         DP_COMP_OVERLAP},
        {"create_delta record over src2", make_desc(DP_OP_CREATE_DELTA, b + 4, s, 256, b, 320),
         DP_COMP_OVERLAP},
        {"apply_delta record over dst", make_desc(DP_OP_APPLY_DELTA, b, b + 200, 256, 0, 100),
         DP_COMP_OVERLAP},
        {"reduce dst over src", make_reduce(DP_INT32, DP_SUM, b + 4, b, s2, kN), DP_COMP_OVERLAP},
        {"reduce dst over src2", make_reduce(DP_INT32, DP_SUM, b, s, b + kN - 4, kN),
         DP_COMP_OVERLAP},
        {"reduce accumulate dst over src", make_reduce(DP_FLOAT32, DP_MAX, b + 8, b, 0, kN, true),
         DP_COMP_OVERLAP},
    });
}

TEST_F(InvalidTest, MisalignedCompletionRecordDoesNotRun) {
    // The descriptor could never report, so it must not run at all (DSA
    // reports such a descriptor in its error register instead).
    alignas(64) uint8_t record_space[96];
    std::memset(record_space, 0xcc, sizeof(record_space));
    auto dst_before = dst_.snapshot();
    dp_desc_t d = make_desc(DP_OP_MEMMOVE, dst_.address(), src_.address(), kN, 0, 0, 1);
    d.flags = DP_FLAG_COMPLETION;
    d.completion = addr(record_space + 8);
    ASSERT_EQ(dp_mover_submit(mover_.get(), 0, &d), DP_OK);
    // One engine, one queue: once a later NOOP completes, the copy was handled.
    EXPECT_RECORD(run(mover_.get(), make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, 2)), DP_COMP_SUCCESS, 0, 0,
                  0, 2);
    EXPECT_TRUE(dst_.unchanged_since(dst_before));
    for (uint8_t byte : record_space) ASSERT_EQ(byte, 0xcc);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover_.get(), &stats), DP_OK);
    EXPECT_EQ(stats.failed, 1u);
    EXPECT_EQ(stats.bytes, 0u);
}

// ---- batches ---------------------------------------------------------------

// A batch's members and their completion records, kept alive for the batch.
struct Batch {
    std::vector<dp_desc_t> members;
    std::vector<dp_completion_t> records;

    // Adds a member that reports to its own record.
    void add(dp_desc_t d, uint32_t extra_flags = 0) {
        d.flags |= DP_FLAG_COMPLETION | extra_flags;
        d.user = 100 + members.size();
        members.push_back(d);
    }
    // Points each member at its record (after the last add: records must not move).
    dp_desc_t descriptor(uint64_t user) {
        records = std::vector<dp_completion_t>(members.size());
        std::memset(records.data(), 0, records.size() * sizeof(dp_completion_t));
        for (size_t i = 0; i < members.size(); ++i)
            if (members[i].flags & DP_FLAG_COMPLETION) members[i].completion = addr(&records[i]);
        return make_desc(DP_OP_BATCH, 0, addr(members.data()), members.size(), 0, 0, user);
    }
    Record record(size_t i) const { return read_record(records[i]); }
};

TEST(MoverBatch, AllMembersSucceed) {
    MoverPtr mover = open_mover();
    constexpr size_t kMembers = 64;  // the default max_batch_size
    Guarded src(kMembers * 100);
    src.fill_random(4);
    std::vector<std::unique_ptr<Guarded>> dsts;
    Batch batch;
    for (size_t i = 0; i < kMembers; ++i) {
        dsts.push_back(std::make_unique<Guarded>(i + 1, i % 7));
        batch.add(make_desc(DP_OP_MEMMOVE, dsts[i]->address(), src.address() + i * 100, i + 1));
    }
    // mover.h: a BATCH record's bytes_completed counts the members completed.
    EXPECT_RECORD(run(mover.get(), batch.descriptor(55)), DP_COMP_SUCCESS, 0, kMembers, 0, 55);
    for (size_t i = 0; i < kMembers; ++i) {
        SCOPED_TRACE(i);
        EXPECT_RECORD(batch.record(i), DP_COMP_SUCCESS, 0, i + 1, 0, 100 + i);
        EXPECT_EQ(std::memcmp(dsts[i]->data(), src.data() + i * 100, i + 1), 0);
        EXPECT_TRUE(dsts[i]->guards_intact());
    }
}

TEST(MoverBatch, OneBadMember) {
    MoverPtr mover = open_mover();
    Guarded a(4096), b(4096), c(1000), d(4096), e(4096);
    a.fill_random(1);
    b.fill_byte(0);
    c.fill_byte(0xc3);
    std::memcpy(d.data(), a.data(), 4096);
    auto c_before = c.snapshot();
    Batch batch;
    batch.add(make_desc(DP_OP_MEMMOVE, b.address(), a.address(), 4096));        // 0 ok
    batch.add(make_desc(DP_OP_FILL, c.address(), 0, 0, kPattern));              // 1 size 0
    batch.add(make_desc(DP_OP_COMPARE, 0, a.address(), 4096, d.address()));     // 2 equal
    batch.add(make_desc(DP_OP_COMPARE_PATTERN, 0, a.address(), 64, kPattern));  // 3 differs
    batch.add(make_desc(DP_OP_CRC32C, 0, a.address(), 4096, 0x1234));           // 4
    dp_desc_t fill = make_desc(DP_OP_FILL, e.address(), 0, 4096, kPattern);     // 5 no record
    batch.members.push_back(fill);
    EXPECT_RECORD(run(mover.get(), batch.descriptor(77)), DP_COMP_BATCH_FAILED, 1, 6, 0, 77);
    EXPECT_RECORD(batch.record(0), DP_COMP_SUCCESS, 0, 4096, 0, 100);
    EXPECT_EQ(std::memcmp(b.data(), a.data(), 4096), 0);
    EXPECT_RECORD(batch.record(1), DP_COMP_INVALID_SIZE, 0, 0, 0, 101);
    EXPECT_TRUE(c.unchanged_since(c_before));
    EXPECT_RECORD(batch.record(2), DP_COMP_SUCCESS, 0, 4096, 0, 102);
    size_t first = 0;
    while (a.data()[first] == uint8_t(kPattern >> (8 * (first % 8)))) ++first;
    EXPECT_RECORD(batch.record(3), DP_COMP_FALSE_PREDICATE, 1, 64, first, 103);
    EXPECT_RECORD(batch.record(4), DP_COMP_SUCCESS, 0, 4096, ref_crc32c(0x1234, a.data(), 4096),
                  104);
    EXPECT_EQ(batch.records[5].status, DP_COMP_PENDING);  // asked for no record
    for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(e.data()[i], uint8_t(kPattern >> (8 * (i % 8))));
}

TEST(MoverBatch, InvalidBatchDescriptors) {
    MoverPtr mover = open_mover();
    Guarded src(64), dst(64);
    src.fill_random(1);
    auto dst_before = dst.snapshot();
    // 65 good members: one more than max_batch_size.
    Batch batch;
    for (int i = 0; i < 65; ++i)
        batch.add(make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), 64));
    dp_desc_t too_many = batch.descriptor(1);
    EXPECT_RECORD(run(mover.get(), too_many), DP_COMP_INVALID_BATCH, 0, 0, 0, 1);
    dp_desc_t none = too_many;
    none.size = 0;
    none.user = 2;
    EXPECT_RECORD(run(mover.get(), none), DP_COMP_INVALID_BATCH, 0, 0, 0, 2);
    dp_desc_t fenced = too_many;
    fenced.size = 2;
    fenced.flags = DP_FLAG_FENCE;
    fenced.user = 3;
    EXPECT_RECORD(run(mover.get(), fenced), DP_COMP_INVALID_FLAGS, 0, 0, 0, 3);
    dp_desc_t with_dst = too_many;
    with_dst.size = 2;
    with_dst.dst = dst.address();
    with_dst.user = 4;
    EXPECT_RECORD(run(mover.get(), with_dst), DP_COMP_INVALID_FIELD, 0, 0, 0, 4);
    dp_desc_t no_array = make_desc(DP_OP_BATCH, 0, 0, 2, 0, 0, 5);
    EXPECT_RECORD(run(mover.get(), no_array), DP_COMP_ADDRESS_DENIED, 0, 0, 0, 5);
    // None of the members ran or reported.
    EXPECT_TRUE(dst.unchanged_since(dst_before));
    for (const dp_completion_t &r : batch.records) ASSERT_EQ(r.status, DP_COMP_PENDING);
}

TEST(MoverBatch, MaxBatchSizeIsPerQueue) {
    dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
    config.max_batch_size = 3;
    MoverPtr mover = open_mover(config);
    Batch batch;
    for (int i = 0; i < 4; ++i) batch.add(make_desc(DP_OP_NOOP, 0, 0, 0));
    dp_desc_t d = batch.descriptor(9);
    EXPECT_RECORD(run(mover.get(), d), DP_COMP_INVALID_BATCH, 0, 0, 0, 9);
    d.size = 3;
    EXPECT_RECORD(run(mover.get(), d), DP_COMP_SUCCESS, 0, 3, 0, 9);
    for (size_t i = 0; i < 3; ++i)
        EXPECT_RECORD(batch.record(i), DP_COMP_SUCCESS, 0, 0, 0, 100 + i);
    EXPECT_EQ(batch.records[3].status, DP_COMP_PENDING);
}

TEST(MoverBatch, NestedBatchAndDrainMembers) {
    MoverPtr mover = open_mover();
    Guarded src(256), dst(256);
    src.fill_random(8);
    dp_desc_t inner_members[1] = {make_desc(DP_OP_NOOP, 0, 0, 0)};
    Batch batch;
    batch.add(make_desc(DP_OP_BATCH, 0, addr(inner_members), 1));
    batch.add(make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), 256));
    batch.add(make_desc(DP_OP_DRAIN, 0, 0, 0));
    EXPECT_RECORD(run(mover.get(), batch.descriptor(3)), DP_COMP_BATCH_FAILED, 2, 3, 0, 3);
    EXPECT_RECORD(batch.record(0), DP_COMP_INVALID_OPCODE, 0, 0, 0, 100);
    EXPECT_RECORD(batch.record(1), DP_COMP_SUCCESS, 0, 256, 0, 101);
    EXPECT_RECORD(batch.record(2), DP_COMP_INVALID_OPCODE, 0, 0, 0, 102);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), 256), 0);
}

TEST(MoverBatch, MemberWithMisalignedRecordDoesNotRun) {
    MoverPtr mover = open_mover();
    Guarded src(256), dst(256), dst2(256);
    src.fill_random(8);
    auto dst_before = dst.snapshot();
    Batch batch;
    batch.add(make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), 256));
    batch.add(make_desc(DP_OP_MEMMOVE, dst2.address(), src.address(), 256));
    dp_desc_t d = batch.descriptor(4);
    batch.members[0].completion += 16;  // inside the record array, misaligned
    EXPECT_RECORD(run(mover.get(), d), DP_COMP_BATCH_FAILED, 1, 2, 0, 4);
    EXPECT_TRUE(dst.unchanged_since(dst_before));
    EXPECT_EQ(batch.records[0].status, DP_COMP_PENDING);
    EXPECT_EQ(batch.records[1].status, DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(dst2.data(), src.data(), 256), 0);
}

// ---- fences ------------------------------------------------------------------

TEST(MoverFence, FencedMemberSeesEarlierWrites) {
    MoverPtr mover = open_mover();
    for (size_t n : {size_t(1), size_t(4095), size_t(1) << 20}) {
        SCOPED_TRACE(n);
        Guarded a(n), b(n), c(n);
        a.fill_random(n);
        b.fill_byte(1);
        c.fill_byte(2);
        Batch batch;
        batch.add(make_desc(DP_OP_MEMMOVE, b.address(), a.address(), n));
        batch.add(make_desc(DP_OP_MEMMOVE, c.address(), b.address(), n), DP_FLAG_FENCE);
        EXPECT_RECORD(run(mover.get(), batch.descriptor(1)), DP_COMP_SUCCESS, 0, 2, 0, 1);
        EXPECT_EQ(std::memcmp(c.data(), a.data(), n), 0);
        EXPECT_TRUE(c.guards_intact());
    }
}

TEST(MoverFence, FailureAbandonsTheFencedMemberAndEverythingAfter) {
    // mover.h, DP_FLAG_FENCE: "if one failed, this and later members are not
    // executed (status DP_COMP_ABANDONED)".
    MoverPtr mover = open_mover();
    Guarded a(512), b(512), c(512), d(512), e(512);
    a.fill_random(2);
    b.fill_byte(0);
    auto c_before = c.snapshot(), d_before = d.snapshot(), e_before = e.snapshot();
    Batch batch;
    batch.add(make_desc(DP_OP_MEMMOVE, b.address(), a.address(), 512));                 // runs
    batch.add(make_desc(DP_OP_MEMMOVE, 0, a.address(), 512));                           // fails
    batch.add(make_desc(DP_OP_MEMMOVE, c.address(), a.address(), 512), DP_FLAG_FENCE);  // abandoned
    batch.add(make_desc(DP_OP_MEMMOVE, d.address(), a.address(), 512));                 // abandoned
    batch.add(make_desc(DP_OP_FILL, e.address(), 0, 512, kPattern), DP_FLAG_FENCE);     // abandoned
    EXPECT_RECORD(run(mover.get(), batch.descriptor(6)), DP_COMP_BATCH_FAILED, 4, 2, 0, 6);
    EXPECT_RECORD(batch.record(0), DP_COMP_SUCCESS, 0, 512, 0, 100);
    EXPECT_RECORD(batch.record(1), DP_COMP_ADDRESS_DENIED, 0, 0, 0, 101);
    EXPECT_RECORD(batch.record(2), DP_COMP_ABANDONED, 0, 0, 0, 102);
    EXPECT_RECORD(batch.record(3), DP_COMP_ABANDONED, 0, 0, 0, 103);
    EXPECT_RECORD(batch.record(4), DP_COMP_ABANDONED, 0, 0, 0, 104);
    EXPECT_EQ(std::memcmp(b.data(), a.data(), 512), 0);
    EXPECT_TRUE(c.unchanged_since(c_before));
    EXPECT_TRUE(d.unchanged_since(d_before));
    EXPECT_TRUE(e.unchanged_since(e_before));
    // Abandoned members have a status, so they count as completed (and
    // failed): "failed" never exceeds "completed".
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover.get(), &stats), DP_OK);
    EXPECT_EQ(stats.completed, 1u + 5u);  // the batch and its five members
    EXPECT_EQ(stats.failed, 1u + 4u);     // the batch, the bad member, three abandoned
    EXPECT_EQ(stats.bytes, 512u);         // only member 0 moved data
}

TEST(MoverFence, FailureWithoutAFenceDoesNotStopLaterMembers) {
    MoverPtr mover = open_mover();
    Guarded a(512), c(512);
    a.fill_random(3);
    Batch batch;
    batch.add(make_desc(DP_OP_MEMMOVE, c.address(), a.address(), 0));  // fails
    batch.add(make_desc(DP_OP_MEMMOVE, c.address(), a.address(), 512));
    EXPECT_RECORD(run(mover.get(), batch.descriptor(7)), DP_COMP_BATCH_FAILED, 1, 2, 0, 7);
    EXPECT_RECORD(batch.record(0), DP_COMP_INVALID_SIZE, 0, 0, 0, 100);
    EXPECT_RECORD(batch.record(1), DP_COMP_SUCCESS, 0, 512, 0, 101);
    EXPECT_EQ(std::memcmp(c.data(), a.data(), 512), 0);
}

TEST(MoverFence, FalsePredicateIsNotAFailure) {
    // A compare that finds a difference succeeded: a fence after it runs.
    MoverPtr mover = open_mover();
    Guarded a(64), b(64), c(64);
    a.fill_byte(1);
    b.fill_byte(2);
    Batch batch;
    batch.add(make_desc(DP_OP_COMPARE, 0, a.address(), 64, b.address()));
    batch.add(make_desc(DP_OP_MEMMOVE, c.address(), a.address(), 64), DP_FLAG_FENCE);
    EXPECT_RECORD(run(mover.get(), batch.descriptor(8)), DP_COMP_SUCCESS, 0, 2, 0, 8);
    EXPECT_RECORD(batch.record(0), DP_COMP_FALSE_PREDICATE, 1, 64, 0, 100);
    EXPECT_RECORD(batch.record(1), DP_COMP_SUCCESS, 0, 64, 0, 101);
    EXPECT_EQ(std::memcmp(c.data(), a.data(), 64), 0);
}

}  // namespace
}  // namespace deputy::test
