// The rail tool's names for the project's libfabric objects (fabric/fabric.h):
// a rail is one endpoint.
#pragma once

#include "fabric/fabric.h"

namespace deputy::rail {

using fabric::Catalog;
using fabric::fi_error_text;
using fabric::kFabricApi;
using fabric::libfabric_version;
using fabric::mr_mode_text;
using fabric::Registration;
using Rail = fabric::Endpoint;

}  // namespace deputy::rail
