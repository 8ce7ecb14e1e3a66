// The inter-node steps of collectives: the check allgather, MPI's
// non-blocking collectives or a src/coll schedule, posted in each team's order
// and progressed until done. Separate from membership: these move the bytes.
#include <fmt/format.h>

#include <array>
#include <climits>
#include <cstring>
#include <utility>

#include "agent/mpi/mpi_internode.h"
#include "agent/mpi/mpi_internode_state.h"
#include "channel/coll_post.h"
#include "coll/algorithms.h"
#include "coll/selector.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::agent {
namespace {

// The check every operation starts with is an allgather of a fixed-size
// slot per node (fixed: nodes that disagree must still post the same MPI
// call): the header, and a reduction's data when it fits. Such a small
// reduction is then done: every node reduces the gathered parts itself in
// node order, one round instead of two and the same bits on every node.
constexpr size_t kInlineBytes = 2048;
// Schedules run over point-to-point with tags from this base, in slots of
// kTagSpan: at most kTagSlots of a team's schedules are in flight at once
// (the slot is the team's count of schedules posted, the same on every node
// since every node posts a team's steps in the team's order).
constexpr int kTagBase = 64;
constexpr int kTagSpan = 480;
constexpr uint64_t kTagSlots = 64;
static_assert(kTagBase + kTagSpan * int(kTagSlots) <= 32767, "MPI_TAG_UB is at least 32767");
// "auto": MPI's own allreduce below this many bytes per step, the
// selector's schedule (src/coll) at and above it.
constexpr uint64_t kAutoScheduleBytes = 256 << 10;

// MPI operators that reduce with deputy's kernels: MPI's contract is
// inout[i] = in[i] op inout[i].
template <int Dtype, int Op>
void reduce_with_kernels(void *in, void *inout, int *len, MPI_Datatype *) {
    mover::kernels::reduce(inout, in, inout, size_t(*len), dp_dtype_t(Dtype), dp_op_t(Op));
}
using UserFn = void (*)(void *, void *, int *, MPI_Datatype *);
template <size_t... I>
constexpr std::array<UserFn, sizeof...(I)> reduce_functions(std::index_sequence<I...>) {
    return {&reduce_with_kernels<int(I / DP_OP_COUNT), int(I % DP_OP_COUNT)>...};
}
constexpr auto kReduceFns = reduce_functions(std::make_index_sequence<size_t(DP_DTYPE_COUNT) * size_t(DP_OP_COUNT)>());

// (A small reduce too: every node reduces the gathered parts, the root's
// node writes its result back.)
bool inline_reduction(const InterOp &op) {
    return op.check &&
           (op.step.kind == coll::NodeExchange::Kind::allreduce ||
            op.step.kind == coll::NodeExchange::Kind::reduce) &&
           op.step.elements * mover::dtype_size(op.dtype) <= kInlineBytes;
}

// MPI's description of one element of `dtype` reduced with `redop` by
// deputy's kernels (MPI has no bfloat16, float16 or logical ops on every
// type). The caller frees both once its request is posted: MPI keeps them
// alive until the operation completes (MPI 3.1 §2.5.1).
struct MpiReduction {
    MPI_Op op;
    MPI_Datatype type;
    MpiReduction(uint8_t dtype, uint8_t redop) {
        MPI_Op_create(kReduceFns[dtype * DP_OP_COUNT + redop], 1, &op);
        MPI_Type_contiguous(int(mover::dtype_size(dtype)), MPI_BYTE, &type);
        MPI_Type_commit(&type);
    }
    ~MpiReduction() {
        MPI_Type_free(&type);
        MPI_Op_free(&op);
    }
    MpiReduction(const MpiReduction &) = delete;
    MpiReduction &operator=(const MpiReduction &) = delete;
};

}  // namespace

