// The agent as its clients see it: a real `deputy agent` process, clients
// through the public C API (dp_init, dp_malloc, dp_mem_register,
// dp_mover_attach). Results are checked byte for byte against the same
// descriptor run on an in-process mover (itself checked against scalar
// references in tests/mover).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include "agent_test_util.h"
#include "client/handles.h"

namespace {

using deputy::testing::AgentProcess;
using deputy::testing::target_shell;

struct Client {
    dp_context_t *ctx = nullptr;
    dp_mover_t *mover = nullptr;
    explicit Client(const dp_config_t &config, dp_status_t expect = DP_OK) {
        EXPECT_EQ(dp_init(&config, &ctx), expect);
        if (ctx) {
            EXPECT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
        }
    }
    ~Client() {
        if (mover) dp_mover_close(mover);
        if (ctx) dp_finalize(ctx);
    }
    // Submits and waits (2 s bound); returns the record's status.
    uint8_t run(dp_desc_t d, dp_completion_t *record) {
        std::memset(record, 0, sizeof(*record));
        d.flags |= DP_FLAG_COMPLETION;
        d.completion = reinterpret_cast<uint64_t>(record);
        EXPECT_EQ(dp_mover_submit(mover, 0, &d), DP_OK);
        EXPECT_EQ(dp_mover_wait(mover, record, DP_WAIT_YIELD, 2'000'000'000), DP_OK);
        return record->status;
    }
};

void fill_random(void *p, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    auto *b = static_cast<uint8_t *>(p);
    for (size_t i = 0; i < n; ++i) b[i] = uint8_t(rng());
}

dp_desc_t memmove_desc(const void *src, void *dst, size_t n) {
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.src = reinterpret_cast<uint64_t>(src);
    d.dst = reinterpret_cast<uint64_t>(dst);
    d.size = n;
    return d;
}

// The same descriptor on an in-process device: the reference result.
dp_completion_t local_reference(dp_desc_t d) {
    static dp_mover_t *local = [] {
        dp_mover_t *m = nullptr;
        dp_mover_open(nullptr, &m);
        return m;
    }();
    static dp_completion_t record;
    std::memset(&record, 0, sizeof(record));
    d.flags |= DP_FLAG_COMPLETION;
    d.completion = reinterpret_cast<uint64_t>(&record);
    EXPECT_EQ(dp_mover_submit(local, 0, &d), DP_OK);
    EXPECT_EQ(dp_mover_wait(local, &record, DP_WAIT_SPIN, 2'000'000'000), DP_OK);
    return record;
}

class AgentTest : public ::testing::Test {
  protected:
    AgentProcess agent;
    void SetUp() override { ASSERT_TRUE(agent.running()); }
};

// A memmove of n random bytes between two of the client's pool buffers,
// checked bit for bit with 64 guard bytes after it; then, when crc is set, a
// CRC32C of the source against the local device's.
void expect_pooled_memmove(Client &c, size_t n, bool crc = false) {
    auto *src = static_cast<uint8_t *>(dp_malloc(c.ctx, n));
    auto *dst = static_cast<uint8_t *>(dp_malloc(c.ctx, n + 64));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, sizeof(dp_completion_t)));
    ASSERT_TRUE(src && dst && record);
    fill_random(src, n, uint32_t(n));
    std::memset(dst, 0xee, n + 64);
    EXPECT_EQ(c.run(memmove_desc(src, dst, n), record), DP_COMP_SUCCESS) << n;
    EXPECT_EQ(record->bytes_completed, n);
    EXPECT_EQ(std::memcmp(src, dst, n), 0) << n;
    for (size_t i = n; i < n + 64; ++i) EXPECT_EQ(dst[i], 0xee) << "guard byte " << i;
    if (crc) {
        dp_desc_t d{};
        d.opcode = DP_OP_CRC32C;
        d.src = reinterpret_cast<uint64_t>(src);
        d.size = n;
        EXPECT_EQ(c.run(d, record), DP_COMP_SUCCESS);
        EXPECT_EQ(record->value, local_reference(d).value);
    }
    dp_free(c.ctx, src);
    dp_free(c.ctx, dst);
    dp_free(c.ctx, record);
}

TEST_F(AgentTest, MappedMemmoveIsBitExact) {
    Client c(agent.config());
    ASSERT_NE(c.mover, nullptr);
    for (size_t n : {1ul, 63ul, 4096ul, 65537ul, 300000ul}) expect_pooled_memmove(c, n);
}

TEST_F(AgentTest, MappedOpcodesMatchTheLocalDevice) {
    Client c(agent.config());
    const size_t n = 8192;
    auto *a = static_cast<float *>(dp_malloc(c.ctx, n));
    auto *b = static_cast<float *>(dp_malloc(c.ctx, n));
    auto *out = static_cast<uint8_t *>(dp_malloc(c.ctx, n));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 64));
    std::vector<uint8_t> ref_out(n);
    for (size_t i = 0; i < n / 4; ++i) a[i] = float(i) * 0.5f, b[i] = 3.0f - float(i);

