// `deputy agent` (run the agent, in the foreground or as a daemon) and
// `deputy info` (ask a running agent how it is doing).
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::tools {

void register_agent(CLI::App &app);
void register_info(CLI::App &app);

}  // namespace deputy::tools
