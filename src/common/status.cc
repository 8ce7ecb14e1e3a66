// dp_strerror and dp_status_name: the one name table of dp_status_t.
#include <deputy/status.h>

#include <array>
#include <string_view>

namespace {

struct StatusText {
    dp_status_t status;
    const char *name;
    const char *text;
};

// Kept in enum order; the static_assert below catches an enum grown without
// its row.
constexpr std::array<StatusText, 15> kStatusTable{{
    {DP_OK, "DP_OK", "DP_OK: success"},
    {DP_INPROGRESS, "DP_INPROGRESS", "DP_INPROGRESS: operation still in progress"},
    {DP_ERR_INVALID, "DP_ERR_INVALID", "DP_ERR_INVALID: invalid argument or field"},
    {DP_ERR_TOO_LARGE, "DP_ERR_TOO_LARGE", "DP_ERR_TOO_LARGE: size or count above the configured limit"},
    {DP_ERR_UNSUPPORTED, "DP_ERR_UNSUPPORTED", "DP_ERR_UNSUPPORTED: not supported by this build or machine"},
    {DP_ERR_MISMATCH, "DP_ERR_MISMATCH", "DP_ERR_MISMATCH: ranks passed different arguments"},
    {DP_ERR_NO_AGENT, "DP_ERR_NO_AGENT", "DP_ERR_NO_AGENT: no agent answers at the configured address"},
    {DP_ERR_AGENT_LOST, "DP_ERR_AGENT_LOST", "DP_ERR_AGENT_LOST: the agent died or the connection broke"},
    {DP_ERR_TIMEOUT, "DP_ERR_TIMEOUT", "DP_ERR_TIMEOUT: timed out"},
    {DP_ERR_DENIED, "DP_ERR_DENIED", "DP_ERR_DENIED: permission or address-range check failed"},
    {DP_ERR_NOMEM, "DP_ERR_NOMEM", "DP_ERR_NOMEM: out of memory"},
    {DP_ERR_RETRY, "DP_ERR_RETRY", "DP_ERR_RETRY: queue full, submit again"},
    {DP_ERR_INTERNAL, "DP_ERR_INTERNAL", "DP_ERR_INTERNAL: internal error"},
    {DP_ERR_IO, "DP_ERR_IO", "DP_ERR_IO: file or socket operation failed"},
    {DP_ERR_TRUNCATED, "DP_ERR_TRUNCATED", "DP_ERR_TRUNCATED: message longer than the receive buffer"},
}};
static_assert(kStatusTable.back().status == DP_ERR_TRUNCATED, "status table out of date");

const StatusText *find(dp_status_t status) {
    for (const auto &row : kStatusTable) {
        if (row.status == status) return &row;
    }
    return nullptr;
}

}  // namespace

extern "C" const char *dp_strerror(dp_status_t status) {
    const StatusText *row = find(status);
    return row ? row->text : "DP_UNKNOWN: unknown status code";
}

extern "C" const char *dp_status_name(dp_status_t status) {
    const StatusText *row = find(status);
    return row ? row->name : "DP_UNKNOWN";
}
