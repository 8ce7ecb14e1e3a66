// MPI's own collectives on the benchmark's buffers. Called as PMPI_*: the
// baseline must be the MPI library itself even when a profiling library
// is loaded into the process (under `deputy mpirun`, libdeputy-mpi would
// otherwise offload the baseline's own calls to deputy above its
// thresholds, and deputy would be measured against itself).
#include <fmt/format.h>

#include <climits>
#include <vector>

#include "bench/coll/impl.h"

namespace deputy::bench::coll {
namespace {

class MpiImpl final : public Impl {
  public:
    explicit MpiImpl(MPI_Comm comm) : comm_(comm) {}
    const char *name() const override { return "mpi"; }

    std::string unsupported(Coll coll, bool, const CallArgs &a) const override {
        if (coll == Coll::barrier) return {};
        if (mpi_type(*a.dtype) == MPI_DATATYPE_NULL)
            return fmt::format("MPI has no {} datatype", a.dtype->name);
        if (a.count > size_t(INT_MAX))
            return fmt::format("count {} is above MPI's int counts", a.count);
        if (deputy::coll::is_vector(coll) && a.count * size_t(size()) > size_t(INT_MAX))
            return fmt::format("displacements up to {} x {} are above MPI's int counts", a.count,
                               size());
        return {};
    }

    bool run(Coll coll, const CallArgs &a) override {
        const MPI_Datatype t = mpi_type(*a.dtype);
        const int n = int(a.count);
        switch (coll) {
            case Coll::allreduce:
                return ok(PMPI_Allreduce(a.send, a.recv, n, t, mpi_op(a.redop), comm_));
            case Coll::reduce_scatter:
                return ok(PMPI_Reduce_scatter_block(a.send, a.recv, n, t, mpi_op(a.redop), comm_));
            case Coll::allgather:
                return ok(PMPI_Allgather(a.send, n, t, a.recv, n, t, comm_));
            case Coll::alltoall:
                return ok(PMPI_Alltoall(a.send, n, t, a.recv, n, t, comm_));
            case Coll::bcast:
                return ok(PMPI_Bcast(a.recv, n, t, a.root, comm_));
            case Coll::barrier:
                return ok(PMPI_Barrier(comm_));
            case Coll::alltoallv: {
                vector_args(n);
                return ok(PMPI_Alltoallv(a.send, counts_.data(), displs_.data(), t, a.recv,
                                        counts_.data(), displs_.data(), t, comm_));
            }
            case Coll::reduce:
                return ok(PMPI_Reduce(a.send, a.recv, n, t, mpi_op(a.redop), a.root, comm_));
            case Coll::gather:
                return ok(PMPI_Gather(a.send, n, t, a.recv, n, t, a.root, comm_));
            case Coll::scatter:
                return ok(PMPI_Scatter(a.send, n, t, a.recv, n, t, a.root, comm_));
            case Coll::scan:
                return ok(PMPI_Scan(a.send, a.recv, n, t, mpi_op(a.redop), comm_));
            case Coll::exscan:
                return ok(PMPI_Exscan(a.send, a.recv, n, t, mpi_op(a.redop), comm_));
            case Coll::allgatherv:
                vector_args(n);
                return ok(PMPI_Allgatherv(a.send, n, t, a.recv, counts_.data(), displs_.data(), t,
                                          comm_));
            case Coll::gatherv:
                vector_args(n);
                return ok(PMPI_Gatherv(a.send, n, t, a.recv, counts_.data(), displs_.data(), t,
                                       a.root, comm_));
            case Coll::scatterv:
                vector_args(n);
                return ok(PMPI_Scatterv(a.send, counts_.data(), displs_.data(), t, a.recv, n, t,
                                        a.root, comm_));
            case Coll::reduce_scatterv:
                vector_args(n);
                return ok(PMPI_Reduce_scatter(a.send, a.recv, counts_.data(), t, mpi_op(a.redop),
                                              comm_));
        }
        return false;
    }

