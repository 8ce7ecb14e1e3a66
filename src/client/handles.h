// The opaque handles of the C API, defined once for every *_api.cc.
#pragma once

#include <memory>

#include "client/context.h"
#include "client/team.h"

struct dp_context {
    std::unique_ptr<deputy::client::Context> impl;
};

struct dp_team {
    deputy::client::Team *impl;
};

// A dp_request_t is a Request itself: no allocation per operation.
struct dp_request {
    deputy::client::Request impl;
};
