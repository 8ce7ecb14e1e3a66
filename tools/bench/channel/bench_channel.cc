#include "bench/channel/bench_channel.h"

#include "bench/channel/options.h"
#include "bench/channel/result.h"
#include "bench/channel/runner.h"
#include "channel/key_file.h"
#include "common/cli_common.h"
#include "common/cli_json.h"
#include "common/log.h"

namespace deputy::bench {
namespace {

using channel::ChannelOptions;

int run(const ChannelOptions &o, const cli::LogFlags &log_flags) {
    cli::apply_log_flags(log_flags);
    if (!o.keygen_file.empty()) {
        if (deputy::channel::secure::generate_key_file(o.keygen_file) != DP_OK) {
            DP_APP_ERROR("--keygen {}: no key written (the error above says why)",
                         o.keygen_file);
            return channel::kExitError;
        }
        DP_APP_INFO("wrote a new key to {} (mode 0600): copy it to the other end",
                    o.keygen_file);
        return channel::kExitOk;
    }
    channel::Plan plan;
    std::string error;
    if (!channel::resolve(o, &plan, &error)) throw CLI::ValidationError(error);
    return channel::run_command(o, plan);
}

}  // namespace

void register_channel(CLI::App &bench) {
    auto o = std::make_shared<ChannelOptions>();
    auto log_flags = std::make_shared<cli::LogFlags>();
    log_flags->log_format = "doca";  // the DOCA sample's lines, which its users read
    CLI::App *app = bench.add_subcommand(
        "channel",
        "host<->agent message channel: N messages of S bytes over shm, uds or tcp, "
        "plain or secure, stream or pingpong");
    app->add_option("-s,--msg-size", o->msg_size, "bytes per message (k/m suffixes)")
        ->capture_default_str();
    app->add_option("-n,--num-msgs", o->num_msgs, "messages this side sends")
        ->capture_default_str();
    app->add_option("--transport", o->transport, "shm, uds or tcp")->capture_default_str();
    app->add_flag("--secure", o->secure,
                  "authenticated encryption (X25519 + XChaCha20-Poly1305 secretstream)");
    app->add_option("--key", o->key_file, "pre-shared key file for --secure");
    app->add_option("--keygen", o->keygen_file, "write a new key file (mode 0600) and exit");
    app->add_option("--buffer-size", o->buffer_size,
                    "shm ring bytes per direction (power of two; default 1M) or socket buffer "
                    "(default: the kernel's)")
        ->capture_default_str();
    app->add_option("--mode", o->mode, "stream (both directions at once) or pingpong (latency)")
        ->capture_default_str();
    app->add_flag("--one-way", o->one_way,
                  "stream: only the connecting side sends (2 busy threads instead of 4)");
    app->add_option("--peer", o->peer,
                    "this process's role: 'listen ADDR' or 'connect ADDR' "
                    "(shm/uds: socket path or @name; tcp: host:port)")
        ->expected(2);
    app->add_flag("--loopback", o->loopback,
                  "listen here and fork the connecting peer: one command runs the experiment");
    app->add_flag("--agent", o->agent,
                  "the listening side runs inside a running `deputy agent` (its bench-channel "
                  "service); this process connects");
    app->add_option("--agent-socket", o->agent_socket,
                    "the agent for --agent (default: $DEPUTY_AGENT, else the agent's default)");
    app->add_flag("--insecure-tcp", o->insecure_tcp, "allow --transport tcp without --secure");
    app->add_option("--max-msg-size", o->max_msg_size, "the channel's message limit (at most 64M)")
        ->capture_default_str();
    app->add_option("--timeout", o->timeout_s, "seconds any wait may last (connect, message)")
        ->capture_default_str();
    app->add_option("--warmup", o->warmup, "pingpong: round trips left out of the latency")
        ->capture_default_str();
    app->add_option("--spin-us", o->spin_us,
                    "shm: microseconds a waiting side polls before "
                    "sleeping on the futex")
        ->capture_default_str();
    app->add_flag("--no-verify", o->no_verify, "do not check the received bytes");
    app->add_option("--cpus", o->cpus,
                    "pin threads: stream [send,recv], pingpong [main]; with "
                    "--loopback the first half is this process's, the rest the peer's");
    app->add_option("--compare", o->compare,
                    "with --loopback: run the same experiment over this transport right after "
                    "(the baseline, e.g. uds) and compare");
    app->add_option("--out", o->out_file, "write results as JSON to this file");
    cli::add_log_flags(*app, log_flags.get());
    cli::add_json_config(*app);
    app->callback([o, log_flags] {
        int rc = run(*o, *log_flags);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::bench
