// The ring allreduce on MPI point-to-point of a published "RoCEv2
// AllReduce" article ("Ring-Allreduce"): the count is cut into n segments,
// the first count % n one element longer, so any count works (segments may
// be empty); n-1 reduce-scatter steps (receive from the previous rank, send
// to the next, reduce), then n-1 allgather steps with MPI_Sendrecv. Two
// changes from the article's code: it runs out of place (step 0 sends from
// the source and every reduction writes src + received into the
// destination, so no copy is added), and the MPI_Barrier the article puts
// between the two phases is left out (the algorithm does not need it).
// Reductions use the mover's SIMD kernels, so every dtype works;
// float16/bfloat16 travel as bytes.
#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <vector>

#include "bench/coll/impl.h"
#include "mover/kernels.h"

namespace deputy::bench::coll {
namespace {

class RingImpl final : public Impl {
  public:
    explicit RingImpl(MPI_Comm comm) : comm_(comm) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
    }
    const char *name() const override { return "ring"; }

    std::string unsupported(Coll coll, bool nonblocking, const CallArgs &a) const override {
        if (coll != Coll::allreduce || nonblocking) return "the ring is a blocking allreduce";
        if ((a.count / size_t(size_) + 1) * a.dtype->bytes > size_t(INT_MAX))
            return "a segment is above MPI's int counts";
        return {};
    }

    bool run(Coll, const CallArgs &a) override {
        const size_t eb = a.dtype->bytes;
        const auto *src = static_cast<const char *>(a.send);
        auto *dst = static_cast<char *>(a.recv);
        if (size_ == 1) {
            if (dst != src) std::memmove(dst, src, a.count * eb);
            return true;
        }
        // Segment s: [start[s], start[s] + len[s]) elements.
        const size_t base = a.count / size_t(size_), extra = a.count % size_t(size_);
        std::vector<size_t> start(static_cast<size_t>(size_)), len(static_cast<size_t>(size_));
        for (size_t s = 0, at = 0; s < size_t(size_); ++s) {
            start[s] = at;
            len[s] = base + (s < extra ? 1 : 0);
            at += len[s];
        }
        if (tmp_.size() < len[0] * eb) tmp_.assign(len[0] * eb, 0);  // touched: pre-faulted
        MPI_Datatype t = mpi_type(*a.dtype);
        const size_t unit = t == MPI_DATATYPE_NULL ? eb : 1;  // elements or bytes per MPI item
        if (t == MPI_DATATYPE_NULL) t = MPI_BYTE;
        const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
        auto seg = [&](int s) { return size_t((s % size_ + size_) % size_); };

        for (int step = 0; step < size_ - 1; ++step) {  // reduce-scatter
            const size_t recv_s = seg(rank_ - step - 1), send_s = seg(rank_ - step);
            const char *from = (step == 0 ? src : dst) + start[send_s] * eb;
            MPI_Request req;
            MPI_Irecv(tmp_.data(), int(len[recv_s] * unit), t, prev, 0, comm_, &req);
            MPI_Send(from, int(len[send_s] * unit), t, next, 0, comm_);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            char *into = dst + start[recv_s] * eb;
            mover::kernels::reduce(into, src + start[recv_s] * eb, tmp_.data(), len[recv_s],
                                   a.dtype->dp, a.redop);
        }
        for (int step = 0; step < size_ - 1; ++step) {  // allgather
            const size_t recv_s = seg(rank_ - step), send_s = seg(rank_ - step + 1);
            MPI_Sendrecv(dst + start[send_s] * eb, int(len[send_s] * unit), t, next, 1,
                         dst + start[recv_s] * eb, int(len[recv_s] * unit), t, prev, 1, comm_,
                         MPI_STATUS_IGNORE);
        }
        return true;
    }

    bool post(Coll, const CallArgs &) override { return fail(); }
    bool test(bool *) override { return fail(); }
    bool wait() override { return fail(); }

  private:
    bool fail() {
        error_ = "the ring allreduce has no non-blocking form";
        return false;
    }

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::vector<char> tmp_;
};

}  // namespace

std::unique_ptr<Impl> make_ring_impl(MPI_Comm comm) {
    return std::make_unique<RingImpl>(comm);
}

}  // namespace deputy::bench::coll
