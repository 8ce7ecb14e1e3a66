// Output of `deputy bench channel`: a perftest-style table on stdout
// (`#bytes #iterations BW average MsgRate`, as perftest prints it), the
// counts verdict, and the --out JSON (config, versions, host, every figure).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/channel/options.h"
#include "bench/channel/result.h"

namespace deputy::bench::channel {

// The figures of one direction of one side.
struct Rate {
    double seconds = 0;
    double avg_us = 0;    // per message
    double mb_per_s = 0;  // 10^6 bytes per second
    double mpps = 0;      // 10^6 messages per second
};
Rate send_rate(const SideResult &r);
Rate recv_rate(const SideResult &r);

void print_header(const Plan &plan, const std::vector<SideResult> &sides);
void print_rows(const Plan &plan, const std::vector<SideResult> &sides);

nlohmann::json to_json(const SideResult &r);
SideResult from_json(const nlohmann::json &j);

// `baseline`: the --compare run, written under "compare" when given.
bool write_json(const std::string &path, const ChannelOptions &options, const Plan &plan,
                const std::vector<SideResult> &sides,
                const std::vector<SideResult> *baseline = nullptr);

}  // namespace deputy::bench::channel
