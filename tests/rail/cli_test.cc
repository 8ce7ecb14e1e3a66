// `deputy bench rail` end to end, as a user runs it: the built binary as a
// subprocess (always reaped, time-bounded), checking exit codes, the exact
// error text, the summary table and the --out JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/rail/fabric.h"
#include "bench/rail/oob.h"
#include "common/units.h"
#include "rail/subprocess.h"

namespace deputy::test {
namespace {

const std::string kBin = DEPUTY_BIN;
constexpr double kLimit = 120;  // seconds any one command may take
const std::string kHeader =
    " #bytes     #iterations    BW peak[Gb/s]    BW average[Gb/s]   MsgRate[Mpps]";

std::vector<std::string> rail_cmd(std::vector<std::string> args) {
    std::vector<std::string> argv = {kBin, "bench", "rail"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

std::string temp_path(const std::string &name) {
    return ::testing::TempDir() + "rail_" + std::to_string(getpid()) + "_" + name;
}

nlohmann::json read_json(const std::string &path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

// The numbers on the line after the perftest header.
std::vector<double> summary_numbers(const std::string &out) {
    size_t at = out.find(kHeader);
    if (at == std::string::npos) return {};
    std::istringstream line(out.substr(out.find('\n', at) + 1));
    std::vector<double> v(5, -1);
    line >> v[0] >> v[1] >> v[2] >> v[3] >> v[4];
    return v;
}

uint16_t free_port() {
    rail::Listener l("127.0.0.1", 0);
    return l.port();
}

std::string describe(const ProcessResult &r) {
    return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
           "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// ------------------------------------------------------------------ loopback matrix

struct LoopCase {
    const char *provider;
    int rails;
    int devices;
};

class RailLoopback : public ::testing::TestWithParam<LoopCase> {};

TEST_P(RailLoopback, WritesAndVerifiesEveryByte) {
    const LoopCase c = GetParam();
    const uint64_t pages = 32, page_size = 16384, repeat = 3;
    std::string out = temp_path(std::string(c.provider) + std::to_string(c.rails) + std::to_string(c.devices) + ".json");
    ProcessResult r = run_command(
        rail_cmd({"--loopback", "--provider", c.provider, "--rails", std::to_string(c.rails),
                  "--devices", std::to_string(c.devices), "--pages", std::to_string(pages),
                  "--page-size", "16k", "--repeat", std::to_string(repeat), "--out", out, "-q"}),
        kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const uint64_t iterations = pages * repeat * uint64_t(c.devices);
    auto nums = summary_numbers(r.out);
    ASSERT_EQ(nums.size(), 5u) << r.out;
    EXPECT_EQ(nums[0], double(page_size));
    EXPECT_EQ(nums[1], double(iterations));
    EXPECT_GT(nums[3], 0.0);
    EXPECT_GE(nums[2], nums[3]);  // peak >= average
    EXPECT_NE(r.out.find("# verify: " + units::format_size(pages * page_size * uint64_t(c.devices)) +
                         " checked, 0 bad pages, 0 bad bytes"),
              std::string::npos)
        << r.out;

    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["tool"], "deputy bench rail");
    EXPECT_EQ(j["config"]["rails"], c.rails);
    EXPECT_EQ(j["config"]["devices"], c.devices);
    EXPECT_EQ(j["versions"]["libfabric"], rail::libfabric_version());
    EXPECT_EQ(j["versions"]["provider"], std::string(c.provider) == "tcp" ? "tcp;ofi_rxm" : c.provider);
    EXPECT_TRUE(j["host"].contains("hostname"));
    EXPECT_EQ(j["results"]["iterations"], iterations);
    EXPECT_EQ(j["results"]["bytes"], iterations * page_size);
    EXPECT_EQ(j["results"]["signal"], "remote_cq_data");
    EXPECT_EQ(j["results"]["warmup_writes"], c.rails);
    EXPECT_EQ(j["verify"]["checked_bytes"], pages * page_size * uint64_t(c.devices));
    EXPECT_EQ(j["verify"]["bad_pages"], 0);
    ASSERT_EQ(j["rails"].size(), size_t(c.rails));
    uint64_t writes = 0;
    for (int k = 0; k < c.rails; ++k) {
        const auto &rail = j["rails"][size_t(k)];
        EXPECT_EQ(rail["rail"], k);
        EXPECT_EQ(rail["device"], k / (c.rails / c.devices));
        EXPECT_GT(rail["writes"].get<uint64_t>(), 0u) << "rail " << k << " wrote nothing";
        writes += rail["writes"].get<uint64_t>();
    }
    EXPECT_EQ(writes, iterations);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, RailLoopback,
    ::testing::Values(LoopCase{"tcp", 1, 1}, LoopCase{"tcp", 2, 1}, LoopCase{"tcp", 2, 2},
                      LoopCase{"tcp", 4, 1}, LoopCase{"tcp", 4, 2}, LoopCase{"shm", 1, 1},
                      LoopCase{"shm", 2, 1}, LoopCase{"shm", 2, 2}, LoopCase{"shm", 4, 1},
                      LoopCase{"shm", 4, 2}),
    [](const auto &info) {
        return std::string(info.param.provider) + "_rails" + std::to_string(info.param.rails) +
               "_devices" + std::to_string(info.param.devices);
    });

// Without immediate data the last write is delivery-complete and the
// client stops at the server's RESULT; the bytes must still all be there.
class RailEndMessage : public ::testing::TestWithParam<const char *> {};

TEST_P(RailEndMessage, FinalMessageInsteadOfImmediateData) {
    std::string out = temp_path(std::string("endmsg_") + GetParam() + ".json");
    ProcessResult r = run_command(
        rail_cmd({"--loopback", "--provider", GetParam(), "--rails", "2", "--pages", "32",
                  "--page-size", "32k", "--repeat", "4", "--end-signal", "message", "--out", out, "-q"}),
        kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.out.find("# end of stream: delivery-complete last write, then a RESULT message"),
              std::string::npos)
        << r.out;
    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["results"]["signal"], "delivery_complete");
    EXPECT_EQ(j["results"]["iterations"], 128);
    EXPECT_EQ(j["verify"]["checked_bytes"], 32 * 32768);
    EXPECT_EQ(j["verify"]["bad_pages"], 0);
}

INSTANTIATE_TEST_SUITE_P(Providers, RailEndMessage, ::testing::Values("tcp", "shm"));

// ------------------------------------------------------------------ errors

TEST(RailCli, MissingProviderIsAnExactError) {
    ProcessResult r = run_command(rail_cmd({"--loopback", "--provider", "nosuch", "-q"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    const std::string want =
        "deputy bench rail: error: provider 'nosuch' is not available: fi_getinfo returned No data "
        "available (-61) for an RDM endpoint with RMA writes; providers that can: ";
    EXPECT_EQ(r.err.rfind(want, 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
}

TEST(RailCli, RefusedAddress) {
    uint16_t port = free_port();
    ProcessResult r = run_command(rail_cmd({"--connect", "127.0.0.1:" + std::to_string(port), "-q"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(r.err, "deputy bench rail: error: cannot connect to server 127.0.0.1:" +
                         std::to_string(port) + ": Connection refused\n");
}

TEST(RailCli, UnresolvableAddress) {
    ProcessResult r = run_command(rail_cmd({"--connect", "no-such-host.invalid", "-q"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(r.err.rfind("deputy bench rail: error: --connect no-such-host.invalid:47611: cannot "
                          "resolve host 'no-such-host.invalid': ",
                          0),
              0u)
        << r.err;
}

TEST(RailCli, MalformedAddress) {
    ProcessResult r = run_command(rail_cmd({"--connect", "127.0.0.1:99999"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(r.err, "deputy bench rail: error: --connect '127.0.0.1:99999': port '99999' is not a "
                     "number in 1-65535\n");
}

TEST(RailCli, RailsMustDivideOverDevices) {
    ProcessResult r = run_command(rail_cmd({"--loopback", "--rails", "3", "--devices", "2"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(r.err, "deputy bench rail: error: --rails 3 is not divisible by --devices 2 (each "
                     "device gets the same number of rails)\n");
}

TEST(RailCli, ServerRejectsWorkloadFlags) {
    ProcessResult r = run_command(rail_cmd({"--server", "--pages", "4"}), kLimit);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(r.err, "deputy bench rail: error: --pages is a client flag: the client's request sets "
                     "the workload\n");
}

TEST(RailCli, ExactlyOneRole) {
    ProcessResult r = run_command(rail_cmd({"--provider", "shm"}), kLimit);
    EXPECT_NE(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.err.find("Exactly 1 option from [--server,--connect,--loopback] is required"),
              std::string::npos)
        << r.err;
    r = run_command(rail_cmd({"--server", "--loopback"}), kLimit);
    EXPECT_NE(r.exit_code, 0) << describe(r);
}

// ------------------------------------------------------------------ output

TEST(RailCli, LiveLineOnlyWhenAsked) {
    ProcessResult r = run_command(
        rail_cmd({"--loopback", "--provider", "shm", "--pages", "16", "--duration", "0.8", "--progress"}),
        kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_GE(count_lines_with(r.err, {" s] ", " Gbps ", "% of link ", " Mpps  rails ", "%"}), 1) << r.err;
    // stderr is a pipe here: without --progress there is no live line.
    r = run_command(rail_cmd({"--loopback", "--provider", "shm", "--pages", "16", "--duration", "0.6"}), kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.err.find("Gbps"), std::string::npos) << r.err;
}

// A run longer than --timeout must not trip it: PROGRESS is the heartbeat.
TEST(RailCli, RunLongerThanTimeout) {
    ProcessResult r = run_command(rail_cmd({"--loopback", "--provider", "shm", "--pages", "16",
                                            "--duration", "2.5", "--timeout", "1", "-q"}),
                                  kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    auto nums = summary_numbers(r.out);
    ASSERT_EQ(nums.size(), 5u);
    EXPECT_GT(nums[1], 0.0);
}

// Several buffers per device (the article's buffers per GPU): each its own
// registration; a pass writes every page of every buffer; every byte checked.
TEST(RailCli, SeveralBuffersPerDevice) {
    std::string out = temp_path("buffers.json");
    ProcessResult r = run_command(rail_cmd({"--loopback", "--provider", "tcp", "--rails", "2",
                                            "--devices", "2", "--buffers", "3", "--pages", "4",
                                            "--page-size", "8k", "--repeat", "2", "--out", out,
                                            "-q"}),
                                  kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.out.find("# 4 pages x 8K per buffer, 3 buffers per device,"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("# verify: 192K checked, 0 bad pages, 0 bad bytes"), std::string::npos)
        << r.out;  // 2 devices x 3 buffers x 4 pages x 8 KiB
    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["config"]["buffers"], 3);
    EXPECT_EQ(j["results"]["iterations"], 2 * 3 * 4 * 2);  // devices x buffers x pages x repeat
    ProcessResult bad = run_command(rail_cmd({"--loopback", "--buffers", "65"}), kLimit);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--buffers 65 is out of range (1-64)"), std::string::npos)
        << describe(bad);
}

// The multi-rail article's server prints these between its warm-up and its
// timed writes; --sample-interval sets the samples' interval in the JSON.
TEST(RailCli, WarmupLinesAndSampleInterval) {
    std::string out = temp_path("warm.json");
    ProcessResult r = run_command(rail_cmd({"--loopback", "--provider", "tcp", "--rails", "2",
                                            "--pages", "16", "--repeat", "2",
                                            "--sample-interval", "0.01", "--out", out, "-q"}),
                                  kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const std::string lines =
        "Warmup completed.\nStarted RDMA WRITE to the remote memory: 1 device(s), 2 rail(s).\n";
    const size_t at = r.out.find(lines);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_LT(at, r.out.find(kHeader)) << r.out;
    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["results"]["sample_interval_s"], 0.01);

    ProcessResult cold = run_command(rail_cmd({"--loopback", "--provider", "tcp", "--pages", "16",
                                               "--repeat", "2", "--no-warmup", "-q"}),
                                     kLimit);
    ASSERT_EQ(cold.exit_code, 0) << describe(cold);
    EXPECT_EQ(cold.out.find("Warmup completed."), std::string::npos) << cold.out;
    EXPECT_NE(cold.out.find("Started RDMA WRITE to the remote memory: 1 device(s), 1 rail(s).\n"),
              std::string::npos)
        << cold.out;

    ProcessResult bad = run_command(rail_cmd({"--loopback", "--sample-interval", "0"}), kLimit);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--sample-interval 0: out of range (0.001-60 seconds)"),
              std::string::npos)
        << describe(bad);
}

// The multi-rail article groups each GPU's NICs by PCIe topology:
// --domain pcie on a hand-written node (one GPU, its NIC named "lo" so that
// tcp has it), printed before the run and kept in --out.
TEST(RailCli, DomainsGroupedByPcieTopology) {
    const std::string xml = std::string(DEPUTY_RAIL_TOPOLOGIES) + "/one_gpu_lo.xml";
    std::string out = temp_path("pcie.json");
    std::vector<std::string> argv = {"env", "HWLOC_XMLFILE=" + xml};
    for (const std::string &a : rail_cmd({"--loopback", "--provider", "tcp", "--rails", "2",
                                          "--domain", "pcie", "--pages", "4", "--page-size", "8k",
                                          "--repeat", "2", "--out", out, "-q"}))
        argv.push_back(a);
    ProcessResult r = run_command(argv, kLimit);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.out.find("PCIe groups (HWLOC_XMLFILE=" + xml + "):\n"
                         "  device 0 = GPU 0000:01:00.0 (card1): lo (2 hops), lo (2 hops)\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("# verify: 32K checked, 0 bad pages, 0 bad bytes"), std::string::npos)
        << r.out;  // 4 pages x 8 KiB, checked once
    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["config"]["domain"], "pcie");
    ASSERT_EQ(j["config"]["pcie_groups"].size(), 1u);
    EXPECT_EQ(j["config"]["pcie_groups"][0]["domains"], nlohmann::json({"lo", "lo"}));
    EXPECT_EQ(j["rails"][1]["domain"], "lo");

    // Two devices on a node of one GPU: refused, naming the GPU.
    argv = {"env", "HWLOC_XMLFILE=" + xml};
    for (const std::string &a :
         rail_cmd({"--loopback", "--provider", "tcp", "--rails", "2", "--devices", "2",
                   "--domain", "pcie", "-q"}))
        argv.push_back(a);
    ProcessResult bad = run_command(argv, kLimit);
    EXPECT_EQ(bad.exit_code, 1) << describe(bad);
    EXPECT_NE(bad.err.find("--domain pcie: --devices is 2 but HWLOC_XMLFILE=" + xml +
                           " has 1 GPU(s) (GPU 0000:01:00.0 (card1))"),
              std::string::npos)
        << describe(bad);
}

TEST(RailCli, FlagsFromJson) {
    std::string cfg = temp_path("cfg.json");
    std::ofstream(cfg) << R"({"provider": "shm", "rails": 2, "pages": 8, "page-size": "4k", "repeat": 2, "quiet": true})";
    ProcessResult r = run_command(rail_cmd({"--loopback", "--json", cfg}), kLimit);
    std::remove(cfg.c_str());
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    auto nums = summary_numbers(r.out);
    ASSERT_EQ(nums.size(), 5u);
    EXPECT_EQ(nums[0], 4096.0);
    EXPECT_EQ(nums[1], 16.0);
    EXPECT_NE(r.out.find("provider shm, 2 rails over 1 device"), std::string::npos) << r.out;
}

// ------------------------------------------------------------------ two processes

// Starts `deputy bench rail --server --port 0 ...` and returns its port.
int start_server(Child &server) {
    if (!server.started()) return -1;
    if (!server.wait_for_stderr(" (provider ", 30)) return -1;
    return listening_port(server.err());
}

TEST(RailCli, ServerAndClientProcessesNoWarmup) {
    Child server(rail_cmd({"--server", "--port", "0", "--bind", "127.0.0.1", "--provider", "tcp", "-q",
                           "--accept-timeout", "60"}));
    int port = start_server(server);
    ASSERT_GT(port, 0) << server.err();
    std::string out = temp_path("client.json");
    ProcessResult c = run_command(rail_cmd({"--connect", "127.0.0.1:" + std::to_string(port),
                                            "--provider", "tcp", "--rails", "2", "--pages", "16",
                                            "--repeat", "2", "--no-warmup", "--out", out, "-q"}),
                                  kLimit);
    ProcessResult s = server.finish(kLimit);
    ASSERT_EQ(c.exit_code, 0) << describe(c) << "\nserver: " << describe(s);
    ASSERT_EQ(s.exit_code, 0) << describe(s);
    // Both sides print the same measurement.
    EXPECT_EQ(summary_numbers(c.out), summary_numbers(s.out));
    EXPECT_NE(c.out.find("# warm-up: off (--no-warmup)"), std::string::npos) << c.out;
    nlohmann::json j = read_json(out);
    std::remove(out.c_str());
    EXPECT_EQ(j["role"], "client");
    EXPECT_FALSE(j["config"]["warmup"].get<bool>());
    EXPECT_EQ(j["results"]["warmup_writes"], 0);
    EXPECT_EQ(j["results"]["iterations"], 32);
    EXPECT_TRUE(j["server_host"].contains("hostname"));
}

TEST(RailCli, TopologyMismatchFailsBothSides) {
    Child server(rail_cmd({"--server", "--port", "0", "--bind", "127.0.0.1", "--rails", "2", "-q"}));
    int port = start_server(server);
    ASSERT_GT(port, 0) << server.err();
    ProcessResult c = run_command(
        rail_cmd({"--connect", "127.0.0.1:" + std::to_string(port), "--rails", "4", "-q"}), kLimit);
    ProcessResult s = server.finish(kLimit);
    const std::string why =
        "topology mismatch: the server has --rails 2 --devices 1, the client asked for --rails 4 "
        "--devices 1";
    EXPECT_EQ(c.exit_code, 1) << describe(c);
    EXPECT_EQ(c.err, "deputy bench rail: error: the server reported: " + why + "\n");
    EXPECT_EQ(s.exit_code, 1) << describe(s);
    EXPECT_NE(s.err.find("deputy bench rail: error: " + why + "\n"), std::string::npos) << s.err;
}

TEST(RailCli, ProviderMismatchFailsBothSides) {
    Child server(rail_cmd({"--server", "--port", "0", "--bind", "127.0.0.1", "--provider", "shm", "-q"}));
    int port = start_server(server);
    ASSERT_GT(port, 0) << server.err();
    ProcessResult c = run_command(
        rail_cmd({"--connect", "127.0.0.1:" + std::to_string(port), "--provider", "tcp", "-q"}), kLimit);
    ProcessResult s = server.finish(kLimit);
    const std::string why =
        "provider mismatch: the server uses 'shm' (--provider shm), the client 'tcp;ofi_rxm'";
    EXPECT_EQ(c.exit_code, 1) << describe(c);
    EXPECT_EQ(c.err, "deputy bench rail: error: the server reported: " + why + "\n");
    EXPECT_EQ(s.exit_code, 1) << describe(s);
}

TEST(RailCli, ServerGivesUpWithoutAClient) {
    ProcessResult s = run_command(
        rail_cmd({"--server", "--port", "0", "--bind", "127.0.0.1", "--accept-timeout", "0.5", "-q"}), kLimit);
    EXPECT_EQ(s.exit_code, 1) << describe(s);
    const std::string head = "deputy bench rail: error: no client connected to port ";
    const std::string tail = " within 0.5 s (--accept-timeout)\n";
    // After the "listening on" log line, the error is the last line.
    size_t at = s.err.find(head);
    ASSERT_NE(at, std::string::npos) << s.err;
    ASSERT_GE(s.err.size(), at + head.size() + tail.size());
    EXPECT_EQ(s.err.substr(s.err.size() - tail.size()), tail) << s.err;
    EXPECT_EQ(std::atoi(s.err.c_str() + at + head.size()), listening_port(s.err)) << s.err;
}

}  // namespace
}  // namespace deputy::test
