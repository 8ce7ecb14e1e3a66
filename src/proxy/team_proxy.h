// A team proxy: the member of a team that stands in, on the agent's host,
// for a client reached over the network (DEPUTY_AGENT=tcp://...).
//
// A remote client's memory is out of the agent's reach, and a team's
// engines, plans and boards work on members' mapped memory. So each remote
// member's team gets a proxy: a local client of the agent (its own context,
// mapped pool, rank execution off) that joins the team under the remote
// member's key, rank and job secret, as any local member does. The remote
// member posts a collective as a staged one (client/staged_collective.h)
// and sends the post with its bounce block's source bytes (PROXY_POST,
// channel/control.h); the proxy lays out a block of the same shape in its
// pool, posts it, and sends the block's destination bytes back when the
// record completes (PROXY_DONE). Everything else — local and remote members
// mixed, several agents across nodes, every collective — is the team's
// usual path: the proxy is one more local member.
//
// The remote member's connection (behind the gate's relay, so already
// authenticated) arrives here after its ATTACH asked for purpose
// kTeamProxy (Agent::set_proxy_handler). Everything on it is the client's
// to choose and is checked: the TEAM_JOIN by the agent as any join; each
// post's addresses must lie in the block it names, and the bytes the
// collective reads and writes must lie in that block too (coll::member_bytes
// or the counts block), or the post is answered DP_COMP_INVALID_FIELD
// without being run; a message that does not decode ends the connection.
// The proxy runs on threads of its own (one reading posts, one waiting for
// completions), never on the agent's service thread.
#pragma once

#include <atomic>
#include <string>

#include "common/fd.h"

namespace deputy::proxy {

struct ProxyOptions {
    std::string agent_address;  // the agent's Unix socket: the proxy attaches there
    std::string token;          // the agent's token, if it has one
    std::string peer;           // "10.0.0.2:51234", for log lines
};

// Serves one remote member's team on `socket` until the member leaves or
// its connection ends, or `stopping` turns true (checked at least every
// 200 ms). Returns when everything of it is gone: its team left, its
// context detached.
void serve_team_proxy(UniqueFd socket, const ProxyOptions &options,
                      const std::atomic<bool> &stopping);

}  // namespace deputy::proxy
