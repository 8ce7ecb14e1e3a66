// `deputy launch -n N [options] -- prog args...`: run N ranks of a program
// on this node with an agent to talk to (docs/launch.md).
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::tools {

void register_launch(CLI::App &app);

}  // namespace deputy::tools