    dp_desc_t crc{};
    crc.opcode = DP_OP_CRC32C;
    crc.src = reinterpret_cast<uint64_t>(a);
    crc.size = n;
    ASSERT_EQ(c.run(crc, record), DP_COMP_SUCCESS);
    EXPECT_EQ(record->value, local_reference(crc).value);

    dp_desc_t fill{};
    fill.opcode = DP_OP_FILL;
    fill.dst = reinterpret_cast<uint64_t>(out);
    fill.src2 = 0x0123456789abcdefull;
    fill.size = n;
    ASSERT_EQ(c.run(fill, record), DP_COMP_SUCCESS);
    dp_desc_t fill_ref = fill;
    fill_ref.dst = reinterpret_cast<uint64_t>(ref_out.data());
    local_reference(fill_ref);
    EXPECT_EQ(std::memcmp(out, ref_out.data(), n), 0);

    dp_desc_t reduce{};
    reduce.opcode = DP_OP_REDUCE;
    reduce.dtype = DP_FLOAT32;
    reduce.redop = DP_SUM;
    reduce.src = reinterpret_cast<uint64_t>(a);
    reduce.src2 = reinterpret_cast<uint64_t>(b);
    reduce.dst = reinterpret_cast<uint64_t>(out);
    reduce.size = n;
    ASSERT_EQ(c.run(reduce, record), DP_COMP_SUCCESS);
    dp_desc_t reduce_ref = reduce;
    reduce_ref.dst = reinterpret_cast<uint64_t>(ref_out.data());
    local_reference(reduce_ref);
    EXPECT_EQ(std::memcmp(out, ref_out.data(), n), 0);

    // A batch whose member array and members live in the pool.
    auto *members = static_cast<dp_desc_t *>(dp_malloc(c.ctx, 2 * sizeof(dp_desc_t)));
    auto *member_records = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 2 * 32));
    std::memset(member_records, 0, 64);
    members[0] = memmove_desc(a, out, 100);
    members[1] = memmove_desc(b, out + 100, 100);
    for (int i = 0; i < 2; ++i) {
        members[i].flags = DP_FLAG_COMPLETION;
        members[i].completion = reinterpret_cast<uint64_t>(&member_records[i]);
    }
    dp_desc_t batch{};
    batch.opcode = DP_OP_BATCH;
    batch.src = reinterpret_cast<uint64_t>(members);
    batch.size = 2;
    ASSERT_EQ(c.run(batch, record), DP_COMP_SUCCESS);
    EXPECT_EQ(member_records[0].status, DP_COMP_SUCCESS);
    EXPECT_EQ(member_records[1].status, DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(out, a, 100), 0);
    EXPECT_EQ(std::memcmp(out + 100, b, 100), 0);
}

// An agent whose engines hand descriptors to a DSA queue (the stand-in
// device here: tests/mover/idxd_backend_test.cc covers every opcode):
// clients see the same bytes, and `deputy info` says what runs them.
TEST(AgentOnDsaTest, AnAgentWithTheIdxdBackendServesClientsAndSaysSo) {
    const std::string dir = deputy::testing::make_private_dir();
    const std::string file = dir + "/agent.json";
    std::ofstream(file) << R"({"agent": {"backend": "idxd", "idxd_queue": "standin/shared"}})";
    AgentProcess agent({"--config", file});
    ASSERT_TRUE(agent.running());
    {
        Client c(agent.config());
        ASSERT_NE(c.mover, nullptr);
        expect_pooled_memmove(c, 300000, /*crc=*/true);
    }
    const std::string command =
        target_shell(std::string(DEPUTY_BIN) + " info --socket " + agent.socket());
    FILE *pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[512];
    while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
    EXPECT_EQ(pclose(pipe), 0) << out;
    EXPECT_NE(out.find("run by DSA stand-in device (shared, size 32)"), std::string::npos) << out;
    EXPECT_NE(out.find("2 descriptors submitted"), std::string::npos) << out;
    agent.stop();
    std::remove(file.c_str());
}

