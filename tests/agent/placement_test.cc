// Where the agent's threads run (--agent-cores): the configuration it
// computes on synthetic topologies (DEPUTY_TOPOLOGY), and a real `deputy
// agent` laid out on a machine shaped like this 2-CPU VM (CPUs 0 and 1,
// which the tests need): its start-up line, its threads' CPUs and the
// `deputy info` placement section, with a client bound to the ranks' CPU
// and with one sharing the engines' CPUs (the warning).
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/agent_config.h"
#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "common/affinity.h"

namespace deputy::agent {
namespace {

using deputy::testing::AgentProcess;

// The layout of a machine like this VM, whatever the real one is.
constexpr const char *kVm = "package:1 core:2 pu:1";

// Sets DEPUTY_TOPOLOGY for the scope.
class SyntheticTopology {
  public:
    explicit SyntheticTopology(const char *description) {
        setenv("DEPUTY_TOPOLOGY", description, 1);
    }
    ~SyntheticTopology() { unsetenv("DEPUTY_TOPOLOGY"); }
};

std::string finalize(AgentConfig *c) {
    std::string error;
    return finalize_config(c, &error) == DP_OK ? "" : error;
}

TEST(AgentPlacement, LastGivesOneEnginePerReservedCoreAndTheServiceThreadTheirCpus) {
    SyntheticTopology topology("package:2 core:4 pu:2(indexes=2*8:1*2)");
    AgentConfig c;
    c.agent_cores = "last";
    ASSERT_EQ(finalize(&c), "");
    EXPECT_EQ(c.cpus, "3,7,11,15");
    EXPECT_EQ(c.engines, 2u);
    EXPECT_EQ(c.device.total_engines(), 2u);
    EXPECT_EQ(c.device.cpus, (std::vector<int>{3, 7, 11, 15}));
    EXPECT_EQ(affinity::format_cpu_list(c.placement.agent_cpus), "3,7,11,15");
    EXPECT_EQ(c.topology, "2 packages, 8 cores, 16 CPUs, SMT: 2 per core");
    // finalize_config runs again in Agent::create: nothing changes.
    ASSERT_EQ(finalize(&c), "");
    EXPECT_EQ(c.cpus, "3,7,11,15");
}

// Engines sharing the ranks' CPUs give them up after each large descriptor
// (docs/collectives.md, "Engines shared fairly"); engines with CPUs of
// their own, or polling with pause, never do.
TEST(AgentPlacement, OnlyEnginesSharingTheRanksCpusYieldAfterLargeDescriptors) {
    SyntheticTopology topology("package:2 core:4 pu:2(indexes=2*8:1*2)");
    AgentConfig shared;
    ASSERT_EQ(finalize(&shared), "");
    EXPECT_EQ(shared.device.yield_after_ns, 50'000u);
    AgentConfig pausing;
    pausing.idle_yield = false;
    ASSERT_EQ(finalize(&pausing), "");
    EXPECT_EQ(pausing.device.yield_after_ns, 0u);
    AgentConfig own;
    own.agent_cores = "last";
    ASSERT_EQ(finalize(&own), "");
    EXPECT_EQ(own.device.yield_after_ns, 0u);
    AgentConfig pinned;
    pinned.cpus = "1";
    ASSERT_EQ(finalize(&pinned), "");
    EXPECT_EQ(pinned.device.yield_after_ns, 0u);
}

TEST(AgentPlacement, AnEngineCountGivenStaysAndSmtKeepsTheDefault) {
    SyntheticTopology topology("package:2 core:4 pu:2(indexes=2*8:1*2)");
    AgentConfig c;
    c.agent_cores = "last";
    c.engines = 3;
    c.engines_set = true;
    ASSERT_EQ(finalize(&c), "");
    EXPECT_EQ(c.device.total_engines(), 3u);

    AgentConfig smt;
    smt.agent_cores = "smt";
    ASSERT_EQ(finalize(&smt), "");
    EXPECT_EQ(smt.engines, 1u);
    EXPECT_EQ(smt.cpus, "15,14,13,12,11,10,9,8");
    EXPECT_EQ(affinity::format_cpu_list(smt.placement.agent_cpus), "8-15");

    AgentConfig shared;
    shared.agent_cores = "shared";
    ASSERT_EQ(finalize(&shared), "");
    EXPECT_EQ(shared.cpus, "");
    EXPECT_TRUE(shared.device.cpus.empty());
}

TEST(AgentPlacement, AnAgentSharingTheRanksCpusRunsTwoEnginesWhereItMay) {
    EXPECT_EQ(shared_placement_engines(0), 1u);
    EXPECT_EQ(shared_placement_engines(1), 1u);
    EXPECT_EQ(shared_placement_engines(2), 2u);
    EXPECT_EQ(shared_placement_engines(64), 2u);

    // Nothing pinned, no count given: as many as the agent's CPUs allow.
    const uint32_t expected = shared_placement_engines(affinity::allowed_cpus(0).size());
    for (const char *cores : {"", "shared"}) {
        AgentConfig c;
        c.agent_cores = cores;
        ASSERT_EQ(finalize(&c), "") << cores;
        EXPECT_EQ(c.engines, expected) << cores;
        EXPECT_EQ(c.device.total_engines(), expected) << cores;
        ASSERT_EQ(finalize(&c), "") << cores;  // again, as Agent::create does
        EXPECT_EQ(c.engines, expected) << cores;
    }
    // A count given, or engines pinned by cpus: the default does not apply.
    AgentConfig given;
    given.engines = 1;
    given.engines_set = true;
    ASSERT_EQ(finalize(&given), "");
    EXPECT_EQ(given.device.total_engines(), 1u);
    AgentConfig pinned;
    pinned.cpus = "0";
    ASSERT_EQ(finalize(&pinned), "");
    EXPECT_EQ(pinned.device.total_engines(), 1u);
}

TEST(AgentPlacement, TheEnginesIdlePollingIsTheMoversUnlessTheConfigSaysOtherwise) {
    AgentConfig defaults;
    ASSERT_EQ(finalize(&defaults), "");
    EXPECT_EQ(defaults.device.idle_spin_us, mover::DeviceConfig{}.idle_spin_us);

    AgentConfig c;
    std::string error;
    ASSERT_EQ(load_config_text(R"({"agent": {"engine_idle_spin_us": 20}})", &c, &error), DP_OK);
    ASSERT_EQ(finalize(&c), "");
    EXPECT_EQ(c.device.idle_spin_us, 20u);

    AgentConfig too_long;
    EXPECT_EQ(load_config_text(R"({"agent": {"engine_idle_spin_us": 2000000}})", &too_long,
                               &error),
              DP_ERR_INVALID);
    EXPECT_NE(error.find("agent.engine_idle_spin_us"), std::string::npos) << error;
}

// An agent on CPUs of its own keeps polling them (a post then finds it
// awake), and so do its engines where they leave the service thread a CPU;
// engines on the service thread's CPUs, and those of an agent sharing the
// ranks' CPUs (which sleeps after 50 us), keep the mover's window; a value
// in the file stands either way.
TEST(AgentPlacement, AnAgentWithCpusOfItsOwnKeepsPollingThem) {
    AgentConfig shared;
    ASSERT_EQ(finalize(&shared), "");
    EXPECT_EQ(shared.idle_spin_us, 50u);
    EXPECT_EQ(shared.device.idle_spin_us, mover::DeviceConfig{}.idle_spin_us);
    AgentConfig pinned;
    pinned.cpus = "0";
    ASSERT_EQ(finalize(&pinned), "");
    EXPECT_EQ(pinned.engines, 1u);
    EXPECT_EQ(pinned.idle_spin_us, kOwnCoreIdleSpinUs);
    EXPECT_EQ(pinned.device.idle_spin_us, mover::DeviceConfig{}.idle_spin_us);
    AgentConfig roomy;  // one engine, two CPUs: the service thread has one
    roomy.cpus = "0-1";
    roomy.engines = 1;
    roomy.engines_set = true;
    ASSERT_EQ(finalize(&roomy), "");
    EXPECT_EQ(roomy.idle_spin_us, kOwnCoreIdleSpinUs);
    EXPECT_EQ(roomy.device.idle_spin_us, kOwnCoreIdleSpinUs);
    SyntheticTopology topology("package:1 core:4 pu:1");
    AgentConfig last;
    last.agent_cores = "last";
    ASSERT_EQ(finalize(&last), "");
    EXPECT_EQ(last.cpus, "3");
    EXPECT_EQ(last.idle_spin_us, kOwnCoreIdleSpinUs);
    EXPECT_EQ(last.device.idle_spin_us, mover::DeviceConfig{}.idle_spin_us);
    AgentConfig asked;
    std::string error;
    ASSERT_EQ(load_config_text(
                  R"({"agent": {"cpus": "0", "idle_spin_us": 20, "engine_idle_spin_us": 30}})",
                  &asked, &error),
              DP_OK);
    ASSERT_EQ(finalize(&asked), "");
    EXPECT_EQ(asked.idle_spin_us, 20u);
    EXPECT_EQ(asked.device.idle_spin_us, 30u);
}

// Members run small operations themselves where the agent shares their
// CPUs (nothing pinned); an agent pinned to CPUs of its own runs them all,
// unless the config says otherwise.
TEST(AgentPlacement, MembersRunSmallOperationsOnlyWhereTheAgentHasNoCoreOfItsOwn) {
    AgentConfig shared;
    ASSERT_EQ(finalize(&shared), "");
    EXPECT_EQ(shared.rank_execution_bytes, 16u << 20);
    AgentConfig pinned;
    pinned.cpus = "0";
    ASSERT_EQ(finalize(&pinned), "");
    EXPECT_EQ(pinned.rank_execution_bytes, 0u);
    AgentConfig asked;
    std::string error;
    ASSERT_EQ(load_config_text(R"({"agent": {"cpus": "0", "rank_execution_bytes": 4096}})", &asked,
                               &error),
              DP_OK);
    ASSERT_EQ(finalize(&asked), "");
    EXPECT_EQ(asked.rank_execution_bytes, 4096u);
    AgentConfig wrong;
    EXPECT_EQ(load_config_text(R"({"agent": {"rank_execution_bytes": "big"}})", &wrong, &error),
              DP_ERR_INVALID);
    EXPECT_NE(error.find("agent.rank_execution_bytes"), std::string::npos) << error;
}

TEST(AgentPlacement, TheConfigFileKeyAndItsErrors) {
    SyntheticTopology topology(kVm);
    AgentConfig c;
    std::string error;
    ASSERT_EQ(load_config_text(R"({"agent": {"agent_cores": "last"}})", &c, &error), DP_OK);
    ASSERT_EQ(finalize(&c), "");
    EXPECT_EQ(c.cpus, "1");

    AgentConfig both;
    ASSERT_EQ(load_config_text(R"({"agent": {"agent_cores": "last", "cpus": "0"}})", &both,
                               &error),
              DP_OK);
    EXPECT_EQ(finalize(&both),
              "agent config: agent.agent_cores and agent.cpus both say where the engines run; "
              "give one");

    AgentConfig smt;
    ASSERT_EQ(load_config_text(R"({"agent": {"agent_cores": "smt"}})", &smt, &error), DP_OK);
    EXPECT_EQ(finalize(&smt),
              "agent config: agent.agent_cores smt: this machine has no SMT (1 package, 2 cores, "
              "2 CPUs, no SMT); agent.agent_cores last reserves a whole core instead");

    AgentConfig flag;
    flag.agent_cores = "cpus:2";
    flag.agent_cores_flag = "--agent-cores";
    EXPECT_EQ(finalize(&flag),
              "--agent-cores cpus:2: CPU 2 does not exist here (this machine's CPUs: 0-1)");
}

// The test process's main thread: a client's CPUs are its pid's affinity.
class MainThreadCpus {
  public:
    explicit MainThreadCpus(const std::vector<int> &cpus) : saved_(affinity::allowed_cpus(0)) {
        EXPECT_EQ(affinity::pin_current_thread_to(cpus), DP_OK);
    }
    ~MainThreadCpus() { affinity::pin_current_thread_to(saved_); }

  private:
    std::vector<int> saved_;
};

bool has_cpus_0_and_1() {
    const std::vector<int> cpus = affinity::allowed_cpus(0);
    return std::find(cpus.begin(), cpus.end(), 0) != cpus.end() &&
           std::find(cpus.begin(), cpus.end(), 1) != cpus.end();
}

nlohmann::json info(const AgentProcess &agent) {
    std::string text, error;
    EXPECT_EQ(channel::request_agent_info(agent.socket(), "", 2'000'000'000, &text, &error), DP_OK)
        << error;
    return nlohmann::json::parse(text);
}

// Attaches, runs one memmove on the agent's engines (so that they ran), and
// keeps the client attached while `check` looks at the agent.
template <typename Check>
void with_a_client(const AgentProcess &agent, Check check) {
    dp_config_t config = agent.config();
    dp_context_t *ctx = nullptr;
    ASSERT_EQ(dp_init(&config, &ctx), DP_OK);
    dp_mover_t *mover = nullptr;
    ASSERT_EQ(dp_mover_attach(ctx, &mover), DP_OK);
    auto *src = static_cast<uint8_t *>(dp_malloc(ctx, 4096));
    auto *dst = static_cast<uint8_t *>(dp_malloc(ctx, 4096));
    auto *record = static_cast<dp_completion_t *>(dp_malloc(ctx, sizeof(dp_completion_t)));
    std::memset(src, 7, 4096);
    std::memset(record, 0, sizeof *record);
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.src = reinterpret_cast<uint64_t>(src);
    d.dst = reinterpret_cast<uint64_t>(dst);
    d.size = 4096;
    d.flags = DP_FLAG_COMPLETION;
    d.completion = reinterpret_cast<uint64_t>(record);
    EXPECT_EQ(dp_mover_submit(mover, 0, &d), DP_OK);
    EXPECT_EQ(dp_mover_wait(mover, record, DP_WAIT_YIELD, 2'000'000'000), DP_OK);
    EXPECT_EQ(record->status, DP_COMP_SUCCESS);
    check();
    dp_free(ctx, src);
    dp_free(ctx, dst);
    dp_free(ctx, record);
    dp_mover_close(mover);
    dp_finalize(ctx);
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(AgentPlacement, LastPinsTheAgentAndInfoShowsWhereEverythingRuns) {
    if (!has_cpus_0_and_1()) GTEST_SKIP() << "needs CPUs 0 and 1";
    AgentProcess agent({"--agent-cores", "last", "-l", "50"}, true,
                       {std::string("DEPUTY_TOPOLOGY=") + kVm});
    ASSERT_TRUE(agent.alive()) << read_file(agent.log_path());
    EXPECT_TRUE(testing::eventually([&] {
        return read_file(agent.log_path()).find("agent: placement last") != std::string::npos;
    }));
    EXPECT_NE(read_file(agent.log_path())
                  .find("agent: placement last (1 package, 2 cores, 2 CPUs, no SMT): engine 0 on "
                        "CPU 1; the service thread on CPU 1; the ranks' CPUs: 0"),
              std::string::npos)
        << read_file(agent.log_path());
    MainThreadCpus ranks_cpu({0});
    with_a_client(agent, [&] {
        const nlohmann::json j = info(agent);
        const nlohmann::json &p = j["placement"];
        EXPECT_EQ(p["layout"], "last");
        EXPECT_EQ(p["topology"], "1 package, 2 cores, 2 CPUs, no SMT");
        EXPECT_EQ(p["agent_cpus"], "1");
        EXPECT_EQ(p["rank_cpus"], "0");
        ASSERT_EQ(p["threads"].size(), 2u);
        const nlohmann::json &service = p["threads"][0];
        const nlohmann::json &engine = p["threads"][1];
        EXPECT_EQ(service["name"], "service");
        EXPECT_EQ(service["tid"], agent.pid());  // the main thread serves
        EXPECT_EQ(service["allowed_cpus"], "1");
        EXPECT_EQ(service["last_cpu"], 1);
        EXPECT_EQ(engine["name"], "engine 0");
        EXPECT_EQ(engine["pinned_cpu"], 1);
        EXPECT_EQ(engine["allowed_cpus"], "1");
        EXPECT_EQ(engine["last_cpu"], 1);
        EXPECT_GT(engine["tid"].get<int>(), agent.pid());
        EXPECT_GT(engine["busy_ns"].get<uint64_t>(), 0u);
        EXPECT_TRUE(engine.contains("wait_ns"));
        EXPECT_GE(engine["timeslices"].get<uint64_t>(), 1u);
        EXPECT_EQ(p["engine_cpus"], "1");
        EXPECT_EQ(p["client_cpus"], "0");
        EXPECT_EQ(p["shared_cpus"], "");
        EXPECT_FALSE(p.contains("warning"));
        ASSERT_EQ(j["clients"].size(), 1u);
        EXPECT_EQ(j["clients"][0]["cpus"], "0");
    });
}

TEST(AgentPlacement, InfoWarnsWhenClientsShareTheEnginesCpus) {
    if (!has_cpus_0_and_1()) GTEST_SKIP() << "needs CPUs 0 and 1";
    AgentProcess agent({"-l", "50"}, true, {std::string("DEPUTY_TOPOLOGY=") + kVm});
    ASSERT_TRUE(agent.alive()) << read_file(agent.log_path());
    EXPECT_TRUE(testing::eventually([&] {
        return read_file(agent.log_path()).find("agent: placement shared: 2 engines unpinned and "
                                                "the service thread unpinned") !=
               std::string::npos;
    })) << read_file(agent.log_path());
    MainThreadCpus both({0, 1});
    with_a_client(agent, [&] {
        const nlohmann::json p = info(agent)["placement"];
        EXPECT_EQ(p["layout"], "shared");
        EXPECT_EQ(p["agent_cpus"], "");
        EXPECT_EQ(p["client_cpus"], "0-1");
        EXPECT_EQ(p["shared_cpus"], "0-1");
        EXPECT_EQ(p["warning"],
                  "the engines and the clients share CPUs 0-1: a busy client delays the engines; "
                  "--agent-cores last gives the engines CPU 1 and the ranks CPU 0");
    });
}

TEST(AgentPlacement, CpusPinsTheEnginesOnly) {
    if (!has_cpus_0_and_1()) GTEST_SKIP() << "needs CPUs 0 and 1";
    AgentProcess agent({"--cpus", "1", "-l", "50"}, true);
    ASSERT_TRUE(agent.alive()) << read_file(agent.log_path());
    const nlohmann::json p = info(agent)["placement"];
    EXPECT_EQ(p["layout"], "cpus");
    EXPECT_EQ(p["agent_cpus"], "");
    EXPECT_EQ(p["threads"][1]["pinned_cpu"], 1);
    EXPECT_TRUE(testing::eventually(
        [&] { return info(agent)["placement"]["threads"][1]["allowed_cpus"] == "1"; }));
    EXPECT_NE(read_file(agent.log_path())
                  .find("agent: engines pinned by cpus: engine 0 on CPU 1; the service thread "
                        "unpinned"),
              std::string::npos)
        << read_file(agent.log_path());
}

}  // namespace
}  // namespace deputy::agent
