#include "bench/mover/bench_mover.h"

#include <deputy/deputy.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/mover/options.h"
#include "bench/mover/report.h"
#include "bench/mover/runner.h"
#include "bench/mover/workload.h"
#include "common/affinity.h"
#include "common/cli_common.h"
#include "common/cli_json.h"
#include "common/log.h"
#include "common/units.h"
#include "mover/names.h"
#include "mover/config.h"
#include "mover/kernels.h"

namespace deputy::bench {
namespace {

struct Resolved {
    dp_opcode_t opcode = DP_OP_MEMMOVE;
    std::vector<uint64_t> sizes;
    dp_wait_mode_t wait = DP_WAIT_SPIN;
    dp_dtype_t dtype = DP_FLOAT32;
    dp_op_t redop = DP_SUM;
    unsigned dif_block = DP_DIF_BLOCK_512;
    int caller_cpu = 0;
    std::vector<int> engine_cpus;
    bool run_mover = true;
    bool run_cpu = false;
    std::string device_json;  // accel-config text for dp_mover_open_json
    BufferNodes nodes;        // -S
};

using cli::usage_error;

Resolved resolve(const MoverOptions &o) {
    Resolved r;
    if (!parse_opcode(o.op, &r.opcode))
        usage_error("-o " + o.op + ": unknown operation (names: " + mover::opcode_names() +
                    "; or DSA opcode numbers like 3)");
    if (o.sizes.empty()) usage_error("-s: no size given");
    r.sizes = cli::parse_size_list("-s", o.sizes);
    if (o.wait.size() == 1 && o.wait[0] >= '0' && o.wait[0] <= '3') {
        r.wait = dp_wait_mode_t(o.wait[0] - '0');
    } else if (o.wait.rfind("0x", 0) == 0) {
        // dsa_perf_micros' misc flags: bit 7 = pause, bit 8 = umwait while
        // waiting for completions. umwait's nearest software form is sleeping.
        unsigned long bits = std::strtoul(o.wait.c_str(), nullptr, 16);
        r.wait = bits & 0x100 ? DP_WAIT_BLOCK : bits & 0x80 ? DP_WAIT_PAUSE : DP_WAIT_SPIN;
    } else if (!mover::parse_wait_mode(o.wait, &r.wait)) {
        usage_error("-x " + o.wait + ": not one of spin, pause, yield, block (or 0..3, or "
                    "dsa_perf_micros hex flags: 0x80 pause, 0x100 umwait = block)");
    }
    if (!o.isa.empty()) {
        // The kernels of one ISA for the engines and the CPU baseline alike
        // (what the SIMD kernels buy, on one machine).
        namespace k = mover::kernels;
        const k::Isa levels[] = {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512};
        const k::Isa *want = nullptr;
        for (const k::Isa &level : levels)
            if (o.isa == k::isa_name(level)) want = &level;
        if (!want) usage_error("--isa " + o.isa + ": not scalar, avx2 or avx512");
        if (int(*want) > int(k::detected_isa()))
            usage_error("--isa " + o.isa + ": this CPU offers " + k::isa_name(k::detected_isa()) +
                        " at most");
        k::force_isa(*want);
    }
    if (!parse_dtype(o.dtype, &r.dtype)) usage_error("--dtype " + o.dtype + ": unknown type");
    if (!parse_redop(o.redop, &r.redop)) usage_error("--redop " + o.redop + ": unknown reduction");
    if (!mover::op_applies(unsigned(r.dtype), unsigned(r.redop)))
        usage_error("--redop " + o.redop + " does not apply to --dtype " + o.dtype +
                    " (sum, prod, min, max to the numeric types; land .. bxor to the integer "
                    "ones; minloc, maxloc to the pairs)");
    // dsa_perf_micros' -e: the block size's index (0-3); the size itself too.
    const std::string &b = o.dif_block;
    if (b == "0" || b == "512") r.dif_block = DP_DIF_BLOCK_512;
    else if (b == "1" || b == "520") r.dif_block = DP_DIF_BLOCK_520;
    else if (b == "2" || b == "4096") r.dif_block = DP_DIF_BLOCK_4096;
    else if (b == "3" || b == "4104") r.dif_block = DP_DIF_BLOCK_4104;
    else usage_error("--dif-block " + b + ": one of 512, 520, 4096, 4104 (or their index 0-3)");
    if (o.cached && o.nontemporal) usage_error("-f (cached stores) and --nt contradict each other");
    if (!o.compare.empty() && o.compare != "cpu")
        usage_error("--compare " + o.compare + ": the mover compares against 'cpu'");
    r.run_mover = !o.cpu_mode;
    r.run_cpu = o.cpu_mode || o.compare == "cpu";
    std::string error;
    std::vector<int> cpus;
    if (affinity::parse_cpu_list(o.caller_cpus, &cpus, &error) != DP_OK) usage_error("-k: " + error);
    r.caller_cpu = cpus.front();
    const int ncpu = affinity::cpu_count();
    if (r.caller_cpu >= ncpu)
        usage_error(fmt::format("-k {}: this machine has CPUs 0..{}", r.caller_cpu, ncpu - 1));
    if (!o.engine_cpus.empty()) {
        if (affinity::parse_cpu_list(o.engine_cpus, &r.engine_cpus, &error) != DP_OK)
            usage_error("--engine-cpus: " + error);
        for (int cpu : r.engine_cpus)
            if (cpu >= ncpu) usage_error(fmt::format("--engine-cpus {}: this machine has CPUs 0..{}", cpu, ncpu - 1));
    } else {
        // Engines start on the CPU after the caller's and wrap around, so one
        // engine never shares the caller's core when a second core exists.
        for (uint32_t e = 0; e < o.engines; ++e) r.engine_cpus.push_back(int((r.caller_cpu + 1 + e) % ncpu));
    }
    if (!o.placement.empty()) {
        for (char c : o.placement)
            if (c != 'F' && c != 'P' && c != 'D' && c != ',')
                usage_error("-z " + o.placement + ": directives are F (flush), P, D, comma-separated");
    }
    if (!o.numa_nodes.empty() && !parse_buffer_nodes(o.numa_nodes, &r.nodes, &error))
        usage_error(error);
    if (!o.device.empty() && !o.wq.empty()) usage_error("give --device or --wq, not both");
    if (!o.agent.empty() && (!o.device.empty() || !o.wq.empty() || !o.config_file.empty()))
        usage_error("--agent runs on the agent's device: not with --device, --wq or --config");
    const std::string idxd_queue = o.wq.empty() ? o.device : o.wq;
    if (!idxd_queue.empty() && !o.config_file.empty())
        usage_error("--config with --device/--wq: set \"backend\": \"idxd\" and \"idxd_queue\" "
                    "in the configuration instead");
    if (!o.config_file.empty()) {
        std::ifstream in(o.config_file);
        if (!in) usage_error("--config " + o.config_file + ": cannot read the file");
        std::stringstream text;
        text << in.rdbuf();
        r.device_json = text.str();
    } else {
        nlohmann::json wq = {{"dev", "wq0.0"},
                             {"mode", o.shared_wq ? "shared" : "dedicated"},
                             {"size", o.wq_size},
                             {"priority", 10},
                             {"max_batch_size", std::clamp<uint32_t>(o.batch, 64, mover::kMaxBatchSize)},
                             {"max_transfer_size", 1ull << 31}};
        nlohmann::json engines = nlohmann::json::array();
        for (uint32_t e = 0; e < o.engines; ++e) engines.push_back({{"dev", fmt::format("engine0.{}", e)}});
        std::string cpu_list;
        for (int cpu : r.engine_cpus) cpu_list += (cpu_list.empty() ? "" : ",") + std::to_string(cpu);
        nlohmann::json device = {{"dev", "dsa0"},
                                 {"groups", {{{"dev", "group0.0"},
                                              {"grouped_workqueues", {wq}},
                                              {"grouped_engines", engines}}}},
                                 {"cpu_list", cpu_list}};
        if (!idxd_queue.empty()) {
            device["backend"] = "idxd";
            device["idxd_queue"] = idxd_queue;
        }
        r.device_json = device.dump();
    }
    return r;
}

int run(const MoverOptions &o, const cli::LogFlags &log_flags) {
    cli::apply_log_flags(log_flags);
    Resolved r = resolve(o);
    if (o.shared_wq != 0 && o.shared_wq != 1) usage_error("-w must be 0 (dedicated) or 1 (shared)");
    if (o.verify != 0 && o.verify != 1) usage_error("-v must be 0 or 1");
    if (o.engines < 1 || o.engines > DP_MOVER_MAX_ENGINES)
        usage_error(fmt::format("-e {}: engines must be 1..{}", o.engines, DP_MOVER_MAX_ENGINES));
    if (affinity::pin_current_thread(r.caller_cpu) != DP_OK)
        DP_APP_WARN("could not pin the calling thread to CPU {}", r.caller_cpu);

    dp_mover_t *mover = nullptr;
    dp_context_t *agent = nullptr;
    if (r.run_mover && !o.agent.empty()) {
        // The agent's mover in staged mode: each descriptor's bytes travel
        // in the channel (a remote agent's only mode; locally, its baseline).
        dp_config_t config = DP_CONFIG_INITIALIZER;
        config.agent = o.agent.c_str();
        config.memory_mode = DP_MEMORY_STAGED;
        if (dp_status_t s = dp_init(&config, &agent); s != DP_OK) {
            DP_APP_ERROR("--agent {}: {}", o.agent, dp_strerror(s));
            return 2;
        }
        if (dp_status_t s = dp_mover_attach(agent, &mover); s != DP_OK) {
            DP_APP_ERROR("--agent {}: dp_mover_attach: {}", o.agent, dp_strerror(s));
            dp_finalize(agent);
            return 2;
        }
    } else if (r.run_mover) {
        const char *error = nullptr;
        if (dp_mover_open_json(r.device_json.c_str(), &mover, &error) != DP_OK) {
            DP_APP_ERROR("cannot open the mover: {}", error ? error : "unknown error");
            return 2;
        }
    }
    std::unique_ptr<dp_context_t, dp_status_t (*)(dp_context_t *)> finalizer(agent, dp_finalize);
    std::unique_ptr<dp_mover_t, dp_status_t (*)(dp_mover_t *)> closer(mover, dp_mover_close);

    ReportHeader header = describe(o, r.opcode, r.wait, mover);
    if (agent) header.backend = "the agent at " + o.agent + ", staged (bytes in the channel)";
    print_header(header);
    if (r.nodes.any())
        std::printf("# buffers on NUMA nodes: source %d, destination %d, third %d; caller on CPU %d\n",
                    r.nodes.src, r.nodes.dst, r.nodes.third, r.caller_cpu);
    RunPlan plan;
    plan.queue_depth = o.queue_depth;
    plan.wait = r.wait;
    plan.iterations = o.iterations;
    plan.repeats = std::max<uint32_t>(1, o.repeats);
    plan.flush_before_repeat = o.placement.find('F') != std::string::npos;
    plan.verify = o.verify == 1;

    std::vector<MoverResult> results;
    bool all_ok = true;
    for (uint64_t size : r.sizes) {
        WorkloadSpec spec;
        spec.opcode = r.opcode;
        spec.transfer_size = size;
        spec.buffers = o.buffers;
        spec.batch = o.batch;
        spec.store_flags = o.cached ? DP_FLAG_CACHED : o.nontemporal ? DP_FLAG_NONTEMPORAL : 0;
        spec.dtype = r.dtype;
        spec.redop = r.redop;
        spec.dif_block = r.dif_block;
        spec.nodes = r.nodes;
        std::unique_ptr<Workload> workload;
        std::string error;
        if (Workload::create(spec, &workload, &error) != DP_OK) {
            DP_APP_ERROR("{}", error);
            return 2;
        }
        DP_APP_DEBUG("size {}: {} unit(s) of {} op(s)", size, workload->units(), o.batch);
        if (r.run_mover) results.push_back(run_on_mover(mover, *workload, plan));
        if (r.run_cpu) results.push_back(run_on_cpu(*workload, plan));
        for (size_t i = results.size() - (r.run_mover + r.run_cpu); i < results.size(); ++i) {
            print_row(results[i], r.run_mover && r.run_cpu && results[i].mode == "mover"
                                      ? &results[i + 1] : nullptr);
            if (!results[i].verified) {
                all_ok = false;
                DP_APP_ERROR("{} at {} bytes: {}", results[i].mode, size, results[i].verify_error);
            }
        }
    }
    print_gb_lines(results, o);
    const nlohmann::json idxd = idxd_counters(mover);
    print_idxd_counters(idxd);
    if (!o.out_file.empty() && !write_json(o.out_file, header, o, results, idxd)) return 2;
    return all_ok ? 0 : 1;
}

}  // namespace

void register_mover(CLI::App &bench) {
    auto options = std::make_shared<MoverOptions>();
    auto log_flags = std::make_shared<cli::LogFlags>();
    CLI::App *app = bench.add_subcommand(
        "mover", "data mover throughput and latency, dsa_perf_micros-style, against the calling core");
    app->add_option("-o,--op", options->op, "operation: name or DSA opcode number")->capture_default_str();
    app->add_option("-s,--size", options->sizes, "transfer size(s), comma-separated, k/m/g suffixes")
        ->capture_default_str();
    app->add_option("-n,--buffers", options->buffers, "buffer count")->capture_default_str()
        ->check(CLI::Range(1u, 1u << 20));
    app->add_option("-i,--iterations", options->iterations,
                    "passes over all buffers per repeat (0: auto, ~0.25 s)")->capture_default_str();
    app->add_option("-b,--batch", options->batch, "descriptors per batch (1: no batch)")
        ->capture_default_str()->check(CLI::Range(1u, mover::kMaxBatchSize));
    app->add_option("-q,--queue-depth", options->queue_depth,
                    "outstanding submissions (1: latency mode)")->capture_default_str()
        ->check(CLI::Range(1u, 1u << 20));
    app->add_option("-w,--wq-mode", options->shared_wq, "0 dedicated, 1 shared work queue")
        ->capture_default_str();
    app->add_option("-e,--engines", options->engines, "engines (worker threads)")->capture_default_str();
    app->add_option("-x,--wait", options->wait, "completion wait: spin, pause, yield, block")
        ->capture_default_str();
    app->add_flag("-m,--cpu", options->cpu_mode, "run the operation on the calling core (baseline)");
    app->add_option("-k,--cpus", options->caller_cpus, "CPU of the calling thread")->capture_default_str();
    app->add_option("--engine-cpus", options->engine_cpus,
                    "engine CPUs (default: the CPUs after -k's, wrapping)");
    app->add_option("-v,--verify", options->verify, "check every destination after the run (0/1)")
        ->capture_default_str();
    app->add_option("--config", options->config_file, "accel-config JSON device configuration");
    app->add_option("--device", options->device,
                    "run on a DSA device's first usable work queue (dsa0); without one, the "
                    "software engines run and the header says why");
    app->add_option("--wq", options->wq,
                    "run on this DSA work queue (dsa0/wq0.0), or on the stand-in device "
                    "(standin, standin/shared; standin/inline executes in the portal write, for the "
                    "submission cost) that executes DSA descriptors in software");
    app->add_option("--agent", options->agent,
                    "run on an agent's mover, staged (the bytes travel in the channel): a socket "
                    "path, or tcp://HOST:PORT for a remote agent (DEPUTY_KEY names its key)");
    app->add_option("--wq-size", options->wq_size, "work queue size (power of two)")->capture_default_str();
    app->add_flag("-f,--cached", options->cached, "destination writes stay in cache");
    app->add_flag("--nt", options->nontemporal, "destination writes bypass the cache");
    app->add_option("--compare", options->compare, "also run the baseline in the same run: cpu");
    app->add_option("--reps", options->repeats, "timed repeats (medians reported)")->capture_default_str();
    app->add_option("--dtype", options->dtype, "reduce: element type")->capture_default_str();
    app->add_option("--dif-block", options->dif_block,
                    "DIF operations: data bytes per block, 512 520 4096 4104 or their index 0-3 "
                    "(dsa_perf_micros' -e)")
        ->capture_default_str();
    app->add_option("--redop", options->redop,
                    "reduce: sum, prod, min, max, land, lor, lxor, band, bor, bxor, minloc, maxloc")->capture_default_str();
    app->add_option("-z,--placement", options->placement,
                    "data placement: F flushes buffers to memory before each repeat");
    app->add_flag("-c", options->soc_flag, "accepted for dsa_perf_micros scripts (no effect)");
    app->add_option("--out", options->out_file, "write results as JSON to this file");
    app->add_option("-S,--numa-nodes", options->numa_nodes,
                    "NUMA nodes of the buffers: SRC,DST[,THIRD], or one for all (as "
                    "dsa_perf_micros -S); -k places the caller");
    app->add_option("--isa", options->isa,
                    "kernels: scalar, avx2 or avx512 (default: the best the CPU has)");
    cli::add_log_flags(*app, log_flags.get());
    cli::add_json_config(*app);
    app->callback([options, log_flags] {
        int rc = run(*options, *log_flags);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace deputy::bench
