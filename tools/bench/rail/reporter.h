// The live line: Gbps, % of link, Mpps and each rail's share of the last
// interval, refreshed a few times a second on stderr. The server samples
// its counters (Sampler) and prints and/or forwards each sample to the
// client, which prints it with the same LiveLine.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/rail/writer.h"

namespace deputy::rail {

struct Sample {
    double elapsed_s = 0;
    double gbps = 0;
    double pct_of_link = 0;
    double mpps = 0;
    std::vector<double> shares;  // per rail, 0..1, of this interval's bytes

    nlohmann::json to_json() const;
    static Sample from_json(const nlohmann::json &j);
};

class Sampler {
public:
    // interval_s: the sampling interval (--sample-interval); shorter
    // samples (the last one) are shown but kept out of rates() and the peak.
    Sampler(const std::vector<RailCounters> *counters, double link_gbps_total, double interval_s);
    // Samples the counters; `now_ns` is timing::now_ns().
    Sample take(uint64_t now_ns);
    // Highest rate over whole intervals so far (Gbit/s), and every sample's rate.
    double peak_gbps() const { return peak_; }
    const std::vector<double> &rates() const { return rates_; }

private:
    const std::vector<RailCounters> *counters_;
    double link_total_;
    double interval_s_;
    uint64_t t0_ = 0, last_ns_ = 0;
    std::vector<uint64_t> last_bytes_;
    uint64_t last_writes_ = 0;
    double peak_ = 0;
    std::vector<double> rates_;
};

class LiveLine {
public:
    // enabled: print at all; tty: overwrite one line with '\r' (else one line each).
    LiveLine(bool enabled, bool tty) : enabled_(enabled), tty_(tty) {}
    ~LiveLine() { finish(); }
    void show(const Sample &sample);
    // Ends the overwritten line so the summary starts on a fresh one.
    void finish();
    static std::string format(const Sample &sample);

private:
    bool enabled_;
    bool tty_;
    bool open_ = false;
};

// --quiet off and (stderr is a terminal or --progress).
bool live_output_wanted(bool quiet, bool progress);
bool stderr_is_tty();

}  // namespace deputy::rail
