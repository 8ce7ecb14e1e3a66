// deputy's collectives: the call posts a descriptor and returns; the agent
// moves and reduces the bytes; dp_test is a load of the completion flag.
#include <deputy/coll.h>
#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "bench/coll/impl.h"

namespace deputy::bench::coll {
namespace {

class DeputyImpl final : public Impl {
  public:
    explicit DeputyImpl(dp_team_t *team) : team_(team) {}
    ~DeputyImpl() override {
        if (req_ != nullptr) dp_request_free(req_);
    }
    const char *name() const override { return "deputy"; }

    std::string unsupported(Coll, bool, const CallArgs &) const override { return {}; }

    bool run(Coll coll, const CallArgs &a) override {
        switch (coll) {
            case Coll::allreduce:
                return ok(dp_allreduce(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_));
            case Coll::reduce_scatter:
                return ok(dp_reduce_scatter(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_));
            case Coll::allgather:
                return ok(dp_allgather(a.send, a.recv, a.count, a.dtype->dp, team_));
            case Coll::alltoall:
                return ok(dp_alltoall(a.send, a.recv, a.count, a.dtype->dp, team_));
            case Coll::bcast:
                return ok(dp_bcast(a.recv, a.count, a.dtype->dp, a.root, team_));
            case Coll::barrier:
                return ok(dp_barrier(team_));
            case Coll::alltoallv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_alltoallv(a.send, v.counts.data(), v.displs.data(), a.recv,
                                       v.counts.data(), v.displs.data(), a.dtype->dp, team_));
            }
            case Coll::reduce:
                return ok(dp_reduce(a.send, a.recv, a.count, a.dtype->dp, a.redop, a.root, team_));
            case Coll::gather:
                return ok(dp_gather(a.send, a.recv, a.count, a.dtype->dp, a.root, team_));
            case Coll::scatter:
                return ok(dp_scatter(a.send, a.recv, a.count, a.dtype->dp, a.root, team_));
            case Coll::scan:
                return ok(dp_scan(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_));
            case Coll::exscan:
                return ok(dp_exscan(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_));
            case Coll::allgatherv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_allgatherv(a.send, a.count, a.recv, v.counts.data(), v.displs.data(),
                                        a.dtype->dp, team_));
            }
            case Coll::gatherv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_gatherv(a.send, a.count, a.recv, v.counts.data(), v.displs.data(),
                                     a.dtype->dp, a.root, team_));
            }
            case Coll::scatterv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_scatterv(a.send, v.counts.data(), v.displs.data(), a.recv, a.count,
                                      a.dtype->dp, a.root, team_));
            }
            case Coll::reduce_scatterv:
                return ok(dp_reduce_scatterv(a.send, a.recv, vector_args(a.count).counts.data(),
                                             a.dtype->dp, a.redop, team_));
        }
        return false;
    }

    bool post(Coll coll, const CallArgs &a) override {
        switch (coll) {
            case Coll::allreduce:
                return ok(
                    dp_iallreduce(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_, &req_));
            case Coll::reduce_scatter:
                return ok(dp_ireduce_scatter(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_,
                                             &req_));
            case Coll::allgather:
                return ok(dp_iallgather(a.send, a.recv, a.count, a.dtype->dp, team_, &req_));
            case Coll::alltoall:
                return ok(dp_ialltoall(a.send, a.recv, a.count, a.dtype->dp, team_, &req_));
            case Coll::bcast:
                return ok(dp_ibcast(a.recv, a.count, a.dtype->dp, a.root, team_, &req_));
            case Coll::barrier:
                return ok(dp_ibarrier(team_, &req_));
            case Coll::alltoallv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_ialltoallv(a.send, v.counts.data(), v.displs.data(), a.recv,
                                        v.counts.data(), v.displs.data(), a.dtype->dp, team_,
                                        &req_));
            }
            case Coll::reduce:
                return ok(dp_ireduce(a.send, a.recv, a.count, a.dtype->dp, a.redop, a.root, team_,
                                     &req_));
            case Coll::gather:
                return ok(dp_igather(a.send, a.recv, a.count, a.dtype->dp, a.root, team_, &req_));
            case Coll::scatter:
                return ok(dp_iscatter(a.send, a.recv, a.count, a.dtype->dp, a.root, team_, &req_));
            case Coll::scan:
                return ok(dp_iscan(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_, &req_));
            case Coll::exscan:
                return ok(
                    dp_iexscan(a.send, a.recv, a.count, a.dtype->dp, a.redop, team_, &req_));
            case Coll::allgatherv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_iallgatherv(a.send, a.count, a.recv, v.counts.data(),
                                         v.displs.data(), a.dtype->dp, team_, &req_));
            }
            case Coll::gatherv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_igatherv(a.send, a.count, a.recv, v.counts.data(), v.displs.data(),
                                      a.dtype->dp, a.root, team_, &req_));
            }
            case Coll::scatterv: {
                const VectorArgs &v = vector_args(a.count);
                return ok(dp_iscatterv(a.send, v.counts.data(), v.displs.data(), a.recv, a.count,
                                       a.dtype->dp, a.root, team_, &req_));
            }
            case Coll::reduce_scatterv:
                return ok(dp_ireduce_scatterv(a.send, a.recv, vector_args(a.count).counts.data(),
                                              a.dtype->dp, a.redop, team_, &req_));
        }
        return false;
    }

    bool test(bool *done) override {
        if (req_ == nullptr) return *done = true, true;  // completed by an earlier test
        int flag = 0;
        dp_status_t s = dp_test(req_, &flag);
        *done = flag != 0;
        if (*done) release();
        return ok(s);
    }

    bool wait() override {
        if (req_ == nullptr) return true;
        dp_status_t s = dp_wait(req_);
        release();
        return ok(s);
    }

  private:
    // The vector collectives with equal counts (the benchmark's size rule):
    // `count` to and from every member, blocks back to back, as the plain
    // forms' (alltoall's, allgather's, gather's, scatter's). Built once
    // per count, outside the timed call's own work.
    struct VectorArgs {
        size_t count = SIZE_MAX;
        std::vector<size_t> counts, displs;
    };
    const VectorArgs &vector_args(size_t count) {
        if (vector_.count != count) {
            const size_t p = size_t(dp_team_size(team_));
            vector_.count = count;
            vector_.counts.assign(p, count);
            vector_.displs.resize(p);
            for (size_t m = 0; m < p; ++m) vector_.displs[m] = m * count;
        }
        return vector_;
    }

    void release() {
        dp_request_free(req_);
        req_ = nullptr;
    }

    bool ok(dp_status_t s) {
        if (s == DP_OK) return true;
        error_ = dp_strerror(s);
        return false;
    }

    dp_team_t *team_;
    dp_request_t *req_ = nullptr;
    VectorArgs vector_;
};

}  // namespace

std::unique_ptr<Impl> make_deputy_impl(dp_team_t *team) {
    return std::make_unique<DeputyImpl>(team);
}

}  // namespace deputy::bench::coll
