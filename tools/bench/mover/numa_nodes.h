// `deputy bench mover -S`: the NUMA node each buffer lives on, as
// dsa_perf_micros's -S SRC,DST[,THIRD] places them (its figure of local and
// remote sockets). Memory is bound with hwloc before a page is touched, so
// every page comes from the node asked for or the run stops.
#pragma once

#include <cstddef>
#include <string>

namespace deputy::bench {

struct BufferNodes {
    int src = -1;    // sources (and the second source without a third node)
    int dst = -1;    // destinations (a delta record for create_delta)
    int third = -1;  // dualcast's second destination, or the second source
    bool any() const { return src >= 0 || dst >= 0 || third >= 0; }
};

// "0,1" or "1" (every buffer) or "0,1,1". False with *error naming the flag,
// the node and the nodes this machine has when one does not exist.
bool parse_buffer_nodes(const std::string &text, BufferNodes *out, std::string *error);

// Binds the pages of [p, p + bytes) to NUMA node `node` (its OS number),
// strictly, before they are touched. False with *error.
bool bind_to_node(void *p, size_t bytes, int node, std::string *error);

}  // namespace deputy::bench
