#include "bench/rail/reporter.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace deputy::rail {

nlohmann::json Sample::to_json() const {
    return {{"t", elapsed_s}, {"gbps", gbps}, {"pct", pct_of_link}, {"mpps", mpps}, {"shares", shares}};
}

Sample Sample::from_json(const nlohmann::json &j) {
    Sample s;
    s.elapsed_s = j.value("t", 0.0);
    s.gbps = j.value("gbps", 0.0);
    s.pct_of_link = j.value("pct", 0.0);
    s.mpps = j.value("mpps", 0.0);
    if (j.contains("shares") && j["shares"].is_array())
        for (const auto &v : j["shares"])
            if (v.is_number()) s.shares.push_back(v.get<double>());
    return s;
}

Sampler::Sampler(const std::vector<RailCounters> *counters, double link_gbps_total,
                 double interval_s)
    : counters_(counters),
      link_total_(link_gbps_total),
      interval_s_(interval_s),
      last_bytes_(counters->size(), 0) {}

Sample Sampler::take(uint64_t now_ns) {
    Sample s;
    if (t0_ == 0) {
        t0_ = last_ns_ = now_ns;
        s.shares.assign(counters_->size(), 0.0);
        return s;
    }
    double dt = double(now_ns - last_ns_) * 1e-9;
    uint64_t delta_total = 0, writes = 0;
    std::vector<uint64_t> delta(counters_->size());
    for (size_t k = 0; k < counters_->size(); ++k) {
        uint64_t bytes = (*counters_)[k].bytes.load(std::memory_order_relaxed);
        writes += (*counters_)[k].writes.load(std::memory_order_relaxed);
        delta[k] = bytes - last_bytes_[k];
        delta_total += delta[k];
        last_bytes_[k] = bytes;
    }
    s.elapsed_s = double(now_ns - t0_) * 1e-9;
    if (dt > 0) {
        s.gbps = double(delta_total) * 8 / dt / 1e9;
        s.mpps = double(writes - last_writes_) / dt / 1e6;
    }
    s.pct_of_link = link_total_ > 0 ? 100.0 * s.gbps / link_total_ : 0;
    for (uint64_t d : delta) s.shares.push_back(delta_total ? double(d) / double(delta_total) : 0.0);
    last_writes_ = writes;
    last_ns_ = now_ns;
    // Only whole intervals count for the peak; the last, short one would be noise.
    if (dt >= interval_s_ * 0.9) {
        rates_.push_back(s.gbps);
        peak_ = std::max(peak_, s.gbps);
    }
    return s;
}

std::string LiveLine::format(const Sample &s) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "[%6.2f s] %9.3f Gbps %6.2f%% of link %8.4f Mpps  rails", s.elapsed_s,
                  s.gbps, s.pct_of_link, s.mpps);
    std::string line = buf;
    for (size_t k = 0; k < s.shares.size(); ++k) {
        if (k == 8 && s.shares.size() > 9) {
            line += " ...";
            break;
        }
        std::snprintf(buf, sizeof(buf), "%s%.0f%%", k == 0 ? " " : "/", 100.0 * s.shares[k]);
        line += buf;
    }
    return line;
}

void LiveLine::show(const Sample &sample) {
    if (!enabled_) return;
    std::string line = format(sample);
    if (tty_) {
        std::fprintf(stderr, "\r%s\033[K", line.c_str());
        open_ = true;
    } else {
        std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
}

void LiveLine::finish() {
    if (open_) {
        std::fputc('\n', stderr);
        std::fflush(stderr);
        open_ = false;
    }
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

bool live_output_wanted(bool quiet, bool progress) {
    return !quiet && (progress || stderr_is_tty());
}

}  // namespace deputy::rail
