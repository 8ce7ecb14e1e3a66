#include "cli/launch/mpi_operations.h"

#include <fmt/format.h>

#include <string>

#include "mpi/operations.h"

namespace deputy::tools {
namespace {

std::string threshold_text(size_t bytes) {
    if (bytes == mpi::kNever) return "never";
    if (bytes == mpi::kTune) return "tune";
    if (bytes != 0 && bytes % (size_t(1) << 20) == 0) return fmt::format("{}M", bytes >> 20);
    if (bytes != 0 && bytes % (size_t(1) << 10) == 0) return fmt::format("{}K", bytes >> 10);
    return fmt::format("{}", bytes);
}

}  // namespace

void print_mpi_operations(std::FILE *out) {
    fmt::print(out,
               "# {:<27} {:<23} {:<12} {:>8} {:>8}   (default thresholds, bytes per rank; "
               "DEPUTY_MPI_THRESHOLDS=key=bytes,... or all=bytes changes them)\n",
               "operation", "key", "form", "shared", "own-core");
    for (int i = 0; i < mpi::kOperationCount; ++i) {
        const mpi::OperationInfo &o = mpi::operation_info(mpi::Operation(i));
        fmt::print(out, "{:<29} {:<23} {:<12} {:>8} {:>8}\n", o.mpi_name, o.key,
                   o.nonblocking ? "nonblocking" : "blocking", threshold_text(o.shared_threshold),
                   threshold_text(o.own_core_threshold));
    }
}

}  // namespace deputy::tools
