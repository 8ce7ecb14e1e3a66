// epoll_add for the files of the agent that register fds (agent.cc,
// client_admission.cc): one definition, internal to src/agent.
#pragma once

#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "common/log.h"

namespace deputy::agent {

inline dp_status_t epoll_add(int ep, int fd, uint64_t data, uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        DP_FAIL(DP_ERR_IO, "agent: epoll_ctl(ADD, fd {}): {}", fd, std::strerror(errno));
    return DP_OK;
}

}  // namespace deputy::agent
