/* deputy — symbol visibility. The library is built with hidden visibility;
 * only declarations marked DP_API are exported (and versioned by
 * cmake/libdeputy.map). */
#ifndef DEPUTY_EXPORT_H
#define DEPUTY_EXPORT_H

#if defined(DEPUTY_BUILDING_LIBRARY)
#define DP_API __attribute__((visibility("default")))
#else
#define DP_API
#endif

#endif /* DEPUTY_EXPORT_H */
