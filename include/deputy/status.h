/* deputy — status codes shared by every layer of the public C API. */
#ifndef DEPUTY_STATUS_H
#define DEPUTY_STATUS_H

#include <deputy/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One status enum for the whole API: DP_OK is 0, "not yet" is positive,
 * every error is negative. Values are ABI: never renumber, only append. */
typedef enum dp_status {
    DP_OK = 0,
    DP_INPROGRESS = 1,
    DP_ERR_INVALID = -1,     /* an argument or field is out of its domain */
    DP_ERR_TOO_LARGE = -2,   /* a size or count exceeds a configured limit */
    DP_ERR_UNSUPPORTED = -3, /* valid request this build or machine cannot do */
    DP_ERR_MISMATCH = -4,    /* ranks disagree on count, dtype, op or root */
    DP_ERR_NO_AGENT = -5,    /* no agent answers at the configured address */
    DP_ERR_AGENT_LOST = -6,  /* the agent died or the connection broke */
    DP_ERR_TIMEOUT = -7,     /* a bounded wait expired */
    DP_ERR_DENIED = -8,      /* authentication or address-range check failed */
    DP_ERR_NOMEM = -9,       /* memory or segment allocation failed */
    DP_ERR_RETRY = -10,      /* queue full: submit again later (like ENQCMD) */
    DP_ERR_INTERNAL = -11,   /* a bug or an unexpected system error */
    DP_ERR_IO = -12,         /* a file or socket operation failed */
    DP_ERR_TRUNCATED = -13,  /* a message longer than the buffer posted to receive it */
} dp_status_t;

/* Static, never-NULL description of a status ("DP_ERR_RETRY: queue full..."). */
DP_API const char *dp_strerror(dp_status_t status);

/* Short enum name ("DP_ERR_RETRY"); "DP_UNKNOWN" for values outside the enum. */
DP_API const char *dp_status_name(dp_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_STATUS_H */
