#include "bench/rail/handshake.h"

#include "bench/rail/rail_error.h"
#include "bench/rail/wire.h"

namespace deputy::rail {
namespace {

nlohmann::json encode_rails(const std::vector<RailAdvert> &rails) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto &r : rails) {
        nlohmann::json buffers = nlohmann::json::array();
        for (const auto &b : r.buffers)
            buffers.push_back({{"base", b.base}, {"key", b.key}, {"len", b.len}});
        out.push_back({{"address", to_hex(r.address)}, {"domain", r.domain}, {"buffers", buffers}});
    }
    return out;
}

std::vector<RailAdvert> decode_rails(const nlohmann::json &body, const char *msg) {
    auto list = field<nlohmann::json>(body, msg, "rail_info");
    if (!list.is_array()) throw RailError(std::string(msg) + ": field 'rail_info' is not an array");
    std::vector<RailAdvert> out;
    for (const auto &r : list) {
        RailAdvert a;
        a.address = from_hex(field<std::string>(r, msg, "address"), "address");
        a.domain = field<std::string>(r, msg, "domain");
        auto buffers = field<nlohmann::json>(r, msg, "buffers");
        if (!buffers.is_array())
            throw RailError(std::string(msg) + ": field 'buffers' is not an array");
        for (const auto &b : buffers)
            a.buffers.push_back({field<uint64_t>(b, msg, "base"), field<uint64_t>(b, msg, "key"),
                                 field<uint64_t>(b, msg, "len")});
        out.push_back(std::move(a));
    }
    return out;
}

}  // namespace

nlohmann::json encode_hello(const Hello &h) {
    const RailOptions &w = h.workload;
    return {{"version", kWireVersion},
            {"provider", h.provider},
            {"cq_data", h.cq_data},
            {"rails", w.rails},
            {"devices", w.devices},
            {"page_size", w.page_size},
            {"pages", w.pages},
            {"buffers", w.buffers},
            {"repeat", w.repeat},
            {"duration_s", w.duration_s},
            {"batch", w.batch},
            {"tx_depth", w.tx_depth},
            {"link_gbps", w.link_gbps},
            {"sample_interval_s", w.sample_interval_s},
            {"warmup", w.warmup},
            {"verify", w.verify},
            {"seed", w.seed},
            {"timeout_s", w.timeout_s},
            {"rail_info", encode_rails(h.rails)}};
}

Hello decode_hello(const nlohmann::json &b) {
    const char *m = "HELLO";
    uint64_t version = field<uint64_t>(b, m, "version");
    if (version != kWireVersion)
        throw RailError("the client speaks protocol version " + std::to_string(version) +
                        ", this server " + std::to_string(kWireVersion) +
                        " (run the same deputy on both hosts)");
    Hello h;
    h.provider = field<std::string>(b, m, "provider");
    h.cq_data = field<bool>(b, m, "cq_data");
    RailOptions &w = h.workload;
    w.rails = field<int>(b, m, "rails");
    w.devices = field<int>(b, m, "devices");
    w.page_size = field<uint64_t>(b, m, "page_size");
    w.pages = field<uint64_t>(b, m, "pages");
    w.buffers = field<uint64_t>(b, m, "buffers");
    w.repeat = field<uint64_t>(b, m, "repeat");
    w.duration_s = field<double>(b, m, "duration_s");
    w.batch = field<int>(b, m, "batch");
    w.tx_depth = field<int>(b, m, "tx_depth");
    w.link_gbps = field<double>(b, m, "link_gbps");
    w.sample_interval_s = field<double>(b, m, "sample_interval_s");
    w.warmup = field<bool>(b, m, "warmup");
    w.verify = field<bool>(b, m, "verify");
    w.seed = field<uint64_t>(b, m, "seed");
    w.timeout_s = field<double>(b, m, "timeout_s");
    h.rails = decode_rails(b, m);
    if (h.rails.size() != size_t(w.rails))
        throw RailError("HELLO: " + std::to_string(h.rails.size()) + " rail addresses for " +
                        std::to_string(w.rails) + " rails");
    for (const auto &r : h.rails) {
        if (r.buffers.size() != w.buffers)
            throw RailError("HELLO: " + std::to_string(r.buffers.size()) +
                            " buffers advertised on a rail for --buffers " +
                            std::to_string(w.buffers));
        for (const auto &buffer : r.buffers)
            if (buffer.len < w.page_size * w.pages)
                throw RailError("HELLO: a client buffer of " + std::to_string(buffer.len) +
                                " bytes is smaller than --pages x --page-size");
    }
    return h;
}

nlohmann::json encode_ready(const Ready &r) {
    return {{"provider", r.provider}, {"signal", r.signal}, {"rail_info", encode_rails(r.rails)}};
}

Ready decode_ready(const nlohmann::json &b) {
    const char *m = "READY";
    Ready r;
    r.provider = field<std::string>(b, m, "provider");
    r.signal = field<std::string>(b, m, "signal");
    if (r.signal != "remote_cq_data" && r.signal != "delivery_complete")
        throw RailError("READY: unknown signal mode '" + r.signal + "'");
    r.rails = decode_rails(b, m);
    return r;
}

RailOptions merge_workload(const RailOptions &server, const Hello &hello) {
    const RailOptions &w = hello.workload;
    if (server.topology_given && (server.rails != w.rails || server.devices != w.devices))
        throw RailError("topology mismatch: the server has --rails " + std::to_string(server.rails) +
                        " --devices " + std::to_string(server.devices) + ", the client asked for --rails " +
                        std::to_string(w.rails) + " --devices " + std::to_string(w.devices));
    RailOptions merged = server;
    merged.rails = w.rails;
    merged.devices = w.devices;
    merged.page_size = w.page_size;
    merged.pages = w.pages;
    merged.buffers = w.buffers;
    merged.repeat = w.repeat;
    merged.duration_s = w.duration_s;
    merged.batch = w.batch;
    merged.tx_depth = w.tx_depth;
    merged.link_gbps = w.link_gbps;
    merged.sample_interval_s = w.sample_interval_s;
    merged.warmup = w.warmup;
    merged.verify = w.verify;
    merged.seed = w.seed;
    merged.timeout_s = w.timeout_s;
    validate(merged);
    return merged;
}

}  // namespace deputy::rail
