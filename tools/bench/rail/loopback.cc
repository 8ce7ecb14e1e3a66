// --loopback: server and client in one process, over the OOB socket on
// 127.0.0.1 and the chosen provider, exactly as two hosts would run them.
// On this 2-core machine both sides share the cores: a device's writer
// thread and its client thread are two busy threads.
#include <thread>

#include "bench/rail/fabric.h"
#include "bench/rail/rail_error.h"
#include "bench/rail/reporter.h"
#include "bench/rail/session.h"
#include "common/affinity.h"
#include "common/log.h"

namespace deputy::rail {

int run_loopback(const RailOptions &options) {
    // A missing provider fails here, before any thread or socket exists.
    { Catalog check = Catalog::query(options.provider); }

    int busy = 2 * options.devices;
    if (busy > affinity::cpu_count())
        DP_APP_WARN("loopback runs {} busy threads (a writer and a receiver per device) on {} "
                    "CPUs: the numbers are CPU-bound", busy, affinity::cpu_count());

    Listener listener("127.0.0.1", 0);
    RailOptions server = options;
    server.role = Role::kServer;
    server.topology_given = true;
    RailOptions client = options;
    client.role = Role::kClient;

    SessionOutput server_out;
    server_out.live = live_output_wanted(options.quiet, options.progress);
    server_out.tty = stderr_is_tty();
    server_out.summary = false;
    server_out.write_out = false;
    server_out.cpu_offset = 0;
    SessionOutput client_out;
    client_out.live = false;  // the server prints the live line
    client_out.cpu_offset = options.devices;

    std::atomic<bool> cancel{false};
    std::string server_error;
    int server_code = kExitError;
    std::thread server_thread([&] {
        try {
            server_code = run_server(server, listener, &cancel, server_out);
        } catch (const std::exception &e) {
            server_error = e.what();
        }
    });
    int client_code = kExitError;
    std::string client_error;
    try {
        client_code = run_client(client, HostPort{"127.0.0.1", listener.port()}, client_out);
    } catch (const std::exception &e) {
        client_error = e.what();
    }
    cancel = true;
    server_thread.join();
    // The client's message already quotes the server's when the server failed first.
    if (!client_error.empty()) throw RailError(client_error);
    if (!server_error.empty()) throw RailError("server: " + server_error);
    return std::max(client_code, server_code);
}

}  // namespace deputy::rail
