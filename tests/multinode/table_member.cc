// One member of a team whose members are separate processes, each perhaps
// on another host: it joins team $TABLE_KEY as rank $TABLE_RANK of
// $TABLE_SIZE through whatever agent $DEPUTY_AGENT names (a DPU's, over the
// network, in $DEPUTY_MEMORY's mode), runs every collective of the table
// (tests/agent/coll_table.h) at counts 0, 1, 4097 and 1 Mi + 1 (or
// $TABLE_COUNTS, a comma list) in the same order as its teammates, and checks its own results against the one
// reference. A GoogleTest program: exit status 0 and "[  PASSED  ]" when
// every case matched (test_dpu_netns.py runs it in the hosts' namespaces).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coll_table.h"

namespace {

int env_int(const char *name) {
    const char *v = std::getenv(name);
    return v ? std::atoi(v) : -1;
}

// The team as check_table sees it: every member's buffers are laid out
// here (the inputs are the same in every process), but only this
// process's member is posted and checked.
class DistributedTeam {
  public:
    DistributedTeam(int me, int size, dp_team_t *team) : me_(me), size_(size), team_(team) {}
    ~DistributedTeam() {
        for (void *p : owned_) std::free(p);
    }
    int size() const { return size_; }
    bool mine(int r) const { return r == me_; }
    dp_team_t *team() const { return team_; }
    uint8_t *buffer(int, size_t bytes) {
        void *p = std::aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
        owned_.push_back(p);
        return static_cast<uint8_t *>(p);
    }
    void release(int, uint8_t *p) {
        for (void *&q : owned_)
            if (q == p) {
                std::free(q);
                q = nullptr;
            }
    }
    template <typename Post>
    std::vector<dp_status_t> run(Post post) {
        std::vector<dp_status_t> out(size_t(size_), DP_OK);
        dp_request_t *req = nullptr;
        dp_status_t s = post(me_, &req);
        if (s == DP_OK) s = dp_wait(req);
        dp_request_free(req);
        out[size_t(me_)] = s;
        return out;
    }

  private:
    int me_, size_;
    dp_team_t *team_;
    std::vector<void *> owned_;
};

TEST(TableMember, EveryCollectiveMatchesTheReference) {
    const int rank = env_int("TABLE_RANK"), size = env_int("TABLE_SIZE");
    const char *key = std::getenv("TABLE_KEY");
    if (rank < 0 || size < 1 || !key) GTEST_SKIP() << "TABLE_RANK, TABLE_SIZE and TABLE_KEY unset";
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.pool_bytes = 256ull << 20;  // staged: bounce room for 1 Mi + 1 elements of 4 members
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    dp_team_t *team = nullptr;
    ASSERT_EQ(dp_team_create_timeout(ctx, key, rank, size, 30000, &team), DP_OK);
    {
        DistributedTeam t(rank, size, team);
        deputy::testing::TableShape shape;
        shape.counts = {0, 1, 4097, (size_t(1) << 20) + 1};
        if (const char *list = std::getenv("TABLE_COUNTS")) {
            shape.counts.clear();
            for (const char *p = list; *p;) {
                char *end = nullptr;
                shape.counts.push_back(std::strtoull(p, &end, 10));
                p = *end == ',' ? end + 1 : end + std::strlen(end);
            }
        }
        const std::string label = std::string("rank ") + std::to_string(rank) + " memory " +
                                  (std::getenv("DEPUTY_MEMORY") ? std::getenv("DEPUTY_MEMORY")
                                                                : "default");
        deputy::testing::check_table(t, [&](int) { return t.team(); }, label, shape);
    }
    EXPECT_EQ(dp_team_destroy(team), DP_OK);
    EXPECT_EQ(dp_finalize(ctx), DP_OK);
}

}  // namespace