    bool post(Coll coll, const CallArgs &a) override {
        const MPI_Datatype t = mpi_type(*a.dtype);
        const int n = int(a.count);
        switch (coll) {
            case Coll::allreduce:
                return ok(PMPI_Iallreduce(a.send, a.recv, n, t, mpi_op(a.redop), comm_, &req_));
            case Coll::reduce_scatter:
                return ok(PMPI_Ireduce_scatter_block(a.send, a.recv, n, t, mpi_op(a.redop), comm_,
                                                     &req_));
            case Coll::allgather:
                return ok(PMPI_Iallgather(a.send, n, t, a.recv, n, t, comm_, &req_));
            case Coll::alltoall:
                return ok(PMPI_Ialltoall(a.send, n, t, a.recv, n, t, comm_, &req_));
            case Coll::bcast:
                return ok(PMPI_Ibcast(a.recv, n, t, a.root, comm_, &req_));
            case Coll::barrier:
                return ok(PMPI_Ibarrier(comm_, &req_));
            case Coll::alltoallv: {
                vector_args(n);
                return ok(PMPI_Ialltoallv(a.send, counts_.data(), displs_.data(), t, a.recv,
                                         counts_.data(), displs_.data(), t, comm_, &req_));
            }
            case Coll::reduce:
                return ok(
                    PMPI_Ireduce(a.send, a.recv, n, t, mpi_op(a.redop), a.root, comm_, &req_));
            case Coll::gather:
                return ok(PMPI_Igather(a.send, n, t, a.recv, n, t, a.root, comm_, &req_));
            case Coll::scatter:
                return ok(PMPI_Iscatter(a.send, n, t, a.recv, n, t, a.root, comm_, &req_));
            case Coll::scan:
                return ok(PMPI_Iscan(a.send, a.recv, n, t, mpi_op(a.redop), comm_, &req_));
            case Coll::exscan:
                return ok(PMPI_Iexscan(a.send, a.recv, n, t, mpi_op(a.redop), comm_, &req_));
            case Coll::allgatherv:
                vector_args(n);
                return ok(PMPI_Iallgatherv(a.send, n, t, a.recv, counts_.data(), displs_.data(),
                                           t, comm_, &req_));
            case Coll::gatherv:
                vector_args(n);
                return ok(PMPI_Igatherv(a.send, n, t, a.recv, counts_.data(), displs_.data(), t,
                                        a.root, comm_, &req_));
            case Coll::scatterv:
                vector_args(n);
                return ok(PMPI_Iscatterv(a.send, counts_.data(), displs_.data(), t, a.recv, n, t,
                                         a.root, comm_, &req_));
            case Coll::reduce_scatterv:
                vector_args(n);
                return ok(PMPI_Ireduce_scatter(a.send, a.recv, counts_.data(), t, mpi_op(a.redop),
                                               comm_, &req_));
        }
        return false;
    }

    bool test(bool *done) override {
        int flag = 0;
        bool good = ok(PMPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
        *done = flag != 0;
        return good;
    }

    bool wait() override { return ok(PMPI_Wait(&req_, MPI_STATUS_IGNORE)); }

  private:
    int size() const {
        int p = 1;
        MPI_Comm_size(comm_, &p);
        return p;
    }
    // The vector collectives with equal counts (the benchmark's size rule),
    // as deputy's.
    // The arrays stay alive until a non-blocking call completes (MPI 3.1
    // §5.12: they must not change meanwhile).
    void vector_args(int count) {
        const int p = size();
        counts_.assign(size_t(p), count);
        displs_.resize(size_t(p));
        for (int m = 0; m < p; ++m) displs_[size_t(m)] = m * count;
    }

    bool ok(int rc) {
        if (rc == MPI_SUCCESS) return true;
        char text[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, text, &n);
        error_ = std::string(text, size_t(n));
        return false;
    }

    MPI_Comm comm_;
    MPI_Request req_ = MPI_REQUEST_NULL;
    std::vector<int> counts_, displs_;
};

}  // namespace

std::unique_ptr<Impl> make_mpi_impl(MPI_Comm comm) {
    return std::make_unique<MpiImpl>(comm);
}

}  // namespace deputy::bench::coll
