// The job the benchmark runs in: MPI_COMM_WORLD's ranks (or one team's of
// them, with --load), and the few collective helpers the measurement itself
// needs (barriers, averages over ranks, gathering text to rank 0). These always use MPI, never deputy, so
// they cannot disturb what is measured.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace deputy::bench::coll {

class World {
  public:
    // After MPI_Init; a part of the job (--load) is a communicator of its own.
    explicit World(MPI_Comm comm = MPI_COMM_WORLD);
    int rank() const { return rank_; }
    int size() const { return size_; }
    int local_size() const { return local_size_; }  // ranks on this node
    MPI_Comm comm() const { return comm_; }

    void barrier() const;
    // Element-wise average / maximum over ranks (every rank gets them).
    std::vector<double> average(const std::vector<double> &v) const;
    std::vector<double> maximum(const std::vector<double> &v) const;
    uint64_t sum(uint64_t v) const;
    bool all(bool ok) const;  // true when ok on every rank
    // Rank 0's text, everywhere.
    std::string broadcast(const std::string &text) const;
    // Rank 0 gets each rank's bytes in rank order; others get nothing.
    std::vector<std::string> gather(const void *data, size_t bytes) const;
    // "Open MPI v4.1.4, ..." (first line of MPI_Get_library_version).
    static std::string library_version();
    // Stops every rank (a rank failed in a way the others cannot see).
    [[noreturn]] void abort(int code) const;

  private:
    MPI_Comm comm_ = MPI_COMM_WORLD;
    int rank_ = 0;
    int size_ = 1;
    int local_size_ = 1;
};

}  // namespace deputy::bench::coll
