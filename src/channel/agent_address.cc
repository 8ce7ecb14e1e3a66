#include "channel/agent_address.h"

#include <unistd.h>

#include <cstdlib>

namespace deputy::channel {

std::string default_agent_address() {
    const char *runtime = std::getenv("XDG_RUNTIME_DIR");
    if (runtime && *runtime) return std::string(runtime) + "/deputy/agent.sock";
    return "/tmp/deputy-" + std::to_string(getuid()) + "/agent.sock";
}

std::string resolve_agent_address(const std::string &explicit_address) {
    if (!explicit_address.empty()) return explicit_address;
    const char *env = std::getenv("DEPUTY_AGENT");
    if (env && *env) return env;
    return default_agent_address();
}

}  // namespace deputy::channel