TEST_F(AgentTest, BlockWaitIsWokenAcrossProcesses) {
    Client c(agent.config());
    auto *src = static_cast<uint8_t *>(dp_malloc(c.ctx, 1 << 16));
    auto *dst = static_cast<uint8_t *>(dp_malloc(c.ctx, 1 << 16));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 32));
    fill_random(src, 1 << 16, 7);
    for (int i = 0; i < 50; ++i) {
        std::memset(record, 0, 32);
        dp_desc_t d = memmove_desc(src, dst, 1 << 16);
        d.flags = DP_FLAG_COMPLETION;
        d.completion = reinterpret_cast<uint64_t>(record);
        ASSERT_EQ(dp_mover_submit(c.mover, 0, &d), DP_OK);
        ASSERT_EQ(dp_mover_wait(c.mover, record, DP_WAIT_BLOCK, 2'000'000'000), DP_OK);
        ASSERT_EQ(record->status, DP_COMP_SUCCESS);
    }
    EXPECT_EQ(std::memcmp(src, dst, 1 << 16), 0);
}

TEST_F(AgentTest, DirectModeReadsAndWritesRegisteredMemory) {
    Client c(agent.config());
    const size_t n = 100000;
    std::vector<uint8_t> src(n), dst(n + 64, 0xee);
    fill_random(src.data(), n, 11);
    ASSERT_EQ(dp_mem_register(c.ctx, src.data(), n), DP_OK);
    ASSERT_EQ(dp_mem_register(c.ctx, dst.data(), dst.size()), DP_OK);
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 32));
    ASSERT_EQ(c.run(memmove_desc(src.data(), dst.data(), n), record), DP_COMP_SUCCESS);
    EXPECT_EQ(record->bytes_completed, n);
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), n), 0);
    for (size_t i = n; i < n + 64; ++i) ASSERT_EQ(dst[i], 0xee);

    // Accumulating int32 reduce, direct destination, pool source.
    const size_t count = 1000;
    std::vector<int32_t> acc(count), expect(count);
    auto *inc = static_cast<int32_t *>(dp_malloc(c.ctx, count * 4));
    for (size_t i = 0; i < count; ++i) acc[i] = int32_t(i), inc[i] = int32_t(3 * i + 1);
    for (size_t i = 0; i < count; ++i) expect[i] = acc[i] + inc[i];
    ASSERT_EQ(dp_mem_register(c.ctx, acc.data(), count * 4), DP_OK);
    dp_desc_t r{};
    r.opcode = DP_OP_REDUCE;
    r.dtype = DP_INT32;
    r.redop = DP_SUM;
    r.flags = DP_FLAG_ACCUMULATE;
    r.src = reinterpret_cast<uint64_t>(inc);
    r.dst = reinterpret_cast<uint64_t>(acc.data());
    r.size = count * 4;
    ASSERT_EQ(c.run(r, record), DP_COMP_SUCCESS);
    EXPECT_EQ(acc, expect);

    // A record in registered memory works too (status written last).
    alignas(32) dp_completion_t direct_record{};
    ASSERT_EQ(dp_mem_register(c.ctx, &direct_record, sizeof(direct_record)), DP_OK);
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_EQ(c.run(memmove_desc(src.data(), dst.data(), n), &direct_record), DP_COMP_SUCCESS);
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), n), 0);

    ASSERT_EQ(dp_mem_deregister(c.ctx, dst.data()), DP_OK);
    EXPECT_EQ(dp_mem_deregister(c.ctx, dst.data()), DP_ERR_INVALID);  // not registered any more
}

