#include "bench/coll/world.h"

#include <cstdlib>

namespace deputy::bench::coll {

World::World(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
}

void World::barrier() const {
    MPI_Barrier(comm_);
}

std::vector<double> World::average(const std::vector<double> &v) const {
    std::vector<double> out(v.size());
    MPI_Allreduce(v.data(), out.data(), int(v.size()), MPI_DOUBLE, MPI_SUM, comm_);
    for (double &x : out) x /= size_;
    return out;
}

std::vector<double> World::maximum(const std::vector<double> &v) const {
    std::vector<double> out(v.size());
    MPI_Allreduce(v.data(), out.data(), int(v.size()), MPI_DOUBLE, MPI_MAX, comm_);
    return out;
}

uint64_t World::sum(uint64_t v) const {
    uint64_t out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, comm_);
    return out;
}

bool World::all(bool ok) const {
    int in = ok ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, comm_);
    return out == 1;
}

std::string World::broadcast(const std::string &text) const {
    uint64_t n = text.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm_);
    std::string out = rank_ == 0 ? text : std::string(n, '\0');
    MPI_Bcast(out.data(), int(n), MPI_CHAR, 0, comm_);
    return out;
}

std::vector<std::string> World::gather(const void *data, size_t bytes) const {
    // Point-to-point in rank order: counts may exceed an int in total.
    std::vector<std::string> out;
    uint64_t n = bytes;
    if (rank_ != 0) {
        MPI_Send(&n, 1, MPI_UINT64_T, 0, 7, comm_);
        MPI_Send(data, int(n), MPI_BYTE, 0, 8, comm_);
        return out;
    }
    out.emplace_back(static_cast<const char *>(data), bytes);
    for (int r = 1; r < size_; ++r) {
        MPI_Recv(&n, 1, MPI_UINT64_T, r, 7, comm_, MPI_STATUS_IGNORE);
        std::string s(n, '\0');
        MPI_Recv(s.data(), int(n), MPI_BYTE, r, 8, comm_, MPI_STATUS_IGNORE);
        out.push_back(std::move(s));
    }
    return out;
}

std::string World::library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(text, &n);
    std::string s(text, size_t(n));
    size_t nl = s.find_first_of(std::string("\r\n\0", 3));  // Open MPI counts the NUL
    return nl == std::string::npos ? s : s.substr(0, nl);
}

void World::abort(int code) const {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
}

}  // namespace deputy::bench::coll
