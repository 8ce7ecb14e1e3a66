// Options of `deputy bench mover`. Flag letters follow dsa_perf_micros so
// its sweep scripts port by changing the program name.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deputy::bench {

struct MoverOptions {
    std::string op = "memmove";        // -o: name or DSA opcode number
    std::string sizes = "4k";          // -s: comma list with k/m/g suffixes
    uint32_t buffers = 32;             // -n: buffer count
    uint64_t iterations = 0;           // -i: 0 = auto (~0.25 s per repeat)
    uint32_t batch = 1;                // -b
    uint32_t queue_depth = 32;         // -q: outstanding descriptors (1 = latency mode)
    int shared_wq = 0;                 // -w: 0 dedicated, 1 shared
    uint32_t engines = 1;              // -e
    std::string wait = "spin";         // -x: spin|pause|yield|block
    bool cpu_mode = false;             // -m: the calling core does the work
    std::string caller_cpus = "0";     // -k: CPU of the calling thread
    std::string engine_cpus;           // --engine-cpus: default: the CPUs after -k's
    int verify = 1;                    // -v
    std::string config_file;           // --config: accel-config JSON
    std::string device;                // --device: a DSA device ("dsa0"): its first usable queue
    std::string wq;                    // --wq: a DSA work queue ("dsa0/wq0.0") or "standin[/shared]"
    std::string agent;                 // --agent: an agent's mover ("tcp://dpu0:7700"), staged
    uint32_t wq_size = 128;            // --wq-size
    bool cached = false;               // -f: destination writes stay in cache
    bool nontemporal = false;          // --nt: destination writes bypass the cache
    std::string compare;               // --compare cpu
    uint32_t repeats = 5;              // --reps: timed repeats; medians reported
    std::string dtype = "float32";     // --dtype (reduce)
    std::string redop = "sum";         // --redop (reduce)
    std::string dif_block = "512";     // --dif-block: DIF block size (dsa_perf_micros -e)
    std::string placement;             // -z: F (flush buffers before each repeat), P, D
    bool soc_flag = false;             // -c: accepted for dsa_perf_micros scripts
    std::string out_file;              // --out: results JSON
    std::string isa;                   // --isa: scalar|avx2|avx512 (default: the CPU's best)
    std::string numa_nodes;            // -S: NUMA nodes of the buffers, SRC,DST[,THIRD]
};

// One measured configuration: mover or CPU at one transfer size.
struct MoverResult {
    std::string mode;  // "mover" or "cpu"
    uint64_t transfer_size = 0;
    uint64_t ops = 0;           // operations per repeat (descriptors incl. batch members)
    uint64_t bytes = 0;         // bytes per repeat
    uint64_t iterations = 0;
    std::vector<double> gbps_per_repeat;
    double gbps = 0;            // median over repeats
    double latency_ns = 0;      // median submit-to-completion (per unit), or wall/op for cpu
    double latency_p99_ns = 0;
    double submit_ns = 0;       // median time of the submit call (mover rows; 0 for cpu)
    double cpu_share = 0;       // caller thread CPU time / wall time (median)
    double kops = 0;            // thousand ops per second (median)
    uint64_t retries = 0;       // DP_ERR_RETRY answers
    bool verified = false;
    std::string verify_error;   // first mismatch, when verification failed
};

}  // namespace deputy::bench