TEST_F(AgentTest, RangesOutsideWhatTheClientOwnsAreDeniedAndUntouched) {
    Client c(agent.config());
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 32));
    auto *pool_buf = static_cast<uint8_t *>(dp_malloc(c.ctx, 4096));
    std::vector<uint8_t> plain(4096, 0x5a), registered(4096, 0x11);
    ASSERT_EQ(dp_mem_register(c.ctx, registered.data(), registered.size()), DP_OK);
    std::memset(pool_buf, 0x77, 4096);

    // Unregistered destination.
    EXPECT_EQ(c.run(memmove_desc(pool_buf, plain.data(), 4096), record), DP_COMP_ADDRESS_DENIED);
    EXPECT_EQ(plain, std::vector<uint8_t>(4096, 0x5a));
    // Unregistered source into the pool.
    EXPECT_EQ(c.run(memmove_desc(plain.data(), pool_buf, 4096), record), DP_COMP_ADDRESS_DENIED);
    for (int i = 0; i < 4096; ++i) ASSERT_EQ(pool_buf[i], 0x77);
    // A range that starts inside a registration and runs past its end.
    EXPECT_EQ(c.run(memmove_desc(pool_buf, registered.data() + 100, 4096), record),
              DP_COMP_ADDRESS_DENIED);
    EXPECT_EQ(registered, std::vector<uint8_t>(4096, 0x11));
    // An opcode the device does not have, and a collective for a team this
    // client is not in: refused in the record, nothing touched.
    dp_desc_t bad = memmove_desc(pool_buf, pool_buf + 2048, 64);
    bad.opcode = 0x7f;
    EXPECT_EQ(c.run(bad, record), DP_COMP_INVALID_OPCODE);
    // The library refuses to submit a collective opcode as a mover
    // descriptor; a hostile client writes it into its ring directly.
    bad.opcode = 0x80;  // allreduce on team 0x1234
    bad.src2 = 0x1234;
    bad.dtype = DP_INT32;
    EXPECT_EQ(dp_mover_submit(c.mover, 0, &bad), DP_ERR_INVALID);
    std::memset(record, 0, sizeof(*record));
    bad.flags = DP_FLAG_COMPLETION;
    bad.completion = reinterpret_cast<uint64_t>(record);
    ASSERT_EQ(c.ctx->impl->push(bad, false), DP_OK);
    ASSERT_EQ(dp_mover_wait(c.mover, record, DP_WAIT_YIELD, 2'000'000'000), DP_OK);
    EXPECT_EQ(record->status, DP_COMP_INVALID_FIELD);
    for (int i = 0; i < 4096; ++i) ASSERT_EQ(pool_buf[i], 0x77);
    // Past the end of the pool.
    const uint64_t pool_end = reinterpret_cast<uint64_t>(pool_buf) + (1 << 20);
    dp_desc_t past = memmove_desc(pool_buf, reinterpret_cast<void *>(pool_end), 64);
    EXPECT_EQ(c.run(past, record), DP_COMP_ADDRESS_DENIED);
}

TEST_F(AgentTest, ClientCannotReachAnotherClientsMemory) {
    Client victim(agent.config());
    Client attacker(agent.config());
    auto *secret = static_cast<uint8_t *>(dp_malloc(victim.ctx, 4096));
    std::memset(secret, 0x42, 4096);
    auto *mine = static_cast<uint8_t *>(dp_malloc(attacker.ctx, 4096));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(attacker.ctx, 32));
    std::memset(mine, 0, 4096);
    // Read the victim's pool, then write it.
    EXPECT_EQ(attacker.run(memmove_desc(secret, mine, 4096), record), DP_COMP_ADDRESS_DENIED);
    EXPECT_EQ(mine[0], 0);
    EXPECT_EQ(attacker.run(memmove_desc(mine, secret, 4096), record), DP_COMP_ADDRESS_DENIED);
    for (int i = 0; i < 4096; ++i) ASSERT_EQ(secret[i], 0x42);
    // The victim's memory registered by the victim is still not the attacker's.
    std::vector<uint8_t> victim_plain(4096, 0x33);
    ASSERT_EQ(dp_mem_register(victim.ctx, victim_plain.data(), 4096), DP_OK);
    EXPECT_EQ(attacker.run(memmove_desc(mine, victim_plain.data(), 4096), record),
              DP_COMP_ADDRESS_DENIED);
    EXPECT_EQ(victim_plain, std::vector<uint8_t>(4096, 0x33));
}