void MpiInternode::finish(Running &r, uint8_t status, const std::string &reason) {
    InternodeEvent e;
    e.kind = InternodeEvent::Kind::done;
    e.team_uid = r.op.team_uid;
    e.op_id = r.op.op_id;
    e.comp_status = status;
    e.reason = reason;
    e.algorithm = inline_reduction(r.op) ? "inline-allgather" : r.algorithm;
    if (status == DP_COMP_SUCCESS) ++ops_done_;
    else ++ops_failed_;
    push_event(std::move(e));
}

// Posts r's next MPI call. false when MPI refused it (r is then finished).
bool MpiInternode::post_next(Running &r) {
    TeamComm &t = *teams_.at(r.op.team_uid);
    const InterOp &op = r.op;
    const int n = int(t.nodes.size());
    int rc = MPI_SUCCESS;
    const uint64_t esize = mover::dtype_size(op.dtype);
    if (r.phase == Running::Phase::header) {
        constexpr size_t slot = sizeof(Header) + kInlineBytes;
        r.mine = Header{op.count, op.root, op.opcode, op.dtype, op.redop, {}};
        r.fused.assign(slot * size_t(n + 1), 0);  // the last slot: this node's, to send
        uint8_t *own = r.fused.data() + slot * size_t(n);
        std::memcpy(own, &r.mine, sizeof(Header));
        if (inline_reduction(op)) std::memcpy(own + sizeof(Header), op.recv, op.step.elements * esize);
        rc = MPI_Iallgather(own, int(slot), MPI_BYTE, r.fused.data(), int(slot), MPI_BYTE, t.comm,
                            &r.request);
        r.phase = Running::Phase::header_wait;
    } else {
        switch (op.step.kind) {
            case coll::NodeExchange::Kind::allreduce:
            case coll::NodeExchange::Kind::reduce: {
                // A reduce's step too, where a schedule runs: measured on 4
                // simulated nodes, the schedules (rabenseifner, ring) beat
                // MPI's tree reduce from 1 MiB (4.3-4.7 ms against 3.4-3.9
                // for 1 MiB; docs/PERFORMANCE.md), as they spread the
                // reduction over the nodes.
                if (uses_schedule(r.op)) {
                    // All tag slots busy: post later (never MPI's own instead:
                    // every node must choose the same algorithm).
                    if (t.schedules_in_flight >= kTagSlots) return true;
                    if (!start_schedule(r, t)) {
                        r.error = "no inter-node schedule for " + options_.inter_algorithm;
                    }
                    break;
                }
                const MpiReduction m(op.dtype, op.redop);
                if (op.step.kind == coll::NodeExchange::Kind::allreduce) {
                    rc = MPI_Iallreduce(MPI_IN_PLACE, op.recv, int(op.step.elements), m.type, m.op,
                                        t.comm, &r.request);
                } else {
                    // In place at the root's node; the others' recv is only sent.
                    const bool root = t.index == op.step.root_node;
                    rc = MPI_Ireduce(root ? MPI_IN_PLACE : op.recv, root ? op.recv : nullptr,
                                     int(op.step.elements), m.type, m.op, int(op.step.root_node),
                                     t.comm, &r.request);
                }
                break;
            }
            case coll::NodeExchange::Kind::bcast:
                rc = MPI_Ibcast(op.recv, int(op.step.bytes), MPI_BYTE, int(op.step.root_node), t.comm,
                                &r.request);
                break;
            case coll::NodeExchange::Kind::barrier: rc = MPI_Ibarrier(t.comm, &r.request); break;
            case coll::NodeExchange::Kind::allgatherv:
            case coll::NodeExchange::Kind::gatherv:
            case coll::NodeExchange::Kind::scatterv: {
                // Every node's part, in node order.
                r.counts.resize(size_t(n));
                r.displs.resize(size_t(n));
                int at = 0;
                for (int i = 0; i < n; ++i) {
                    r.counts[size_t(i)] = int(op.step.part_bytes[size_t(i)]);
                    r.displs[size_t(i)] = at;
                    at += r.counts[size_t(i)];
                }
                const int mine = r.counts[t.index], root = int(op.step.root_node);
                if (op.step.kind == coll::NodeExchange::Kind::allgatherv)
                    rc = MPI_Iallgatherv(op.send, mine, MPI_BYTE, op.recv, r.counts.data(),
                                         r.displs.data(), MPI_BYTE, t.comm, &r.request);
                else if (op.step.kind == coll::NodeExchange::Kind::gatherv)
                    rc = MPI_Igatherv(op.send, mine, MPI_BYTE, op.recv, r.counts.data(),
                                      r.displs.data(), MPI_BYTE, root, t.comm, &r.request);
                else
                    rc = MPI_Iscatterv(op.send, r.counts.data(), r.displs.data(), MPI_BYTE,
                                       op.recv, mine, MPI_BYTE, root, t.comm, &r.request);
                break;
            }
            case coll::NodeExchange::Kind::alltoallv: {
                r.counts.resize(size_t(n));
                r.displs.resize(size_t(n));
                r.send_counts.resize(size_t(n));
                r.send_displs.resize(size_t(n));
                for (size_t i = 0; i < size_t(n); ++i) {
                    r.send_counts[i] = int(op.step.send_bytes[i]);
                    r.send_displs[i] = int(op.step.send_offsets[i]);
                    r.counts[i] = int(op.step.recv_bytes[i]);
                    r.displs[i] = int(op.step.recv_offsets[i]);
                }
                rc = MPI_Ialltoallv(op.send, r.send_counts.data(), r.send_displs.data(), MPI_BYTE,
                                    op.recv, r.counts.data(), r.displs.data(), MPI_BYTE, t.comm,
                                    &r.request);
                break;
            }
        }
        r.phase = Running::Phase::data_wait;
        if (!r.error.empty()) {
            finish(r, channel::kCollMemberLost, r.error);
            return false;
        }
    }
    if (rc != MPI_SUCCESS) {
        finish(r, channel::kCollMemberLost, "MPI refused the inter-node step: " + mpi_error(rc));
        return false;
    }
    return true;
}

