/* deputy — point-to-point messages between the members of a team.
 *
 * A send names its destination by rank on the team and a tag; a receive
 * names its source (or DP_ANY_SOURCE) and a tag (or DP_ANY_TAG). Both are
 * posted as one 64-byte record into the caller's ring and return at once;
 * the agent matches sends with receives and moves the bytes from the
 * sender's memory into the receiver's itself (mapped and shared-heap memory
 * in place on its engines; registered ordinary memory through the
 * processes), then sets each side's completion flag. The caller never
 * calls anything for the bytes to move. A receiver waiting in dp_wait or
 * dp_test for a message the agent has not matched yet may match it and
 * copy it itself, by the same rules (docs/p2p.md, "When no core is
 * spare"): where ranks and agent share the cores, a waiting rank has the
 * CPU the agent would need.
 *
 * Matching follows MPI's rules: a receive takes the first message, in the
 * order the agent received the sends, whose source and tag it accepts;
 * messages from one member to another on one team are never overtaken by
 * later ones that the same receive would also accept.
 *
 * A send completes when its bytes are out of the buffer: copied into the
 * receiver's memory, or, for a message of at most the agent's eager size
 * (p2p_eager_bytes, 4 KiB by default) that arrives before its receive,
 * copied into memory the agent holds for it. The agent holds such messages
 * up to its bounds (p2p_held_bytes, p2p_held_messages); beyond them a send
 * waits for its receive (back-pressure: nothing is ever dropped). So a
 * program whose every member sends before it receives works while its
 * unreceived messages fit the bounds, as under MPI's eager protocol.
 *
 * Completion as for collectives: dp_test, dp_wait, dp_request_free
 * (include/deputy/coll.h). A completed receive's source, tag and length
 * are read with dp_request_status.
 *
 * Errors of an operation (reported by dp_test/dp_wait):
 *   DP_ERR_TRUNCATED   the receive's buffer is shorter than the message: nothing is written
 *                      to it, its status gives the message's source, tag and full length (the
 *                      send itself completes as usual)
 *   DP_ERR_AGENT_LOST  the peer left the team or died (a receive naming it, a send to it;
 *                      messages it sent that the agent holds are still received), or the
 *                      agent died
 *   DP_ERR_DENIED      a buffer is outside what its member owns or registered (on a team
 *                      whose receivers copy messages themselves, one of at most 64 KiB goes
 *                      through the member's pool from any memory of its own)
 *   DP_ERR_RETRY       the member has more messages pending at the agent than its bound
 *                      (DP_P2P_MAX_OUTSTANDING; only a client that ignores the library's own
 *                      count gets it)
 *   DP_ERR_UNSUPPORTED the peer is on another node (not built yet) */
#ifndef DEPUTY_P2P_H
#define DEPUTY_P2P_H

#include <deputy/coll.h>
#include <deputy/export.h>
#include <deputy/status.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DP_ANY_SOURCE (-1)
#define DP_ANY_TAG (-1)
/* Tags are 0..DP_TAG_MAX (MPI guarantees at least 32767). */
#define DP_TAG_MAX 0x7fffffff
/* Point-to-point requests outstanding per member and team (sends and receives together),
 * beside the collectives' DP_TEAM_MAX_OUTSTANDING. */
#define DP_P2P_MAX_OUTSTANDING 1024

/* What a completed receive (or a probe) found. */
typedef struct dp_msg_status {
    int source;   /* the sender's rank on the team */
    int tag;
    size_t bytes; /* the message's length (on DP_ERR_TRUNCATED: longer than the buffer) */
} dp_msg_status_t;

/* Posts a send of `bytes` bytes to member `dest` (0..size-1, itself included) with tag
 * 0..DP_TAG_MAX. The buffer must stay untouched until the request completes. */
DP_API dp_status_t dp_isend(const void *buf, size_t bytes, int dest, int tag, dp_team_t *team,
                            dp_request_t **req);
/* A synchronous send (MPI_Issend): as dp_isend, but it completes only once a receive took
 * the message, never early from a copy the agent holds. */
DP_API dp_status_t dp_issend(const void *buf, size_t bytes, int dest, int tag, dp_team_t *team,
                             dp_request_t **req);
/* Posts a receive of at most `bytes` bytes from member `source` (or DP_ANY_SOURCE) with tag
 * `tag` (or DP_ANY_TAG). */
DP_API dp_status_t dp_irecv(void *buf, size_t bytes, int source, int tag, dp_team_t *team,
                            dp_request_t **req);
/* Blocking forms: post + wait + free. status may be NULL. */
DP_API dp_status_t dp_send(const void *buf, size_t bytes, int dest, int tag, dp_team_t *team);
DP_API dp_status_t dp_ssend(const void *buf, size_t bytes, int dest, int tag, dp_team_t *team);
DP_API dp_status_t dp_recv(void *buf, size_t bytes, int source, int tag, dp_team_t *team,
                           dp_msg_status_t *status);
/* A completed receive's source, tag and length (before dp_request_free). DP_ERR_INVALID for a
 * request that is not a completed receive. */
DP_API dp_status_t dp_request_status(dp_request_t *req, dp_msg_status_t *status);
/* Whether a message that a receive of (source, tag) would take has arrived at the agent:
 * *flag = 1 and *status filled (status may be NULL), or *flag = 0. A receive posted next with
 * the status's source and tag takes that message. One round trip to the agent. */
DP_API dp_status_t dp_iprobe(int source, int tag, dp_team_t *team, int *flag,
                             dp_msg_status_t *status);
/* Waits (the context's wait mode between looks) until such a message has arrived. */
DP_API dp_status_t dp_probe(int source, int tag, dp_team_t *team, dp_msg_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_P2P_H */