TEST_F(AgentTest, StagedModeMovesBytesThroughTheChannel) {
    dp_config_t config = agent.config();
    config.memory_mode = DP_MEMORY_STAGED;
    Client c(config);
    const size_t n = 200000;
    std::vector<uint8_t> src(n), dst(n + 64, 0xee);
    fill_random(src.data(), n, 5);
    alignas(32) dp_completion_t record{};
    ASSERT_EQ(c.run(memmove_desc(src.data(), dst.data(), n), &record), DP_COMP_SUCCESS);
    EXPECT_EQ(record.bytes_completed, n);
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), n), 0);
    for (size_t i = n; i < n + 64; ++i) ASSERT_EQ(dst[i], 0xee);

    dp_desc_t crc{};
    crc.opcode = DP_OP_CRC32C;
    crc.src = reinterpret_cast<uint64_t>(src.data());
    crc.size = n;
    ASSERT_EQ(c.run(crc, &record), DP_COMP_SUCCESS);
    EXPECT_EQ(record.value, local_reference(crc).value);

    std::vector<double> acc(500, 1.5), inc(500, 2.25);
    dp_desc_t r{};
    r.opcode = DP_OP_REDUCE;
    r.dtype = DP_FLOAT64;
    r.redop = DP_MAX;
    r.flags = DP_FLAG_ACCUMULATE;
    r.src = reinterpret_cast<uint64_t>(inc.data());
    r.dst = reinterpret_cast<uint64_t>(acc.data());
    r.size = 500 * 8;
    ASSERT_EQ(c.run(r, &record), DP_COMP_SUCCESS);
    EXPECT_EQ(acc, std::vector<double>(500, 2.25));

    // Above the agent's per-range limit (1 MiB): refused before sending.
    std::vector<uint8_t> big(2 << 20);
    dp_desc_t d = memmove_desc(big.data(), big.data(), big.size());
    EXPECT_EQ(dp_mover_submit(c.mover, 0, &d), DP_ERR_TOO_LARGE);
    dp_desc_t batch{};
    batch.opcode = DP_OP_BATCH;
    EXPECT_EQ(dp_mover_submit(c.mover, 0, &batch), DP_ERR_UNSUPPORTED);
    // An invalid descriptor is reported in the record, as in every mode.
    dp_desc_t bad = memmove_desc(src.data(), dst.data(), 0);
    EXPECT_EQ(c.run(bad, &record), DP_COMP_INVALID_SIZE);
}

// The DIF operations behind the agent, in each way it reaches a client's
// memory: its pool (in place), registered ordinary memory (copies), staged
// (through the channel). Insert then strip, each against the in-process
// device; a damaged tuple fails at its block, and what it writes is what
// mover.h says: the blocks before it in place, nothing through copies.
TEST_F(AgentTest, DifOperationsRunInEveryMemoryMode) {
    constexpr size_t kBlock = 512, kBlocks = 40, kData = kBlock * kBlocks, kProt = (kBlock + 8) * kBlocks;
    enum Where { pool, registered, staged };
    for (Where where : {pool, registered, staged}) {
        SCOPED_TRACE(where == pool ? "pool" : where == registered ? "registered" : "staged");
        dp_config_t config = agent.config();
        if (where == staged) config.memory_mode = DP_MEMORY_STAGED;
        Client c(config);
        ASSERT_NE(c.mover, nullptr);
        std::vector<uint8_t> plain_data(kData), plain_prot(kProt), plain_out(kData);
        uint8_t *data = plain_data.data(), *prot = plain_prot.data(), *out = plain_out.data();
        if (where == pool) {
            data = static_cast<uint8_t *>(dp_malloc(c.ctx, kData));
            prot = static_cast<uint8_t *>(dp_malloc(c.ctx, kProt));
            out = static_cast<uint8_t *>(dp_malloc(c.ctx, kData));
            ASSERT_TRUE(data && prot && out);
        } else if (where == registered) {
            for (auto *v : {&plain_data, &plain_prot, &plain_out})
                ASSERT_EQ(dp_mem_register(c.ctx, v->data(), v->size()), DP_OK);
        }
        fill_random(data, kData, 77);
        // The record where the agent writes it: the pool (staged: the client).
        alignas(32) dp_completion_t staged_record{};
        auto *pooled = where == staged ? nullptr
                                       : static_cast<dp_completion_t *>(dp_malloc(c.ctx, 64));
        dp_completion_t &record = pooled ? *pooled : staged_record;
        auto dif = [](uint8_t op, const void *src, void *dst, uint64_t size, uint64_t src_tags,
                      uint64_t dst_tags) {
            dp_desc_t d{};
            d.opcode = op;
            d.op_flags = DP_DIF_BLOCK_512;
            d.src = reinterpret_cast<uint64_t>(src);
            d.dst = reinterpret_cast<uint64_t>(dst);
            d.size = size;
            d.src2 = src_tags;
            d.aux = dst_tags;
            return d;
        };
        const dp_desc_t ins = dif(DP_OP_DIF_INSERT, data, prot, kData, 0, DP_DIF_TAGS(100, 0, 5));
        ASSERT_EQ(c.run(ins, &record), DP_COMP_SUCCESS);
        std::vector<uint8_t> want(kProt);
        dp_desc_t local = ins;
        local.dst = reinterpret_cast<uint64_t>(want.data());
        EXPECT_EQ(record.value, local_reference(local).value);
        ASSERT_EQ(std::memcmp(prot, want.data(), kProt), 0);

        const dp_desc_t strip = dif(DP_OP_DIF_STRIP, prot, out, kProt, DP_DIF_TAGS(100, 0, 5), 0);
        ASSERT_EQ(c.run(strip, &record), DP_COMP_SUCCESS);
        EXPECT_EQ(std::memcmp(out, data, kData), 0);

        prot[7 * (kBlock + 8) + kBlock + 7] ^= 1;  // block 7's reference tag
        std::memset(out, 0xee, kData);
        ASSERT_EQ(c.run(strip, &record), DP_COMP_DIF_ERROR);
        EXPECT_EQ(record.result, uint32_t(DP_DIF_ERR_REF_TAG));
        EXPECT_EQ(record.bytes_completed, 7 * (kBlock + 8));
        EXPECT_EQ(record.value, DP_DIF_TAGS(107, 0, 5));
        const size_t written = where == pool ? 7 * kBlock : 0;
        EXPECT_EQ(std::memcmp(out, data, written), 0);
        for (size_t i = written; i < kData; ++i) ASSERT_EQ(out[i], 0xee) << i;
        if (where == pool) {
            for (uint8_t *p : {data, prot, out}) dp_free(c.ctx, p);
        }
        if (pooled) dp_free(c.ctx, pooled);
    }
}

