#include "mover/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/timing.h"
#include "mover/idxd/hw_queue.h"

namespace deputy::mover {

dp_status_t Device::create(const DeviceConfig &config, std::unique_ptr<Device> *out,
                           std::string *error) {
    if (dp_status_t s = validate_config(config, error); s != DP_OK) return s;
    std::unique_ptr<Device> device(new Device);
    device->config_ = config;
    device->nt_threshold_ = config.nt_threshold ? config.nt_threshold : kDefaultNtThreshold;
    device->spaces_.set_local(&device->local_);
    if (config.backend == DeviceConfig::Backend::idxd) {
        std::string why;
        if (idxd::HwQueue::open(config.idxd_queue, config.wait_mode, &device->hw_, &why) != DP_OK) {
            device->backend_ = "software engines (idxd: " + why + ")";
            DP_LOG_WARN("mover {}: no DSA queue: {}; the software engines run", config.name, why);
        } else if (device->hw_->queue().mode == DP_WQ_DEDICATED &&
                   config.total_engines() > device->hw_->queue().size) {
            // Each engine has one descriptor on the device at a time; more
            // than a dedicated queue holds and the device would drop some.
            *error = "idxd: " + device->hw_->description() + " holds " +
                     std::to_string(device->hw_->queue().size) + " descriptors, fewer than the " +
                     std::to_string(config.total_engines()) + " engines that would submit to it";
            return DP_ERR_INVALID;
        } else {
            device->backend_ = "DSA " + device->hw_->description();
        }
    }

    for (const WqConfig &wq_config : config.wqs) {
        auto wq = std::make_unique<WqState>();
        wq->config = wq_config;
        wq->limits = {wq_config.max_transfer_size, wq_config.max_batch_size, device->nt_threshold_,
                      device->hw_.get()};
        size_t bytes = WorkQueue::bytes_for(wq_config.size);
        void *memory = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (memory == nullptr) {
            *error = "cannot allocate " + std::to_string(bytes) + " bytes for " + wq_config.name;
            return DP_ERR_NOMEM;
        }
        wq->memory = {memory, std::free};
        wq->ring = WorkQueue::format(memory, wq_config.size);
        device->wqs_.push_back(std::move(wq));
    }

    device->watch_ = std::make_unique<StallWatch>(config.total_engines());
    size_t next_cpu = 0;
    const uint64_t idle_spin_ns = uint64_t(config.idle_spin_us) * 1000;
    for (const GroupConfig &group_config : config.groups) {
        auto group = std::make_unique<GroupState>();
        for (uint32_t index : group_config.wqs) {
            device->wqs_[index]->group = group.get();
            group->wqs.push_back(device->wqs_[index].get());
        }
        // Higher priority first; stable so equal priorities keep config order.
        std::stable_sort(group->wqs.begin(), group->wqs.end(), [](WqState *a, WqState *b) {
            return a->config.priority > b->config.priority;
        });
        for (uint32_t e = 0; e < group_config.engines; ++e) {
            int cpu = config.cpus.empty() ? -1 : config.cpus[next_cpu++ % config.cpus.size()];
            device->engines_.push_back(std::make_unique<Engine>(
                group.get(), &device->spaces_, cpu, idle_spin_ns, config.idle_yield,
                config.yield_after_ns, device->watch_.get(), device->watch_->take()));
        }
        device->groups_.push_back(std::move(group));
    }
    if (config.start_engines) device->start_engines();
    DP_LOG_INFO("mover {}: {} work queue(s), {} engine(s), {} group(s), NT stores from {} bytes, "
                "run by {}",
                config.name, device->wqs_.size(), device->engines_.size(), device->groups_.size(),
                device->nt_threshold_, device->backend_);
    *out = std::move(device);
    return DP_OK;
}

Device::~Device() { stop_engines(); }

void Device::start_engines() {
    if (started_) return;
    started_ = true;
    for (auto &engine : engines_) engine->start();
}

void Device::stop_engines() {
    for (auto &engine : engines_) engine->stop();
}

uint32_t Device::relieve_held_engines() {
    uint32_t held = 0;
    if (watch_->mark_held(timing::now_ns(), &held) != 0) {
        const uint64_t idle_spin_ns = uint64_t(config_.idle_spin_us) * 1000;
        const size_t n = engines_.size();
        for (size_t i = 0; i < n; ++i) {
            Engine &e = *engines_[i];
            if (e.relieved || !e.slot()->held.load(std::memory_order_acquire)) continue;
            e.relieved = true;
            EngineSlot *slot = watch_->take();
            if (slot == nullptr) {
                DP_LOG_LIMITED(relief_log_,
                               "mover {}: an engine is held in a submitter's call past {} ms and "
                               "all {} relief engines are in use: its group has one engine fewer "
                               "until a call returns",
                               config_.name, watch_->limit_ns() / 1'000'000,
                               StallWatch::kMaxReliefs);
                continue;
            }
            DP_LOG_LIMITED(relief_log_,
                           "mover {}: engine (thread {}) held for over {} ms in a call into "
                           "submitter {}'s memory: a relief engine takes its place",
                           config_.name, e.tid(), watch_->limit_ns() / 1'000'000,
                           e.slot()->owner.load(std::memory_order_relaxed));
            engines_.push_back(std::make_unique<Engine>(e.group(), &spaces_, e.cpu(), idle_spin_ns,
                                                        config_.idle_yield,
                                                        config_.yield_after_ns, watch_.get(),
                                                        slot));
            if (started_) engines_.back()->start();
        }
    }
    // Held engines whose call returned have left their loop: join them.
    for (size_t i = 0; i < engines_.size();) {
        Engine &e = *engines_[i];
        if (!e.relieved || !e.slot()->exited.load(std::memory_order_acquire)) {
            ++i;
            continue;
        }
        e.stop();
        const EngineCounters &c = e.counters();
        for (auto [from, to] : {std::pair{&c.completed, &left_.completed},
                                {&c.failed, &left_.failed},
                                {&c.bytes, &left_.bytes},
                                {&c.lost_completions, &left_.lost_completions},
                                {&c.dropped, &left_.dropped},
                                {&c.busy_ns, &left_.busy_ns}})
            to->fetch_add(from->load(std::memory_order_relaxed), std::memory_order_relaxed);
        watch_->give_back(e.slot());
        engines_.erase(engines_.begin() + long(i));
    }
    relief_log_.flush_if_due();
    return held;
}

bool Device::engines_in_calls() const {
    for (const auto &e : engines_)
        if (e->slot()->owner.load(std::memory_order_relaxed) != 0) return true;
    return false;
}

void Device::stats(dp_mover_stats_t *out) const {
    dp_mover_stats_t s;
    std::memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    for (const auto &wq : wqs_) {
        s.submitted += wq->ring.submitted();
        s.retries += wq->retries.load(std::memory_order_relaxed);
    }
    for (const auto &engine : engines_) {
        const EngineCounters &c = engine->counters();
        s.completed += c.completed.load(std::memory_order_relaxed);
        s.failed += c.failed.load(std::memory_order_relaxed);
        s.bytes += c.bytes.load(std::memory_order_relaxed);
    }
    s.completed += left_.completed.load(std::memory_order_relaxed);
    s.failed += left_.failed.load(std::memory_order_relaxed);
    s.bytes += left_.bytes.load(std::memory_order_relaxed);
    s.num_engines = uint32_t(engines_.size());
    s.num_wqs = uint32_t(wqs_.size());
    *out = s;
}

}  // namespace deputy::mover
