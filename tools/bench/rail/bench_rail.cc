#include "bench/rail/bench_rail.h"

#include <cstdio>
#include <memory>

#include "bench/rail/oob.h"
#include "bench/rail/options.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/reporter.h"
#include "bench/rail/session.h"
#include "common/cli_common.h"
#include "common/cli_json.h"
#include "common/log.h"

namespace deputy::bench {
namespace {

using rail::RailOptions;

struct Flags {
    RailOptions options;
    bool server = false;
    bool loopback = false;
    std::string page_size = "64k";
    std::string pages = "256";
    std::string buffers = "1";
    std::string repeat = "16";
    bool no_warmup = false;
    bool no_verify = false;
    cli::LogFlags log;
};

// Flags that describe the workload: the client's request carries them, so
// the server rejects them rather than silently ignoring them.
constexpr const char *kClientFlags[] = {
    "--page-size", "--pages", "--buffers", "--repeat", "--duration", "--batch",
    "--tx-depth", "--link-gbps", "--sample-interval", "--no-warmup", "--no-verify",
    "--seed",      "--rx-poll-us", "--end-signal"};

int run(CLI::App &app, Flags &f) {
    RailOptions &o = f.options;
    o.role = f.server ? rail::Role::kServer : f.loopback ? rail::Role::kLoopback : rail::Role::kClient;
    if (o.role == rail::Role::kServer) {
        for (const char *flag : kClientFlags)
            if (app.count(flag) > 0)
                throw rail::RailError(std::string(flag) +
                                      " is a client flag: the client's request sets the workload");
        o.topology_given = app.count("--rails") > 0 || app.count("--devices") > 0;
    } else {
        if (app.count("--bind") > 0) throw rail::RailError("--bind is a server flag");
        if (app.count("--accept-timeout") > 0) throw rail::RailError("--accept-timeout is a server flag");
    }
    o.page_size = cli::parse_size("--page-size", f.page_size);
    o.pages = cli::parse_size("--pages", f.pages);
    o.buffers = cli::parse_size("--buffers", f.buffers);
    o.repeat = cli::parse_size("--repeat", f.repeat);
    o.warmup = !f.no_warmup;
    o.verify = !f.no_verify;
    rail::validate(o);

    switch (o.role) {
    case rail::Role::kLoopback:
        return rail::run_loopback(o);
    case rail::Role::kClient: {
        rail::HostPort server = rail::parse_host_port(o.connect, o.port, "--connect");
        rail::SessionOutput out;
        out.live = rail::live_output_wanted(o.quiet, o.progress);
        out.tty = rail::stderr_is_tty();
        return rail::run_client(o, server, out);
    }
    case rail::Role::kServer: {
        rail::Listener listener(o.bind, o.port);
        DP_APP_INFO("server: listening on {} (provider {})",
                    rail::HostPort{o.bind, listener.port()}.text(), o.provider);
        rail::SessionOutput out;
        out.live = rail::live_output_wanted(o.quiet, o.progress);
        out.tty = rail::stderr_is_tty();
        return rail::run_server(o, listener, nullptr, out);
    }
    }
    return rail::kExitError;
}

}  // namespace

void register_rail(CLI::App &bench) {
    auto flags = std::make_shared<Flags>();
    RailOptions &o = flags->options;
    CLI::App *app = bench.add_subcommand(
        "rail",
        "multi-rail RDMA WRITE bandwidth on libfabric: a server writes seeded pages round-robin "
        "over --rails endpoints into a client's buffers, the client checks every byte");

    auto *role = app->add_option_group("role", "exactly one of --server, --connect, --loopback");
    role->add_flag("--server", flags->server, "wait for one client, then write into its buffers");
    role->add_option("--connect", o.connect, "run as client of the server at HOST[:PORT]")
        ->type_name("HOST[:PORT]");
    role->add_flag("--loopback", flags->loopback,
                   "server and client in this process, over 127.0.0.1 and the provider");
    role->require_option(1);

    app->add_option("--bind", o.bind, "server: listen address for the control connection")
        ->capture_default_str();
    app->add_option("--port", o.port, "control (TCP) port: the server's, and the client's default")
        ->capture_default_str();
    app->add_option("--provider", o.provider,
                    "libfabric provider (tcp means tcp;ofi_rxm; also shm, verbs, efa, ...)")
        ->capture_default_str();
    app->add_option("--domain", o.domain,
                    "domain (NIC) per rail: one name, one per rail (comma list), 'all' to spread "
                    "rails over the provider's domains, or 'pcie' to give each device the NICs "
                    "nearest it in the PCIe tree (hwloc); default: the interface that routes to "
                    "the peer");
    app->add_option("--rails", o.rails, "endpoints, one per NIC on real hardware")
        ->capture_default_str();
    app->add_option("--devices", o.devices,
                    "devices (one thread each); the rails are split evenly between them")
        ->capture_default_str();
    app->add_option("--pin", o.pin,
                    "CPU list for the device threads (e.g. 0,1 or 0-3), taken in order; loopback: "
                    "writers first, then receivers");
    app->add_option("--page-size", flags->page_size, "bytes per write (k/m/g suffixes)")
        ->check(cli::size_validator())
        ->capture_default_str();
    app->add_option("--pages", flags->pages, "pages per buffer")
        ->check(cli::size_validator())
        ->capture_default_str();
    app->add_option("--buffers", flags->buffers,
                    "buffers per device, each registered on its own; a pass writes every page "
                    "of every buffer (1-64)")
        ->capture_default_str();
    app->add_option("--repeat", flags->repeat, "passes over the pages")
        ->check(cli::size_validator())
        ->capture_default_str();
    app->add_option("--duration", o.duration_s,
                    "seconds: repeat whole passes for about this long instead of --repeat");
    app->add_option("--batch", o.batch, "writes posted per rail per progress call")
        ->capture_default_str();
    app->add_option("--tx-depth", o.tx_depth,
                    "writes in flight per rail (capped at the provider's tx size)")
        ->capture_default_str();
    app->add_option("--link-gbps", o.link_gbps, "link speed per rail in Gbit/s, for '% of link'")
        ->capture_default_str();
    app->add_option("--rx-poll-us", o.rx_poll_us,
                    "client: microseconds to pause after an empty completion poll; 0 busy-polls; "
                    "-1: 100 on shm (the writer copies), 0 elsewhere (tcp moves data in the "
                    "receiver's progress)")
        ->capture_default_str();
    app->add_option("--end-signal", o.end_signal,
                    "how a rail's end is signalled: auto, data (immediate data on the last write), "
                    "message (delivery-complete last write, then the server's RESULT)")
        ->capture_default_str();
    app->add_option("--sample-interval", o.sample_interval_s,
                    "seconds per sample of the live line and of samples_gbps in --out (0.001-60; "
                    "short ones show the first writes' ramp)")
        ->capture_default_str();
    app->add_flag("--no-warmup", flags->no_warmup,
                  "skip the untimed write through every rail (shows connection set-up in the numbers)");
    app->add_flag("--no-verify", flags->no_verify, "skip checking the written bytes");
    app->add_option("--seed", o.seed, "seed of the page pattern")->capture_default_str();
    app->add_flag("-q,--quiet", o.quiet, "no live line");
    app->add_flag("--progress", o.progress, "live line even when stderr is not a terminal");
    app->add_option("--out", o.out, "write results as JSON to FILE")->type_name("FILE");
    app->add_option("--timeout", o.timeout_s,
                    "seconds to wait for the peer or a completion before failing")
        ->capture_default_str();
    app->add_option("--accept-timeout", o.accept_timeout_s,
                    "server: seconds to wait for a client (0: forever)")
        ->capture_default_str();
    cli::add_log_flags(*app, &flags->log);
    cli::add_json_config(*app);

    app->callback([app, flags] {
        cli::apply_log_flags(flags->log);
        int code = rail::kExitError;
        try {
            code = run(*app, *flags);
        } catch (const rail::RailError &e) {
            std::fflush(stdout);
            std::fprintf(stderr, "deputy bench rail: error: %s\n", e.what());
            code = rail::kExitError;
        } catch (const CLI::ValidationError &e) {
            std::fprintf(stderr, "deputy bench rail: error: %s\n", e.what());
            code = rail::kExitError;
        }
        if (code != rail::kExitOk) throw CLI::RuntimeError(code);
    });
}

}  // namespace deputy::bench