TEST_F(AgentTest, DeadClientsAreCleanedUp) {
    // Baseline once the agent is idle.
    const int fds = agent.settled_fds();
    const std::string fds_at_start = agent.describe_fds();
    ASSERT_GT(fds, 0);
    ASSERT_EQ(agent.count_client_mappings(), 0);
    constexpr int kCycles = 1000;
    for (int i = 0; i < kCycles; ++i) {
        pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            dp_config_t config = agent.config();
            config.pool_bytes = 64 << 10;
            dp_context_t *ctx = nullptr;
            if (dp_init(&config, &ctx) != DP_OK) _exit(2);
            dp_mover_t *mover = nullptr;
            dp_mover_attach(ctx, &mover);
            auto *buf = static_cast<uint8_t *>(dp_malloc(ctx, 8192));
            auto *record = static_cast<dp_completion_t *>(dp_malloc(ctx, 32));
            dp_desc_t d = memmove_desc(buf, buf + 4096, 4096);
            d.flags = DP_FLAG_COMPLETION;
            d.completion = reinterpret_cast<uint64_t>(record);
            dp_mover_submit(mover, 0, &d);
            if (i % 2) raise(SIGKILL);  // die with work in flight
            dp_mover_wait(mover, record, DP_WAIT_SPIN, 1'000'000'000);
            _exit(record->status == DP_COMP_SUCCESS ? 0 : 3);  // no dp_finalize either
        }
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        if (i % 2) {
            ASSERT_TRUE(WIFSIGNALED(status));
        } else {
            ASSERT_TRUE(WIFEXITED(status));
            ASSERT_EQ(WEXITSTATUS(status), 0) << "cycle " << i;
        }
    }
    // A bound on liveness, not speed: under a loaded machine (ctest -j2 beside
    // 4-rank MPI tests) the service thread took more than 3 s to close them.
    EXPECT_TRUE(deputy::testing::eventually([&] { return agent.count_fds() == fds; }, 15000))
        << agent.count_fds() << " fds, expected " << fds << ":\n"
        << agent.describe_fds() << "at the start:\n"
        << fds_at_start;
    EXPECT_TRUE(
        deputy::testing::eventually([&] { return agent.count_client_mappings() == 0; }, 15000))
        << agent.count_client_mappings() << " client segments still mapped";
    // And the agent still serves.
    Client c(agent.config());
    auto *record = static_cast<dp_completion_t *>(dp_malloc(c.ctx, 32));
    auto *buf = static_cast<uint8_t *>(dp_malloc(c.ctx, 128));
    EXPECT_EQ(c.run(memmove_desc(buf, buf + 64, 64), record), DP_COMP_SUCCESS);
}

}  // namespace
