// What the remote-agent suites share: an agent listening on a free port of
// 127.0.0.1 with a fresh key, the client's environment, and a peer that
// opens the secure session by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "channel/agent_info.h"
#include "channel/key_file.h"
#include "channel/secure.h"
#include "channel/transport/tcp/transport.h"

namespace deputy::testing::remote {

using deputy::testing::AgentProcess;
using deputy::testing::eventually;

// A port nobody listens on now (the agent binds it a moment later).
inline std::string free_port() {
    std::unique_ptr<deputy::channel::tcp::Listener> l;
    if (deputy::channel::tcp::Listener::listen("127.0.0.1:0", &l) != DP_OK) return "";
    const std::string &a = l->address();
    return a.substr(a.rfind(':') + 1);
}

// A key file in its own private directory, removed with it.
struct KeyFile {
    KeyFile() : dir(deputy::testing::make_private_dir()) {
        EXPECT_EQ(deputy::channel::secure::generate_key_file(path()), DP_OK);
    }
    ~KeyFile() { std::filesystem::remove_all(dir); }
    std::string path() const { return dir + "/deputy.key"; }
    std::string dir;
};

// Sets an environment variable for the scope.
struct Env {
    Env(const char *name, const std::string &value) : name(name) { setenv(name, value.c_str(), 1); }
    ~Env() { unsetenv(name); }
    const char *name;
};

inline nlohmann::json info(const AgentProcess &agent) {
    std::string text, error;
    if (deputy::channel::request_agent_info(agent.socket(), "", 2'000'000'000, &text, &error) !=
        DP_OK)
        return {};
    return nlohmann::json::parse(text);
}

// An agent serving remote clients on a free port of 127.0.0.1.
struct RemoteAgent {
    // capture_log: the agent's output goes to agent->log_path().
    // shell: a prefix for the agent's command (AgentProcess), e.g. "ulimit -n 160 && exec".
    explicit RemoteAgent(std::vector<std::string> extra = {}, bool secure = true,
                         bool capture_log = false, std::string shell = "")
        : port(free_port()), address("tcp://127.0.0.1:" + port) {
        std::vector<std::string> flags = {"--listen", address};
        if (secure) flags.insert(flags.end(), {"--key", key.path()});
        else flags.push_back("--insecure-tcp");
        flags.insert(flags.end(), extra.begin(), extra.end());
        agent = std::make_unique<AgentProcess>(flags, capture_log, std::vector<std::string>{},
                                               shell);
    }
    dp_config_t config() const {
        dp_config_t c = agent->config();
        c.agent = address.c_str();
        return c;
    }
    KeyFile key;
    std::string port, address;
    std::unique_ptr<AgentProcess> agent;
};

// The agent holds `fds` descriptors again within 5 s (what a session took is given back).
inline void expect_fds_back(const AgentProcess &agent, int fds) {
    EXPECT_TRUE(eventually([&] { return agent.count_fds() == fds; }, 5000))
        << agent.count_fds() << " fds, " << fds << " expected:\n"
        << agent.describe_fds();
}

// A peer that holds the key but not the protocol: its session, opened by
// hand, with the transport's limit as large as it likes.
inline std::unique_ptr<deputy::channel::Transport> authenticated(const RemoteAgent &r,
                                                          size_t max_message) {
    namespace ch = deputy::channel;
    ch::TransportOptions t;
    t.max_message = max_message;
    std::unique_ptr<ch::Transport> inner, secured;
    ch::secure::Key key;
    if (ch::tcp::connect("127.0.0.1:" + r.port, t, 2'000'000'000, &inner) != DP_OK ||
        ch::secure::load_key_file(r.key.path(), &key) != DP_OK ||
        ch::secure::establish(std::move(inner), key, ch::secure::Role::kInitiator,
                              2'000'000'000, &secured) != DP_OK)
        return nullptr;
    return secured;
}

// The next message's type, or nothing once the agent closed the session
// (its END, or the connection's end).
inline std::optional<deputy::channel::MsgType> next(deputy::channel::Transport &t,
                                             std::vector<uint8_t> *payload = nullptr) {
    std::vector<uint8_t> buffer(t.max_message());
    deputy::channel::MsgType type;
    size_t length = 0;
    if (t.recv(&type, buffer.data(), buffer.size(), &length, 5'000'000'000) != DP_OK ||
        type == deputy::channel::MsgType::kEnd)
        return std::nullopt;
    if (payload) payload->assign(buffer.begin(), buffer.begin() + long(length));
    return type;
}

}  // namespace deputy::testing::remote
