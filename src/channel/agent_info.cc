#include "channel/agent_info.h"

#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/fd.h"

namespace deputy::channel {

dp_status_t request_agent_info(const std::string &address, const std::string &token,
                               int64_t timeout_ns, std::string *json, std::string *error) {
    namespace control = channel::control;
    UniqueFd fd;
    if (uds::connect_fd(address, timeout_ns, &fd) != DP_OK) {
        *error = "not reachable at " + address;
        return DP_ERR_NO_AGENT;
    }
    control::Attach m;
    m.purpose = control::Purpose::kInfo;
    m.token = token;
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    MsgType type;
    std::vector<uint8_t> answer;
    if (control::send_message(fd.get(), MsgType::kAttach, payload, nullptr, 0, timeout_ns,
                              "agent info") != DP_OK ||
        control::recv_message(fd.get(), control::kMaxControlMessage, &type, &answer, nullptr, 0,
                              nullptr, timeout_ns, "agent info") != DP_OK) {
        *error = address + " accepted the connection but did not answer";
        return DP_ERR_IO;
    }
    if (type == MsgType::kReply) {
        control::Reply reply;
        std::string why;
        control::decode(answer.data(), answer.size(), &reply, &why);
        *error = reply.reason;
        return reply.status == DP_OK ? DP_ERR_INTERNAL : reply.status;
    }
    json->assign(answer.begin(), answer.end());
    return DP_OK;
}

}  // namespace deputy::channel
