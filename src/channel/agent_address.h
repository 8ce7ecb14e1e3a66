// Where an agent listens: one rule shared by the agent and its clients.
//   1. an explicit address (flag or dp_config_t.agent), else
//   2. $DEPUTY_AGENT, else
//   3. $XDG_RUNTIME_DIR/deputy/agent.sock, else /tmp/deputy-$UID/agent.sock.
// The directory is private (0700, owned by the user): the first line of
// defence before SO_PEERCRED.
#pragma once

#include <string>

namespace deputy::channel {

std::string default_agent_address();
// `explicit_address` if non-empty, else $DEPUTY_AGENT, else the default.
std::string resolve_agent_address(const std::string &explicit_address);

}  // namespace deputy::channel
