// The host-driven baseline with deputy's own algorithms: every rank runs its
// src/coll schedule (the selector's choice for the size, or
// --host-algorithm) over MPI point-to-point with the same runner the agents
// use between nodes (src/coll/transport/mpi). Blocking and non-blocking:
// post starts the schedule, test advances it, wait advances it to the end.
// Without an agent, this is what the offload saves the host from doing.
#include <fmt/format.h>

#include <climits>
#include <memory>

#include "bench/coll/impl.h"
#include "coll/algorithms.h"
#include "coll/selector.h"
#include "coll/transport/mpi/schedule_runner.h"

namespace deputy::bench::coll {
namespace {

namespace dc = deputy::coll;

class ScheduleImpl final : public Impl {
  public:
    ScheduleImpl(MPI_Comm comm, std::string forced) : forced_(std::move(forced)) {
        MPI_Comm_dup(comm, &comm_);  // its tags never meet the other implementations'
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
    }
    ~ScheduleImpl() override { MPI_Comm_free(&comm_); }
    const char *name() const override { return "sched"; }
    std::string detail() const override { return algorithm_; }

    std::string unsupported(Coll coll, bool, const CallArgs &a) const override {
        dc::Schedule s;
        std::string why;
        if (!build(coll, a, &s, &why)) return why;
        for (const dc::Step &st : s.steps)
            if (st.is_message() && st.bytes() > size_t(INT_MAX))
                return "a message is above MPI's int counts";
        if (dc::mpi::ScheduleRunner::tag_span(s) > 32000) return "more messages than MPI tags";
        return {};
    }

    bool run(Coll coll, const CallArgs &a) override {
        if (!post(coll, a)) return false;
        return wait();
    }
    bool post(Coll coll, const CallArgs &a) override {
        auto s = std::make_unique<dc::Schedule>();
        if (!build(coll, a, s.get(), &error_)) return false;
        schedule_ = std::move(s);
        runner_ = std::make_unique<dc::mpi::ScheduleRunner>(
            *schedule_, comm_, const_cast<void *>(a.send), a.recv, 0);
        runner_->start();
        return true;
    }
    bool test(bool *done) override {
        *done = runner_->progress();
        return check();
    }
    bool wait() override {
        while (!runner_->progress()) {
        }
        return check();
    }

  private:
    bool check() {
        if (!runner_->failed()) return true;
        error_ = runner_->error();
        return false;
    }
    bool build(Coll coll, const CallArgs &a, dc::Schedule *out, std::string *why) const {
        dc::CollectiveArgs args;
        args.collective = coll;
        args.rank = rank_;
        args.size = size_;
        args.count = a.count;
        args.dtype = a.dtype->dp;
        args.op = a.redop;
        args.root = a.root;
        dc::SelectorConfig selector;
        dc::Selection pick = dc::select_algorithm(args, selector);
        if (!forced_.empty()) {
            pick.algorithm = dc::find_algorithm(args.collective, forced_);
            if (!pick.algorithm) {
                *why = fmt::format("--host-algorithm {}: not an algorithm of {}", forced_,
                                   dc::collective_name(args.collective));
                return false;
            }
        }
        if (!pick.algorithm) {
            *why = fmt::format("src/coll has no schedule for {}",
                               dc::collective_name(args.collective));
            return false;
        }
        args.chunk_bytes = pick.algorithm->pipelines ? pick.chunk_bytes : 0;
        if (dc::build_schedule(*pick.algorithm, args, out) != DP_OK) {
            *why = "the schedule refuses these arguments";
            return false;
        }
        algorithm_ = pick.algorithm->name;
        return true;
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1;
    std::string forced_;
    mutable std::string algorithm_;
    std::unique_ptr<dc::Schedule> schedule_;
    std::unique_ptr<dc::mpi::ScheduleRunner> runner_;
};

}  // namespace

std::unique_ptr<Impl> make_schedule_impl(MPI_Comm comm, const std::string &algorithm) {
    return std::make_unique<ScheduleImpl>(comm, algorithm);
}

}  // namespace deputy::bench::coll
