#include "fabric/rma_link.h"

#include <sched.h>

#include <fmt/format.h>

#include "common/timing.h"

namespace deputy::fabric {

RmaLink::RmaLink(const std::string &provider, const std::vector<uint8_t> &peer_address,
                 const std::string &peer_name, const std::string &peer_host) {
    const Catalog catalog = Catalog::query(provider, kRmaReadsAndWrites);
    const std::optional<sockaddr_storage> route = local_address_towards(peer_host);
    endpoint_ = std::make_unique<Endpoint>(catalog.pick("", route ? &*route : nullptr, 1).front(),
                                           "team proxy of " + peer_name, -1);
    peer_ = endpoint_->insert_peer(peer_address, peer_name);
}

RmaLink::~RmaLink() = default;  // closing the endpoint cancels what is still queued

std::string RmaLink::read(const std::vector<Piece> &pieces, uint64_t deadline_ns) {
    return transfer(true, pieces, deadline_ns);
}

std::string RmaLink::write(const std::vector<Piece> &pieces, uint64_t deadline_ns) {
    return transfer(false, pieces, deadline_ns);
}

std::string RmaLink::transfer(bool read, const std::vector<Piece> &pieces, uint64_t deadline_ns) {
    std::lock_guard lock(mutex_);
    if (broken_) return "the RMA link to the member broke earlier";
    // Providers that want local memory registered (FI_MR_LOCAL, verbs) get
    // each piece registered for the transfer's length.
    std::vector<std::unique_ptr<Registration>> locals;
    std::vector<void *> descs(pieces.size(), nullptr);
    if (endpoint_->mr_mode() & FI_MR_LOCAL) {
        try {
            for (size_t i = 0; i < pieces.size(); ++i) {
                if (pieces[i].bytes == 0) continue;
                locals.push_back(std::make_unique<Registration>(
                    *endpoint_, pieces[i].local, pieces[i].bytes, read ? FI_READ : FI_WRITE,
                    next_local_key_++));
                descs[i] = locals.back()->desc();
            }
        } catch (const FabricError &e) {
            return e.what();
        }
    }
    struct Op {
        char *local;
        uint64_t bytes, remote, key;
        void *desc;
    };
    std::vector<Op> ops;
    for (size_t i = 0; i < pieces.size(); ++i)
        for (uint64_t at = 0; at < pieces[i].bytes; at += kRmaOpBytes)
            ops.push_back({static_cast<char *>(pieces[i].local) + at,
                           std::min(kRmaOpBytes, pieces[i].bytes - at), pieces[i].remote + at,
                           pieces[i].key, descs[i]});
    // One context per operation, alive until its completion is read.
    std::vector<fi_context2> contexts(ops.size());
    const size_t window = std::clamp<size_t>(endpoint_->tx_size(), 1, 64);
    size_t next = 0, outstanding = 0;
    std::string error;
    while ((error.empty() && next < ops.size()) || outstanding > 0) {
        while (error.empty() && next < ops.size() && outstanding < window) {
            const Op &op = ops[next];
            iovec iov{op.local, op.bytes};
            fi_rma_iov rma{op.remote, op.bytes, op.key};
            fi_msg_rma msg{};
            msg.msg_iov = &iov;
            msg.desc = const_cast<void **>(&op.desc);
            msg.iov_count = 1;
            msg.addr = peer_;
            msg.rma_iov = &rma;
            msg.rma_iov_count = 1;
            msg.context = &contexts[next];
            // A write completes once its bytes are in the peer's memory.
            const ssize_t ret = read ? fi_readmsg(endpoint_->ep(), &msg, FI_COMPLETION)
                                     : fi_writemsg(endpoint_->ep(), &msg,
                                                   FI_COMPLETION | FI_DELIVERY_COMPLETE);
            if (ret == -FI_EAGAIN) break;  // the queue is full: progress first
            if (ret != 0) {
                error = fmt::format("{} of {} bytes: {}", read ? "fi_readmsg" : "fi_writemsg",
                                    op.bytes, fi_error_text(int(ret)));
                break;
            }
            ++next;
            ++outstanding;
        }
        fi_cq_data_entry done[16];
        const ssize_t n = fi_cq_read(endpoint_->cq(), done, 16);
        if (n > 0) {
            outstanding -= size_t(n);
            continue;
        }
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (fi_cq_readerr(endpoint_->cq(), &err, 0) > 0) {
                --outstanding;
                // The tcp provider drops the connection of a peer that asks
                // for memory it was not given: the link is over either way.
                broken_ = true;
                if (error.empty())
                    error = fmt::format(
                        "the peer's memory refused an RMA {}: {} ({})", read ? "read" : "write",
                        fi_cq_strerror(endpoint_->cq(), err.prov_errno, err.err_data, nullptr, 0),
                        fi_error_text(-err.err));
            }
            continue;
        }
        if (n != -FI_EAGAIN) {
            broken_ = true;
            return fmt::format("fi_cq_read: {}", fi_error_text(int(n)));
        }
        if (timing::now_ns() > deadline_ns) {
            broken_ = true;
            return fmt::format("the member's memory did not answer RMA {}s in time ({} of {} "
                               "operations outstanding)",
                               read ? "read" : "write", outstanding, ops.size());
        }
        sched_yield();
    }
    return error;
}

}  // namespace deputy::fabric
