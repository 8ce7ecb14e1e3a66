#include "bench/coll/allreduce_table.h"

#include <climits>
#include <cstdio>

#include <unistd.h>

#include "bench/coll/pattern.h"
#include "common/timing.h"

namespace deputy::bench::coll {
namespace {

constexpr int kRounds = 3;  // the article averages three calls

void call(const World &world, Impl &impl, const CallArgs &args) {
    if (impl.run(Coll::allreduce, args)) return;
    std::fprintf(stderr, "rank %d: %s allreduce of %zu floats failed: %s\n", world.rank(),
                 impl.name(), args.count, impl.error().c_str());
    world.abort(3);
}

// This rank's average time per call in us (rank 0's is the table's figure).
double table_time(const World &world, Impl &impl, const CallArgs &args, const Pattern &p,
                  uint64_t *wrong) {
    reset_recv(p, world.rank(), args.recv);
    call(world, impl, args);  // warm-up, untimed
    world.barrier();
    const uint64_t t0 = timing::now_ns();
    for (int i = 0; i < kRounds; ++i) {
        call(world, impl, args);
        world.barrier();
    }
    const double us = double(timing::now_ns() - t0) / kRounds / 1e3;
    *wrong = world.sum(count_wrong(p, world.rank(), args.recv));
    return us;
}

}  // namespace

uint64_t run_allreduce_table(const World &world, const RunInfo &info, const Buffers &buffers,
                             Impl &native, Impl &ring, Impl *deputy, nlohmann::json *results) {
    const Plan &plan = *info.plan;
    // As the ring-allreduce article's program: every rank names its node
    // first (which ranks share a node explains a row), then the table.
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
    std::printf("Hostname: %s\n", host);
    std::fflush(stdout);
    world.barrier();
    if (world.rank() == 0) {
        std::printf("%20s %20s %22s %22s %22s\n", "DataSize(Bytes)", "Num of float",
                    "Native Allreduce", "Ring Allreduce", "deputy Allreduce");
        std::fflush(stdout);
    }
    uint64_t total_wrong = 0;
    for (uint64_t size : plan.sizes) {
        Pattern p;
        p.coll = Coll::allreduce;
        p.dtype = plan.dtype;
        p.redop = DP_SUM;
        p.ranks = world.size();
        p.count = size / plan.dtype->bytes;
        fill_send(p, world.rank(), buffers.send());
        CallArgs args{buffers.send(), buffers.recv(), p.count, plan.dtype, DP_SUM, 0};
        Impl *const impls[3] = {&native, &ring, deputy};
        double us[3] = {0, 0, 0};
        for (int k = 0; k < 3; ++k) {
            if (impls[k] == nullptr) continue;
            uint64_t wrong = 0;
            us[k] = table_time(world, *impls[k], args, p, &wrong);
            total_wrong += wrong;
            if (world.rank() == 0)
                results->push_back({{"impl", impls[k]->name()},
                                    {"op", "allreduce"},
                                    {"mode", "allreduce-table"},
                                    {"size", size},
                                    {"count", p.count},
                                    {"dtype", "float32"},
                                    {"redop", "sum"},
                                    {"iterations", kRounds},
                                    {"warmup", 1},
                                    {"time_us", us[k]},
                                    {"wrong", wrong}});
        }
        if (world.rank() == 0) {
            char deputy_col[64];
            if (deputy)
                std::snprintf(deputy_col, sizeof deputy_col, "%20.1fus", us[2]);
            else
                std::snprintf(deputy_col, sizeof deputy_col, "%22s", "-");
            std::printf("%20llu %20llu %20.1fus %20.1fus %s\n", (unsigned long long)size,
                        (unsigned long long)p.count, us[0], us[1], deputy_col);
            std::fflush(stdout);
        }
    }
    return total_wrong;
}

}  // namespace deputy::bench::coll
