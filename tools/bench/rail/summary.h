// The measurement of a run, as the server sends it in RESULT and as the
// tool prints it (a perftest-style table on stdout) and saves it (--out).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/rail/options.h"
#include "bench/rail/pcie_groups.h"
#include "bench/rail/pattern.h"

namespace deputy::rail {

struct RailResult {
    int rail = 0;
    int device = 0;
    std::string domain;       // the writing (server) side's domain
    std::string peer_domain;  // the client's domain this rail writes into
    uint64_t writes = 0;
    uint64_t bytes = 0;
    uint64_t eagain = 0;
    double first_completion_ms = 0;  // after the timed start
};

struct RunResult {
    std::string provider;     // as libfabric names it ("tcp;ofi_rxm")
    std::string provider_version;
    std::string signal;       // "remote_cq_data" or "delivery_complete"
    double seconds = 0;       // timed region: first device start to last completion
    uint64_t bytes = 0;
    uint64_t writes = 0;
    double peak_gbps = 0;
    double warmup_ms = 0;     // slowest device's warm-up
    uint64_t warmup_writes = 0;
    std::vector<double> samples_gbps;  // one per live interval
    std::vector<RailResult> rails;
    nlohmann::json server_host;

    double avg_gbps() const { return seconds > 0 ? double(bytes) * 8 / seconds / 1e9 : 0; }
    double mpps() const { return seconds > 0 ? double(writes) / seconds / 1e6 : 0; }

    nlohmann::json to_json() const;
    static RunResult from_json(const nlohmann::json &j);  // throws RailError naming a field
};

struct VerifySummary {
    bool enabled = false;
    VerifyReport report;
    nlohmann::json to_json() const;
    static VerifySummary from_json(const nlohmann::json &j);
};

// The table on stdout.
void print_summary(std::FILE *out, const RailOptions &options, const RunResult &result,
                   const VerifySummary &verify);

// The --out document: config, versions, host, results, rails, verify;
// config.pcie_groups holds this side's `--domain pcie` groups, when any.
nlohmann::json results_document(const RailOptions &options, const RunResult &result,
                                const VerifySummary &verify,
                                const std::vector<DeviceGroup> &groups = {});
// Writes it to options.out; throws RailError naming the file.
void write_results(const RailOptions &options, const RunResult &result, const VerifySummary &verify,
                   const std::vector<DeviceGroup> &groups);

}  // namespace deputy::rail
