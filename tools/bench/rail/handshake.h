// HELLO and READY: what client and server tell each other before writing.
// The client's HELLO carries the workload (the client's flags decide it)
// and, per rail, the endpoint address and the key and base address of the
// buffer that rail may write; READY carries the server's endpoint addresses
// and how the end of the stream will be signalled.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/rail/options.h"

namespace deputy::rail {

// A client buffer as one rail reaches it.
struct BufferAdvert {
    uint64_t base = 0;  // remote address of its byte 0
    uint64_t key = 0;   // its key on this rail
    uint64_t len = 0;
};

struct RailAdvert {
    std::vector<uint8_t> address;  // fi_getname
    std::string domain;
    std::vector<BufferAdvert> buffers;  // client: its device's buffers, in order; server: none
};

struct Hello {
    RailOptions workload;  // only the workload fields are meaningful
    std::string provider;  // libfabric's name for the client's provider
    bool cq_data = false;  // every client rail can receive immediate data
    std::vector<RailAdvert> rails;
};

struct Ready {
    std::string provider;
    std::string signal;  // "remote_cq_data" or "delivery_complete"
    std::vector<RailAdvert> rails;
};

nlohmann::json encode_hello(const Hello &hello);
Hello decode_hello(const nlohmann::json &body);  // throws RailError naming a field
nlohmann::json encode_ready(const Ready &ready);
Ready decode_ready(const nlohmann::json &body);

// The server's options for this run: its own (provider, domain, pin, output)
// plus the client's workload. Throws RailError when --rails/--devices were
// given on the server and differ from the client's, or the workload is
// invalid.
RailOptions merge_workload(const RailOptions &server, const Hello &hello);

}  // namespace deputy::rail
