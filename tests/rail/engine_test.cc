// The fabric layer and the posting engine in one process: a DeviceWriter
// writes seeded pages over real libfabric rails (shm, tcp) into registered
// buffers that a DeviceTarget drives, and every byte is checked.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <memory>
#include <thread>

#include "bench/rail/buffer.h"
#include "bench/rail/fabric.h"
#include "bench/rail/pattern.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/target.h"
#include "bench/rail/writer.h"
#include "rail/error_of.h"

namespace deputy::rail {
namespace {

sockaddr_storage loopback_route() {
    sockaddr_storage ss{};
    auto *sin = reinterpret_cast<sockaddr_in *>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ss;
}

TEST(RailFabric, MissingProviderIsNamedWithTheCall) {
    std::string e = error_of([] { Catalog::query("nosuchprovider"); });
    const std::string prefix =
        "provider 'nosuchprovider' is not available: fi_getinfo returned No data available (-61) "
        "for an RDM endpoint with RMA writes; providers that can: ";
    ASSERT_EQ(e.rfind(prefix, 0), 0u) << e;
    EXPECT_NE(e.find("shm", prefix.size()), std::string::npos) << e;
}

TEST(RailFabric, DomainSelection) {
    Catalog shm = Catalog::query("shm");
    EXPECT_EQ(shm.provider_name(), "shm");
    EXPECT_EQ(shm.pick("", nullptr, 3).size(), 3u);
    EXPECT_EQ(error_of([&] { shm.pick("shm,shm,shm", nullptr, 2); }),
              "--domain lists 3 names but --rails is 2 (give one name, one name per rail, or 'all')");
    EXPECT_EQ(error_of([&] { shm.pick("nope", nullptr, 1); }),
              "provider 'shm' has no domain 'nope' (its domains: shm)");

    Catalog tcp = Catalog::query("tcp");
    EXPECT_EQ(tcp.provider_name(), "tcp;ofi_rxm");
    sockaddr_storage route = loopback_route();
    auto infos = tcp.pick("", &route, 2);
    ASSERT_EQ(infos.size(), 2u);
    EXPECT_STREQ(infos[0]->domain_attr->name, "lo");  // the interface that routes to 127.0.0.1
}

TEST(RailFabric, RegistrationHonoursMrMode) {
    Catalog shm = Catalog::query("shm");
    Rail rail(shm.pick("", nullptr, 1)[0], "test", 0);
    Buffer buf(1 << 16);
    Registration reg(rail, buf.data(), buf.size(), FI_REMOTE_WRITE, 1);
    if (rail.mr_mode() & FI_MR_VIRT_ADDR) {
        EXPECT_EQ(reg.remote_base(), reinterpret_cast<uint64_t>(buf.data()));
    } else {
        EXPECT_EQ(reg.remote_base(), 0u);
    }
    if (!(rail.mr_mode() & FI_MR_PROV_KEY)) {
        EXPECT_EQ(reg.key(), 1u);
    }
    EXPECT_FALSE(rail.address().empty());
    EXPECT_EQ(rail.where(), "provider 'shm' domain 'shm' test rail 0");
}

struct EngineCase {
    const char *provider;
    int rails;
    bool warmup;
};

class RailEngine : public ::testing::TestWithParam<EngineCase> {};

TEST_P(RailEngine, WritesEveryPageBitExact) {
    const EngineCase c = GetParam();
    const uint64_t page_size = 12288 + 8;  // not a power of two
    const uint64_t pages = 24, seed = 5;
    Catalog catalog = Catalog::query(c.provider);
    sockaddr_storage route = loopback_route();
    auto infos = catalog.pick("", &route, c.rails);

    std::vector<std::unique_ptr<Rail>> writers, targets;
    for (int r = 0; r < c.rails; ++r) {
        writers.push_back(std::make_unique<Rail>(infos[size_t(r)], "server", r));
        targets.push_back(std::make_unique<Rail>(infos[size_t(r)], "client", r));
    }
    Buffer source(page_size * pages), dest(page_size * pages);
    for (uint64_t p = 0; p < pages; ++p) fill_page(source.data() + p * page_size, page_size, seed, 0, p);
    std::vector<std::unique_ptr<Registration>> regs;
    std::vector<WriterRail> wb;
    std::vector<TargetRail> tb;
    std::vector<RailCounters> counters(size_t(c.rails));
    bool cq_data = true;
    for (int r = 0; r < c.rails; ++r) {
        Rail &w = *writers[size_t(r)], &t = *targets[size_t(r)];
        regs.push_back(std::make_unique<Registration>(t, dest.data(), dest.size(), FI_REMOTE_WRITE, 1));
        Registration &remote = *regs.back();
        regs.push_back(std::make_unique<Registration>(w, source.data(), source.size(), FI_WRITE, 2));
        fi_addr_t peer = w.insert_peer(t.address(), "target");
        t.insert_peer(w.address(), "writer");
        wb.push_back({&w, regs.back()->desc(), {{peer, remote.remote_base(), remote.key()}},
                      &counters[size_t(r)], end_signal(r)});
        tb.push_back({&t, end_signal(r)});
        cq_data = cq_data && w.remote_cq_data() && t.remote_cq_data();
    }
    ASSERT_TRUE(cq_data) << c.provider << " should offer FI_REMOTE_CQ_DATA";

    WritePlan plan;
    plan.page_size = page_size;
    plan.pages = pages;
    plan.pages_per_buffer = pages;
    plan.repeat = 3;
    plan.batch = 4;
    plan.tx_depth = 8;
    plan.warmup = c.warmup;
    plan.timeout_s = 20;
    DeviceWriter writer(0, source.data(), wb, plan);
    DeviceTarget target(tb, true, 20, 0);
    TargetControl control;
    std::string target_error;
    std::thread receiver([&] {
        try {
            target.run(control);
        } catch (const RailError &e) {
            target_error = e.what();
        }
    });
    StartGate gate(1);
    std::atomic<bool> cancel{false};
    DeviceStats stats;
    std::string writer_error = error_of([&] { stats = writer.run(gate, cancel); });
    if (!writer_error.empty()) control.cancel = true;
    control.server_done_ns = 0;
    control.server_done = true;
    receiver.join();
    ASSERT_EQ(writer_error, "");
    ASSERT_EQ(target_error, "");
    EXPECT_EQ(target.signals_seen(), uint64_t(c.rails));

    uint64_t writes = 0;
    for (int r = 0; r < c.rails; ++r) {
        writes += stats.rails[size_t(r)].writes;
        EXPECT_EQ(counters[size_t(r)].writes.load(), stats.rails[size_t(r)].writes);
        // Round-robin: the rails' counts differ by at most one page per pass.
        EXPECT_NEAR(double(stats.rails[size_t(r)].writes), double(pages * 3) / c.rails, 3.0);
    }
    EXPECT_EQ(writes, pages * 3);
    EXPECT_EQ(stats.warmup_writes, c.warmup ? uint64_t(c.rails) : 0u);

    VerifyReport ok = verify_pages(dest.data(), page_size, pages, 0, seed, 0, 4);
    EXPECT_EQ(ok.bad_pages, 0u) << (ok.first.empty() ? "" : ok.first[0].describe());
    EXPECT_EQ(ok.checked_bytes, page_size * pages);
    dest.data()[5 * page_size + 77] ^= 0x10;  // the checker must see one flipped bit
    VerifyReport bad = verify_pages(dest.data(), page_size, pages, 0, seed, 0, 4);
    ASSERT_EQ(bad.bad_pages, 1u);
    EXPECT_EQ(bad.first[0].page, 5u);
    EXPECT_EQ(bad.first[0].offset, 77u);
    EXPECT_EQ(bad.first[0].bytes_differ, 1u);
}

INSTANTIATE_TEST_SUITE_P(Providers, RailEngine,
                         ::testing::Values(EngineCase{"shm", 1, true}, EngineCase{"shm", 3, false},
                                           EngineCase{"tcp", 1, false}, EngineCase{"tcp", 2, true}),
                         [](const auto &info) {
                             return std::string(info.param.provider) + "_rails" +
                                    std::to_string(info.param.rails) +
                                    (info.param.warmup ? "_warmup" : "_nowarmup");
                         });

}  // namespace
}  // namespace deputy::rail
