// The opaque handles of the C API, defined once for every *_api.cc.
#pragma once

#include <memory>

#include "client/context.h"

struct dp_context {
    std::unique_ptr<deputy::client::Context> impl;
};
