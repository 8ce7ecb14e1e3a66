// The two roles of a run and the loopback that runs both in one process.
// Each returns the command's exit code (rail_error.h) or throws RailError.
#pragma once

#include <atomic>
#include <vector>

#include "bench/rail/oob.h"
#include "bench/rail/options.h"

namespace deputy::rail {

struct SessionOutput {
    bool live = false;     // print the live line on stderr
    bool tty = false;      // ... overwriting one line
    bool summary = true;   // print the table on stdout
    bool write_out = true; // write --out
    int cpu_offset = 0;    // this role's threads take --pin CPUs from here
};

// Serves one client on `listener`, then returns.
int run_server(const RailOptions &options, Listener &listener, const std::atomic<bool> *cancel,
               const SessionOutput &output);
int run_client(const RailOptions &options, const HostPort &server, const SessionOutput &output);
int run_loopback(const RailOptions &options);

// Pins the calling thread to options.cpus[index % size] when --pin was given.
void pin_thread(const RailOptions &options, int index, const char *who);

}  // namespace deputy::rail
