#include "coll/transport/mpi/schedule_runner.h"

#include <algorithm>
#include <cstring>

namespace deputy::coll::mpi {
namespace {

std::string mpi_error(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    return std::string(text, size_t(std::max(len, 0)));
}

}  // namespace

ScheduleRunner::ScheduleRunner(const Schedule &schedule, MPI_Comm comm, void *source,
                               void *destination, int tag_base, std::vector<int> rank_map)
    : s_(schedule), comm_(comm), tag_base_(tag_base), rank_map_(std::move(rank_map)) {
    scratch_.resize(s_.scratch_bytes());
    buffers_[int(BufferId::source)] = static_cast<uint8_t *>(source);
    buffers_[int(BufferId::destination)] = static_cast<uint8_t *>(destination);
    buffers_[int(BufferId::scratch)] = scratch_.data();
}

int ScheduleRunner::tag_span(const Schedule &schedule) {
    uint32_t top = 0;
    for (const Step &st : schedule.steps)
        if (st.is_message()) top = std::max(top, st.tag + 1);
    return int(top);
}

uint8_t *ScheduleRunner::address(const Region &r) { return buffers_[int(r.buffer)] + r.offset; }

void ScheduleRunner::start() {
    const size_t n = s_.steps.size();
    waiting_.assign(n, 0);
    dependents_.assign(n, {});
    for (StepId id = 0; id < n; ++id) {
        waiting_[id] = s_.steps[id].dependency_count;
        for (StepId dep : s_.dependencies(id)) dependents_[dep].push_back(id);
        if (waiting_[id] == 0) ready_.push_back(id);
    }
    run_ready();
}

void ScheduleRunner::complete(StepId id) {
    ++done_;
    for (StepId next : dependents_[id])
        if (--waiting_[next] == 0) ready_.push_back(next);
}

void ScheduleRunner::run_ready() {
    // Local steps complete at once and may free more: loop until none is left.
    while (!ready_.empty() && error_.empty()) {
        const StepId id = ready_.back();
        ready_.pop_back();
        const Step &st = s_.steps[id];
        switch (st.kind) {
            case StepKind::send:
            case StepKind::recv: {
                const int peer = rank_map_.empty() ? st.peer : rank_map_[size_t(st.peer)];
                const int tag = tag_base_ + int(st.tag);
                MPI_Request req;
                const int rc =
                    st.kind == StepKind::send
                        ? MPI_Isend(address(st.src), int(st.src.bytes), MPI_BYTE, peer, tag, comm_, &req)
                        : MPI_Irecv(address(st.dst), int(st.dst.bytes), MPI_BYTE, peer, tag, comm_, &req);
                if (rc != MPI_SUCCESS) {
                    error_ = std::string(step_kind_name(st.kind)) + " to/from rank " +
                             std::to_string(peer) + ": " + mpi_error(rc);
                    return;
                }
                requests_.push_back(req);
                request_steps_.push_back(id);
                break;
            }
            case StepKind::reduce:
                reducer_.reduce(address(st.dst), address(st.src), address(st.src2),
                                st.dst.bytes / dp_dtype_size(st.dtype), st.dtype, st.op);
                complete(id);
                break;
            case StepKind::copy:
                if (st.dst.bytes) std::memmove(address(st.dst), address(st.src), st.dst.bytes);
                complete(id);
                break;
        }
    }
}

bool ScheduleRunner::progress() {
    if (!error_.empty()) return true;
    if (!requests_.empty()) {
        int count = 0;
        std::vector<int> indices(requests_.size());
        const int rc = MPI_Testsome(int(requests_.size()), requests_.data(), &count, indices.data(),
                                    MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            error_ = "testing messages: " + mpi_error(rc);
            return true;
        }
        if (count > 0 && count != MPI_UNDEFINED) {
            for (int i = 0; i < count; ++i) complete(request_steps_[size_t(indices[size_t(i)])]);
            // Drop the completed (now MPI_REQUEST_NULL) requests.
            size_t keep = 0;
            for (size_t i = 0; i < requests_.size(); ++i)
                if (requests_[i] != MPI_REQUEST_NULL) {
                    requests_[keep] = requests_[i];
                    request_steps_[keep] = request_steps_[i];
                    ++keep;
                }
            requests_.resize(keep);
            request_steps_.resize(keep);
        }
    }
    run_ready();
    return !error_.empty() || done_ == s_.steps.size();
}

}  // namespace deputy::coll::mpi
