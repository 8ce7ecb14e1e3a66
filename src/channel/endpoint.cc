#include "channel/endpoint.h"

#include "channel/secure.h"
#include "channel/transport/shm/transport.h"
#include "channel/transport/tcp/transport.h"
#include "channel/transport/uds/transport.h"
#include "common/check.h"

namespace deputy::channel {
namespace {

TransportOptions inner_options(const EndpointConfig &config) {
    TransportOptions options = config.options;
    if (config.secure) options.max_message += secure::kOverhead;
    return options;
}

dp_status_t finish(const EndpointConfig &config, secure::Role role, const Deadline &deadline,
                   std::unique_ptr<Transport> inner, std::unique_ptr<Transport> *out) {
    if (!config.secure) {
        *out = std::move(inner);
        return DP_OK;
    }
    return secure::establish(std::move(inner), *config.key, role, deadline.remaining_ns(), out);
}

template <typename L>
class ListenerOf final : public EndpointListener {
  public:
    ListenerOf(const EndpointConfig &config, std::unique_ptr<L> listener)
        : config_(config), listener_(std::move(listener)) {}

    dp_status_t accept(int64_t timeout_ns, std::unique_ptr<Transport> *out) override {
        Deadline deadline(timeout_ns);
        std::unique_ptr<Transport> inner;
        DP_CHECK(listener_->accept(inner_options(config_), timeout_ns, &inner));
        return finish(config_, secure::Role::kResponder, deadline, std::move(inner), out);
    }
    std::string address() const override { return listener_->address(); }

  private:
    EndpointConfig config_;
    std::unique_ptr<L> listener_;
};

}  // namespace

const char *transport_kind_name(TransportKind kind) {
    switch (kind) {
        case TransportKind::kShm:
            return "shm";
        case TransportKind::kUds:
            return "uds";
        case TransportKind::kTcp:
            return "tcp";
    }
    return "?";
}

bool parse_transport_kind(std::string_view text, TransportKind *out) {
    for (TransportKind k : {TransportKind::kShm, TransportKind::kUds, TransportKind::kTcp}) {
        if (text == transport_kind_name(k)) {
            *out = k;
            return true;
        }
    }
    return false;
}

dp_status_t check_config(const EndpointConfig &config) {
    if (config.address.empty()) DP_FAIL(DP_ERR_INVALID, "channel: no address given");
    if (config.options.max_message == 0 || config.options.max_message > kMaxMessageCeiling)
        DP_FAIL(DP_ERR_INVALID, "channel: message limit {} bytes is outside 1..{}",
                config.options.max_message, kMaxMessageCeiling);
    if (config.secure && !config.key)
        DP_FAIL(DP_ERR_INVALID, "channel: the secure session needs a key (--key FILE)");
    if (config.kind == TransportKind::kTcp && !config.secure && !config.allow_insecure_tcp)
        DP_FAIL(DP_ERR_DENIED,
                "channel: plain TCP would carry every message in clear; use "
                "--secure --key FILE, or --insecure-tcp to accept that");
    return DP_OK;
}

dp_status_t EndpointListener::open(const EndpointConfig &config,
                                   std::unique_ptr<EndpointListener> *out) {
    DP_CHECK(check_config(config));
    switch (config.kind) {
        case TransportKind::kShm: {
            std::unique_ptr<shm::Listener> l;
            DP_CHECK(shm::Listener::listen(config.address, &l));
            *out = std::make_unique<ListenerOf<shm::Listener>>(config, std::move(l));
            return DP_OK;
        }
        case TransportKind::kUds: {
            std::unique_ptr<uds::Listener> l;
            DP_CHECK(uds::Listener::listen(config.address, &l));
            *out = std::make_unique<ListenerOf<uds::Listener>>(config, std::move(l));
            return DP_OK;
        }
        case TransportKind::kTcp: {
            std::unique_ptr<tcp::Listener> l;
            DP_CHECK(tcp::Listener::listen(config.address, &l));
            *out = std::make_unique<ListenerOf<tcp::Listener>>(config, std::move(l));
            return DP_OK;
        }
    }
    DP_FAIL(DP_ERR_INVALID, "channel: unknown transport");
}

dp_status_t connect_endpoint(const EndpointConfig &config, int64_t timeout_ns,
                             std::unique_ptr<Transport> *out) {
    DP_CHECK(check_config(config));
    Deadline deadline(timeout_ns);
    std::unique_ptr<Transport> inner;
    const TransportOptions options = inner_options(config);
    switch (config.kind) {
        case TransportKind::kShm:
            DP_CHECK(shm::connect(config.address, options, timeout_ns, &inner));
            break;
        case TransportKind::kUds:
            DP_CHECK(uds::connect(config.address, options, timeout_ns, &inner));
            break;
        case TransportKind::kTcp:
            DP_CHECK(tcp::connect(config.address, options, timeout_ns, &inner));
            break;
    }
    return finish(config, secure::Role::kInitiator, deadline, std::move(inner), out);
}

}  // namespace deputy::channel
