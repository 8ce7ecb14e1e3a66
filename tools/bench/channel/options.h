// Options of `deputy bench channel` and their resolution into what a run
// needs (an endpoint configuration and a plan). The flag letters follow
// DOCA's secure-channel sample (-s, -n, -l, --sdk-log-level, --json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "channel/endpoint.h"

namespace deputy::bench::channel {

struct ChannelOptions {
    std::string msg_size = "64";      // -s: bytes per message, k/m suffixes
    uint64_t num_msgs = 100000;       // -n: messages this side sends
    std::string transport = "shm";    // --transport shm|uds|tcp
    bool secure = false;              // --secure
    std::string key_file;             // --key FILE
    std::string keygen_file;          // --keygen FILE: write a new key and exit
    std::string buffer_size = "0";    // --buffer-size: ring bytes or socket buffer (0: default)
    std::string mode = "stream";      // --mode stream|pingpong
    bool one_way = false;             // --one-way: stream from the connecting side only
    std::vector<std::string> peer;    // --peer listen|connect ADDR
    bool loopback = false;            // --loopback: spawn the peer, one command
    bool insecure_tcp = false;        // --insecure-tcp: allow plain TCP
    std::string max_msg_size = "1M";  // --max-msg-size: the channel's limit
    double timeout_s = 10;            // --timeout: bound of every wait
    uint64_t warmup = 100;            // --warmup: pingpong round trips left out of the latency
    double spin_us = 20;              // --spin-us: shm poll time before sleeping
    bool no_verify = false;           // --no-verify: skip the payload check
    std::string cpus;                 // --cpus: pin threads (see bench_channel.cc)
    std::string compare;              // --compare shm|uds|tcp: loopback baseline in the same run
    std::string out_file;             // --out: results JSON
    bool agent = false;               // --agent: the listening side runs inside `deputy agent`
    std::string agent_socket;         // --agent-socket: that agent (default: as dp_init finds it)
};

enum class Mode { kStream, kPingpong };
enum class Role { kListen, kConnect };

const char *mode_name(Mode mode);
const char *role_name(Role role);

// Everything a run needs, validated.
struct Plan {
    Mode mode = Mode::kStream;
    bool one_way = false;
    uint64_t msg_size = 64;
    uint64_t num_msgs = 0;
    uint64_t warmup = 0;
    bool verify = true;
    int64_t timeout_ns = 10'000'000'000;
    bool loopback = false;
    Role role = Role::kListen;  // with loopback: the role of this (parent) process
    deputy::channel::EndpointConfig endpoint;
    std::vector<int> cpus;       // this process's CPUs (loopback: split, see bench_channel.cc)
    std::vector<int> peer_cpus;  // loopback: the spawned peer's
    bool compare = false;        // loopback: run again over compare_kind, same everything else
    deputy::channel::TransportKind compare_kind = deputy::channel::TransportKind::kUds;
    bool via_agent = false;      // --agent: the agent listens, this process connects
    std::string agent_address;   // the agent's control socket
};

// Checks the options and fills a Plan. On error returns false with a message
// naming the flag (and for a message above the limit: the size, the limit and
// DP_ERR_TOO_LARGE). Loads the key file. With --loopback the address is left
// for the runner, which makes a private directory for the socket.
bool resolve(const ChannelOptions &options, Plan *plan, std::string *error);

// Busy threads a run keeps on this machine (both sides when loopback).
int busy_threads(const Plan &plan);

}  // namespace deputy::bench::channel
