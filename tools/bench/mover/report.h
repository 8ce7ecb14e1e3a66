// What `deputy bench mover` prints and writes: a header line, a table row
// per measurement, the grep-stable dsa_perf_micros line, and JSON.
#pragma once

#include <deputy/mover.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/mover/options.h"

namespace deputy::bench {

struct ReportHeader {
    std::string op;
    std::string wait;
    std::string wq_mode;
    uint32_t engines = 0;
    uint32_t wq_size = 0;
    uint64_t nt_threshold = 0;
    std::string stores;  // "auto", "cached", "nontemporal"
    std::string isa;
    std::string backend;  // what runs the descriptors (Device::backend_description)
    int busy_threads = 0;
    int cpus = 0;
};

ReportHeader describe(const MoverOptions &o, dp_opcode_t op, dp_wait_mode_t wait, dp_mover_t *mover);
void print_header(const ReportHeader &header);
// `baseline`: the CPU row of the same size, for the ratio column.
void print_row(const MoverResult &row, const MoverResult *baseline);
// dsa_perf_micros's result line, one per row: "GB per sec = %f cpu %f
// kopsrate = %d", with " latency(cycles) = %f, %f ns, cycles/sec =%ld"
// after the GB/s at queue depth 1 or with one buffer.
void print_gb_lines(const std::vector<MoverResult> &rows, const MoverOptions &o);
// The TSC's rate (measured once against the monotonic clock).
uint64_t cycles_per_second();
// With a DSA backend: its counters ("# idxd: ..."), as text and for the JSON.
nlohmann::json idxd_counters(dp_mover_t *mover);
void print_idxd_counters(const nlohmann::json &counters);
bool write_json(const std::string &path, const ReportHeader &header, const MoverOptions &o,
                const std::vector<MoverResult> &rows, const nlohmann::json &idxd);

}  // namespace deputy::bench
