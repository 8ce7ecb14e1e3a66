// The one exception type of `deputy bench rail`. Its message is what the user
// sees after "error: ", so every throw names the flag, limit, provider or
// libfabric call at fault. Exceptions never leave the tool: the command's
// entry point turns them into a message and a non-zero exit code.
#pragma once

#include "fabric/fabric.h"

namespace deputy::rail {

// libfabric's failures (fabric/fabric.h) are the tool's failures.
using RailError = fabric::FabricError;

// Exit codes of the command (documented in docs/rail.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // setup, fabric, socket or timeout failure
inline constexpr int kExitMismatch = 2;  // the run finished but bytes differed

}  // namespace deputy::rail
