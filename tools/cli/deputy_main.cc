// `deputy`: one command for the agent, the launcher, the benchmarks and info.
#include <CLI/CLI.hpp>
#include <deputy/log.h>
#include <deputy/version.h>

#include <cstdio>

#include "cli/agent/agent_command.h"
#include "bench/channel/bench_channel.h"
#include "bench/mover/bench_mover.h"
#include "bench/rail/bench_rail.h"
#include "bench/coll/launcher.h"
#include "common/log.h"
#include "cli/doctor/doctor_command.h"
#include "cli/launch/launch_command.h"
#include "cli/launch/mpirun_command.h"

int main(int argc, char **argv) {
    CLI::App app{"deputy: communication-offload runtime (agent, data mover, benchmarks)", "deputy"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("deputy ") + DEPUTY_VERSION_STRING);

    deputy::tools::register_agent(app);
    deputy::tools::register_info(app);
    deputy::tools::register_doctor(app);
    deputy::tools::register_launch(app);
    deputy::tools::register_mpirun(app);
    CLI::App *bench = app.add_subcommand("bench", "benchmarks: mover, channel, rail, coll");
    bench->require_subcommand(1);
    deputy::bench::register_mover(*bench);
    deputy::bench::register_rail(*bench);
    deputy::bench::register_channel(*bench);
    deputy::bench::register_coll(*bench);

    // `deputy mpirun ... -- <mpirun's arguments>`: CLI11 sees what precedes the `--`.
    argc = deputy::tools::split_mpirun_arguments(argc, argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::Error &e) {
        return app.exit(e);
    }
    return 0;
}
