#include "bench/rail/summary.h"


#include <cstring>

#include "bench/rail/fabric.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/reporter.h"
#include "bench/rail/wire.h"
#include "common/result_document.h"
#include "common/units.h"

namespace deputy::rail {

nlohmann::json RunResult::to_json() const {
    nlohmann::json rails_json = nlohmann::json::array();
    for (const auto &r : rails)
        rails_json.push_back({{"rail", r.rail},
                              {"device", r.device},
                              {"domain", r.domain},
                              {"peer_domain", r.peer_domain},
                              {"writes", r.writes},
                              {"bytes", r.bytes},
                              {"eagain", r.eagain},
                              {"first_completion_ms", r.first_completion_ms}});
    return {{"provider", provider},
            {"provider_version", provider_version},
            {"signal", signal},
            {"seconds", seconds},
            {"bytes", bytes},
            {"writes", writes},
            {"peak_gbps", peak_gbps},
            {"warmup_ms", warmup_ms},
            {"warmup_writes", warmup_writes},
            {"samples_gbps", samples_gbps},
            {"rails", rails_json},
            {"server_host", server_host}};
}

RunResult RunResult::from_json(const nlohmann::json &j) {
    const char *m = "RESULT";
    RunResult r;
    r.provider = field<std::string>(j, m, "provider");
    r.provider_version = field<std::string>(j, m, "provider_version");
    r.signal = field<std::string>(j, m, "signal");
    r.seconds = field<double>(j, m, "seconds");
    r.bytes = field<uint64_t>(j, m, "bytes");
    r.writes = field<uint64_t>(j, m, "writes");
    r.peak_gbps = field<double>(j, m, "peak_gbps");
    r.warmup_ms = field<double>(j, m, "warmup_ms");
    r.warmup_writes = field<uint64_t>(j, m, "warmup_writes");
    for (const auto &v : field<nlohmann::json>(j, m, "samples_gbps"))
        r.samples_gbps.push_back(v.get<double>());
    for (const auto &rj : field<nlohmann::json>(j, m, "rails")) {
        RailResult rr;
        rr.rail = field<int>(rj, m, "rail");
        rr.device = field<int>(rj, m, "device");
        rr.domain = field<std::string>(rj, m, "domain");
        rr.peer_domain = field<std::string>(rj, m, "peer_domain");
        rr.writes = field<uint64_t>(rj, m, "writes");
        rr.bytes = field<uint64_t>(rj, m, "bytes");
        rr.eagain = field<uint64_t>(rj, m, "eagain");
        rr.first_completion_ms = field<double>(rj, m, "first_completion_ms");
        r.rails.push_back(rr);
    }
    r.server_host = j.value("server_host", nlohmann::json::object());
    return r;
}

nlohmann::json VerifySummary::to_json() const {
    nlohmann::json first = nlohmann::json::array();
    for (const auto &mm : report.first)
        first.push_back({{"device", mm.device},
                         {"page", mm.page},
                         {"offset", mm.offset},
                         {"expected", mm.expected},
                         {"actual", mm.actual},
                         {"bytes_differ", mm.bytes_differ},
                         {"text", mm.describe()}});
    return {{"enabled", enabled},
            {"checked_bytes", report.checked_bytes},
            {"bad_pages", report.bad_pages},
            {"bad_bytes", report.bad_bytes},
            {"mismatches", first}};
}

VerifySummary VerifySummary::from_json(const nlohmann::json &j) {
    const char *m = "VERDICT";
    VerifySummary v;
    v.enabled = field<bool>(j, m, "enabled");
    v.report.checked_bytes = field<uint64_t>(j, m, "checked_bytes");
    v.report.bad_pages = field<uint64_t>(j, m, "bad_pages");
    v.report.bad_bytes = field<uint64_t>(j, m, "bad_bytes");
    for (const auto &mj : field<nlohmann::json>(j, m, "mismatches")) {
        Mismatch mm;
        mm.device = uint32_t(field<uint64_t>(mj, m, "device"));
        mm.page = field<uint64_t>(mj, m, "page");
        mm.offset = field<uint64_t>(mj, m, "offset");
        mm.expected = uint8_t(field<uint64_t>(mj, m, "expected"));
        mm.actual = uint8_t(field<uint64_t>(mj, m, "actual"));
        mm.bytes_differ = field<uint64_t>(mj, m, "bytes_differ");
        v.report.first.push_back(mm);
    }
    return v;
}

void print_summary(std::FILE *out, const RailOptions &o, const RunResult &r,
                   const VerifySummary &v) {
    const char *rule =
        "#---------------------------------------------------------------------------------\n";
    std::fputs(rule, out);
    std::fprintf(out, "# deputy bench rail: RDMA WRITE, provider %s, %d rail%s over %d device%s\n",
                 r.provider.c_str(), o.rails, o.rails == 1 ? "" : "s", o.devices,
                 o.devices == 1 ? "" : "s");
    std::string work = o.duration_s > 0 ? "duration " + std::to_string(o.duration_s) + " s"
                                        : "repeat " + std::to_string(o.repeat);
    const std::string buffers =
        o.buffers == 1 ? "per device"
                       : "per buffer, " + std::to_string(o.buffers) + " buffers per device";
    std::fprintf(out, "# %llu pages x %s %s, %s, batch %d, tx-depth %d, warm-up %s\n",
                 static_cast<unsigned long long>(o.pages), units::format_size(o.page_size).c_str(),
                 buffers.c_str(), work.c_str(), o.batch, o.tx_depth, o.warmup ? "on" : "off");
    std::fprintf(out, "# end of stream: %s\n",
                 r.signal == "remote_cq_data"
                     ? "immediate data (FI_REMOTE_CQ_DATA) on each rail's last write"
                     : "delivery-complete last write, then a RESULT message");
    std::fputs(rule, out);
    std::fprintf(out, " %-10s %-14s %-16s %-18s %s\n", "#bytes", "#iterations", "BW peak[Gb/s]",
                 "BW average[Gb/s]", "MsgRate[Mpps]");
    double peak = std::max(r.peak_gbps, r.avg_gbps());
    std::fprintf(out, " %-10llu %-14llu %-16.2f %-18.2f %.6f\n",
                 static_cast<unsigned long long>(o.page_size),
                 static_cast<unsigned long long>(r.writes), peak, r.avg_gbps(), r.mpps());
    std::fputs(rule, out);
    double link = o.link_gbps * o.rails;
    std::fprintf(out, "# %.6f s, %s written, %.1f%% of %g Gb/s (%g Gb/s x %d rails, --link-gbps)\n",
                 r.seconds, units::format_size(r.bytes).c_str(),
                 link > 0 ? 100.0 * r.avg_gbps() / link : 0.0, link, o.link_gbps, o.rails);
    std::fprintf(out, "# %4s %6s  %-12s %-12s %12s %10s %7s %10s %14s\n", "rail", "device",
                 "domain", "peer-domain", "writes", "Gb/s", "share", "eagain", "first-compl-ms");
    for (const auto &rail : r.rails) {
        double gbps = r.seconds > 0 ? double(rail.bytes) * 8 / r.seconds / 1e9 : 0;
        double share = r.bytes ? 100.0 * double(rail.bytes) / double(r.bytes) : 0;
        std::fprintf(out, "# %4d %6d  %-12s %-12s %12llu %10.2f %6.1f%% %10llu %14.3f\n", rail.rail,
                     rail.device, rail.domain.c_str(), rail.peer_domain.c_str(),
                     static_cast<unsigned long long>(rail.writes),
                     gbps, share, static_cast<unsigned long long>(rail.eagain),
                     rail.first_completion_ms);
    }
    if (o.warmup)
        std::fprintf(out, "# warm-up: %llu writes (one per rail) in %.3f ms, before timing\n",
                     static_cast<unsigned long long>(r.warmup_writes), r.warmup_ms);
    else
        std::fprintf(out, "# warm-up: off (--no-warmup): connection set-up is inside the timed region\n");
    if (!v.enabled) {
        std::fprintf(out, "# verify: off (--no-verify)\n");
    } else {
        std::fprintf(out, "# verify: %s checked, %llu bad pages, %llu bad bytes\n",
                     units::format_size(v.report.checked_bytes).c_str(),
                     static_cast<unsigned long long>(v.report.bad_pages),
                     static_cast<unsigned long long>(v.report.bad_bytes));
        for (const auto &mm : v.report.first) std::fprintf(out, "#   mismatch: %s\n", mm.describe().c_str());
    }
    std::fflush(out);
}

nlohmann::json results_document(const RailOptions &o, const RunResult &r, const VerifySummary &v,
                                const std::vector<DeviceGroup> &groups) {
    nlohmann::json rails = nlohmann::json::array();
    for (const auto &rail : r.rails) {
        double gbps = r.seconds > 0 ? double(rail.bytes) * 8 / r.seconds / 1e9 : 0;
        rails.push_back({{"rail", rail.rail},
                         {"device", rail.device},
                         {"domain", rail.domain},
                         {"peer_domain", rail.peer_domain},
                         {"writes", rail.writes},
                         {"bytes", rail.bytes},
                         {"gbps", gbps},
                         {"share", r.bytes ? double(rail.bytes) / double(r.bytes) : 0.0},
                         {"eagain", rail.eagain},
                         {"first_completion_ms", rail.first_completion_ms}});
    }
    double link = o.link_gbps * o.rails;
    nlohmann::json config = {
        {"provider", o.provider},
        {"domain", o.domain},
        {"rails", o.rails},
        {"devices", o.devices},
        {"page_size", o.page_size},
        {"pages", o.pages},
        {"buffers", o.buffers},
        {"repeat", o.repeat},
        {"duration_s", o.duration_s},
        {"batch", o.batch},
        {"tx_depth", o.tx_depth},
        {"link_gbps", o.link_gbps},
        {"warmup", o.warmup},
        {"verify", o.verify},
        {"seed", o.seed},
        {"pin", o.pin}};
    if (!groups.empty()) config["pcie_groups"] = to_json(groups);
    const nlohmann::json versions = {
        {"libfabric", libfabric_version()},
        {"libfabric_api",
         std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION)},
        {"provider", r.provider},
        {"provider_version", r.provider_version}};
    const nlohmann::json results = {
        {"bytes_per_write", o.page_size},
        {"iterations", r.writes},
        {"seconds", r.seconds},
        {"bytes", r.bytes},
        {"bw_peak_gbps", std::max(r.peak_gbps, r.avg_gbps())},
        {"bw_average_gbps", r.avg_gbps()},
        {"msg_rate_mpps", r.mpps()},
        {"pct_of_link", link > 0 ? 100.0 * r.avg_gbps() / link : 0.0},
        {"signal", r.signal},
        {"warmup_ms", r.warmup_ms},
        {"warmup_writes", r.warmup_writes},
        {"sample_interval_s", o.sample_interval_s},
        {"samples_gbps", r.samples_gbps}};
    nlohmann::json doc = cli::result_document("rail", config, versions, results);
    doc["tool"] = "deputy bench rail";
    doc["role"] = role_name(o.role);
    doc["server_host"] = r.server_host;
    doc["rails"] = rails;
    doc["verify"] = v.to_json();
    return doc;
}

void write_results(const RailOptions &o, const RunResult &r, const VerifySummary &v,
                   const std::vector<DeviceGroup> &groups) {
    if (o.out.empty()) return;
    std::string error;
    if (!cli::write_json_file("--out", o.out, results_document(o, r, v, groups), &error))
        throw RailError(error);
}

}  // namespace deputy::rail
