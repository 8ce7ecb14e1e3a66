// Opening a channel from a configuration: pick the transport, listen or
// connect, and run the secure handshake when asked. The policy lives here,
// once, for the agent, the client and the benchmark alike: plain TCP is
// refused unless the caller explicitly allows it, since it would carry
// everything in clear across a network.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "channel/key_file.h"
#include "channel/transport.h"

namespace deputy::channel {

enum class TransportKind { kShm, kUds, kTcp };

// "shm", "uds", "tcp".
const char *transport_kind_name(TransportKind kind);
bool parse_transport_kind(std::string_view text, TransportKind *out);

struct EndpointConfig {
    TransportKind kind = TransportKind::kUds;
    // uds/shm: socket path or @abstract name; tcp: host:port (see the
    // transport headers).
    std::string address;
    // max_message is what the application sees; the secure session's 17
    // bytes per frame are added for the transport underneath.
    TransportOptions options;
    bool secure = false;
    std::shared_ptr<const secure::Key> key;  // required when secure
    // Plain TCP is refused unless this is set.
    bool allow_insecure_tcp = false;
};

// DP_OK, or the first problem (logged): DP_ERR_DENIED for plain TCP not
// allowed, DP_ERR_INVALID for a missing key, an empty address, or a message
// limit outside (0, kMaxMessageCeiling].
dp_status_t check_config(const EndpointConfig &config);

class EndpointListener {
  public:
    static dp_status_t open(const EndpointConfig &config, std::unique_ptr<EndpointListener> *out);
    virtual ~EndpointListener() = default;

    // Accepts one peer and, if secure, completes the handshake, all within
    // the timeout.
    virtual dp_status_t accept(int64_t timeout_ns, std::unique_ptr<Transport> *out) = 0;
    // Where peers connect: the socket path, or host:port with the real port.
    virtual std::string address() const = 0;
};

dp_status_t connect_endpoint(const EndpointConfig &config, int64_t timeout_ns,
                             std::unique_ptr<Transport> *out);

}  // namespace deputy::channel
