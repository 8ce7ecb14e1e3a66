/* deputy — library log level. Levels are numeric and DOCA-shaped so the same
 * numbers work on the command line, in JSON config and in DEPUTY_LOG_LEVEL. */
#ifndef DEPUTY_LOG_H
#define DEPUTY_LOG_H

#include <deputy/export.h>
#include <deputy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dp_log_level {
    DP_LOG_DISABLE = 10,
    DP_LOG_CRITICAL = 20,
    DP_LOG_ERROR = 30,
    DP_LOG_WARNING = 40,
    DP_LOG_INFO = 50,
    DP_LOG_DEBUG = 60,
    DP_LOG_TRACE = 70,
} dp_log_level_t;

/* Sets the level of the library ("sdk") logger. Returns DP_ERR_INVALID for a
 * value that is not one of the seven levels. The initial level comes from
 * DEPUTY_LOG_LEVEL (number or name) or is DP_LOG_WARNING. */
DP_API dp_status_t dp_log_set_level(int level);
DP_API int dp_log_get_level(void);

/* Library version, "MAJOR.MINOR.PATCH". */
DP_API const char *dp_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_LOG_H */
