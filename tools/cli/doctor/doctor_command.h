// `deputy doctor`: what this machine offers each of deputy's paths, and
// the command or boot option that changes what is missing.
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::tools {

void register_doctor(CLI::App &app);

}  // namespace deputy::tools
