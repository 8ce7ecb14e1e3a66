// `--json FILE`: every flag of a command can come from a JSON object whose
// keys are the long flag names ("msg-size" or "msg_size"; a one-letter flag by
// its letter). Flags given on the command line win over the file. An unknown
// key, or a value of the wrong JSON type, is an error naming the key.
//
// Built on CLI11's config-file mechanism, so precedence and flag handling are
// CLI11's own; this file only reads JSON and checks keys and types.
#pragma once

#include <CLI/CLI.hpp>

namespace deputy::cli {

// Installs `--json FILE` on `app` (call after all of app's options exist).
void add_json_config(CLI::App &app);

}  // namespace deputy::cli