// The gathered parts reduced in node order into the operation's buffer.
void MpiInternode::reduce_fused(Running &r, size_t nodes) {
    const size_t slot = sizeof(Header) + kInlineBytes;
    const size_t bytes = r.op.step.elements * mover::dtype_size(r.op.dtype);
    auto *out = static_cast<uint8_t *>(r.op.recv);
    std::memcpy(out, r.fused.data() + sizeof(Header), bytes);
    for (size_t k = 1; k < nodes; ++k)
        mover::kernels::reduce(out, out, r.fused.data() + k * slot + sizeof(Header), r.op.step.elements,
                               dp_dtype_t(r.op.dtype), dp_op_t(r.op.redop));
}

// An allreduce data step as a src/coll schedule over point-to-point, when
// the configuration (or "auto" by size) asks for one. false: use MPI's own.
bool MpiInternode::uses_schedule(const InterOp &op) const {
    const uint64_t bytes = op.step.elements * mover::dtype_size(op.dtype);
    const std::string &want = options_.inter_algorithm;
    return !(want == "native" || (want == "auto" && bytes < kAutoScheduleBytes));
}

bool MpiInternode::start_schedule(Running &r, TeamComm &t) {
    const InterOp &op = r.op;
    const std::string &want = options_.inter_algorithm;
    coll::CollectiveArgs args;
    args.collective = coll::Collective::allreduce;
    args.rank = int(t.index);
    args.size = int(t.nodes.size());
    args.count = op.step.elements;
    args.dtype = dp_dtype_t(op.dtype);
    args.op = dp_op_t(op.redop);
    args.in_place = true;
    coll::SelectorConfig selector;
    coll::Selection pick = coll::select_algorithm(args, selector);
    if (want != "auto") {
        pick.algorithm = coll::find_algorithm(coll::Collective::allreduce,
                                              want == "rd" ? "recursive_doubling" : want);
        if (!pick.algorithm) return false;  // checked at configuration; never here
    }
    args.chunk_bytes = pick.algorithm->pipelines ? pick.chunk_bytes : 0;
    auto schedule = std::make_unique<coll::Schedule>();
    if (coll::build_schedule(*pick.algorithm, args, schedule.get()) != DP_OK ||
        coll::mpi::ScheduleRunner::tag_span(*schedule) > kTagSpan)
        return false;
    const int tag_base = kTagBase + kTagSpan * int(t.schedules_posted++ % kTagSlots);
    r.schedule = std::move(schedule);
    r.runner = std::make_unique<coll::mpi::ScheduleRunner>(*r.schedule, t.comm, nullptr, op.recv,
                                                            tag_base);
    r.algorithm = pick.algorithm->name;
    ++t.schedules_in_flight;
    r.runner->start();
    return true;
}

