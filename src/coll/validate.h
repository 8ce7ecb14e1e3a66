// Checks of a schedule on its own, without running it: for tests, for debug
// builds of the runtime, and for anyone writing a new algorithm.
//
// check_schedule: every region inside its buffer, the source never written,
// peers valid, reduce and copy operands well formed, dependencies pointing backwards, and messages
// with the same peer and tag ordered (so their matching is well defined).
// Linear in the number of steps and dependencies.
//
// check_races: any two steps that touch a common byte, one of them writing,
// are ordered by the dependencies (one reaches the other). That is what
// makes every execution order give the same result. Quadratic (a reachability
// bitset per step): meant for tests and schedules up to a few thousand steps.
//
// What neither can see — that both sides of a message agree, that the team's
// schedules together are deadlock free and compute the right thing — the
// in-memory executor of tests/coll checks by running them.
#pragma once

#include <deputy/status.h>

#include <string>

#include "coll/schedule.h"

namespace deputy::coll {

// DP_OK, or DP_ERR_INVALID with the first problem described in *error (if
// non-null).
dp_status_t check_schedule(const Schedule &schedule, std::string *error);
dp_status_t check_races(const Schedule &schedule, std::string *error);

}  // namespace deputy::coll
