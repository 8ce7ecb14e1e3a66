/* deputy — the whole public C API. Include this one header. */
#ifndef DEPUTY_DEPUTY_H
#define DEPUTY_DEPUTY_H

#include <deputy/export.h>
#include <deputy/coll.h>
#include <deputy/context.h>
#include <deputy/heap.h>
#include <deputy/log.h>
#include <deputy/mover.h>
#include <deputy/p2p.h>
#include <deputy/status.h>
#include <deputy/version.h>

#endif /* DEPUTY_DEPUTY_H */