bool MpiInternode::progress_ops() {
    bool progressed = false;
    const uint64_t now = timing::now_ns();
    for (auto &[uid, tp] : teams_) {
        TeamComm &t = *tp;
        bool earlier_posted = true;  // MPI needs one order of collectives per communicator
        for (auto it = t.ops.begin(); it != t.ops.end();) {
            Running &r = *it;
            bool done_now = false;
            if (r.op.sequence == t.mismatched_sequence) {
                finish(r, channel::kCollMismatch, "the nodes' members disagree on the operation");
                done_now = true;
            } else {
                if (earlier_posted && (r.phase == Running::Phase::header ||
                                       r.phase == Running::Phase::data)) {
                    progressed = true;
                    if (!post_next(r)) done_now = true;
                }
                if (!done_now && (r.phase == Running::Phase::header_wait ||
                                  r.phase == Running::Phase::data_wait)) {
                    int flag = 0;
                    int rc = MPI_SUCCESS;
                    if (r.runner) {
                        flag = r.runner->progress();
                        if (flag && r.runner->failed()) {
                            --t.schedules_in_flight;
                            finish(r, channel::kCollMemberLost,
                                   "inter-node " + r.algorithm + " failed: " + r.runner->error());
                            done_now = true;
                        } else if (flag) {
                            --t.schedules_in_flight;
                        }
                    } else {
                        rc = MPI_Test(&r.request, &flag, MPI_STATUS_IGNORE);
                    }
                    if (done_now) {
                    } else if (rc != MPI_SUCCESS) {
                        finish(r, channel::kCollMemberLost, "inter-node step failed: " + mpi_error(rc));
                        done_now = true;
                    } else if (flag && r.phase == Running::Phase::header_wait) {
                        progressed = true;
                        bool same = true;
                        const size_t slot = sizeof(Header) + kInlineBytes;
                        Header first, h;
                        std::memcpy(&first, r.fused.data(), sizeof(Header));
                        for (size_t k = 1; k < t.nodes.size(); ++k) {
                            std::memcpy(&h, r.fused.data() + k * slot, sizeof(Header));
                            same &= std::memcmp(&h, &first, sizeof(Header)) == 0;
                        }
                        if (same && inline_reduction(r.op)) {
                            reduce_fused(r, t.nodes.size());
                            finish(r, DP_COMP_SUCCESS, "");
                            done_now = true;
                        } else if (!same) {
                            t.mismatched_sequence = r.op.sequence;
                            finish(r, channel::kCollMismatch,
                                   "the members on different nodes disagree on the operation");
                            done_now = true;
                        } else {
                            r.phase = Running::Phase::data;
                            if (earlier_posted && !post_next(r)) done_now = true;
                        }
                    } else if (flag) {
                        progressed = true;
                        finish(r, DP_COMP_SUCCESS, "");
                        done_now = true;
                    } else if (now > r.deadline_ns) {
                        const std::string why = fmt::format(
                            "the inter-node step of a collective did not complete within {} ms "
                            "(a node is gone or unreachable)",
                            options_.op_timeout_ms);
                        DP_LOG_WARN("agent node {}: team {}: {}", node_, uid, why);
                        on_broken(uid, 0, why);
                        return true;  // t.ops was emptied
                    }
                }
            }
            if (done_now) {
                it = t.ops.erase(it);
                continue;
            }
            earlier_posted &= r.all_posted();
            ++it;
        }
    }
    return progressed;
}

}  // namespace deputy::agent
