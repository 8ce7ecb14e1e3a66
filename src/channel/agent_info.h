// Asking an agent how it is doing: connect with purpose "info", get its
// JSON (`deputy info --format json` prints it as is; `deputy bench coll`
// reads the inter-node algorithms of its team from it).
#pragma once

#include <deputy/status.h>

#include <cstdint>
#include <string>

namespace deputy::channel {

// DP_OK with the agent's JSON in *json; DP_ERR_NO_AGENT when nobody
// answers at `address`; the agent's refusal status (DP_ERR_DENIED: wrong
// token) with its reason in *error; DP_ERR_IO when it does not answer.
dp_status_t request_agent_info(const std::string &address, const std::string &token,
                               int64_t timeout_ns, std::string *json, std::string *error);

}  // namespace deputy::channel
