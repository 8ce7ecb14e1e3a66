#include "coll/validate.h"
#include "mover/names.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

namespace deputy::coll {
namespace {

dp_status_t fail(std::string *error, std::string message) {
    if (error != nullptr) *error = std::move(message);
    return DP_ERR_INVALID;
}

bool inside(const Schedule &s, const Region &r) {
    const auto b = static_cast<size_t>(r.buffer);
    if (b >= kBufferCount) return false;
    return r.offset <= s.buffer_bytes[b] && r.bytes <= s.buffer_bytes[b] - r.offset;
}

// Equal, or disjoint: the two shapes a reduce or copy operand may have.
bool equal_or_disjoint(const Region &a, const Region &b) {
    return a == b || !overlaps(a, b);
}

std::string check_step(const Schedule &s, StepId id) {
    const Step &step = s.steps[id];
    const auto regions = {step.dst, step.src, step.src2};
    for (const Region &r : regions) {
        if (!inside(s, r)) return "a region lies outside its buffer";
    }
    if (step.kind != StepKind::send && step.dst.buffer == BufferId::source && !step.dst.empty()) {
        return "writes the caller's source buffer";
    }
    for (StepId d : s.dependencies(id)) {
        if (d >= id) return fmt::format("depends on step {}, which is not earlier", d);
    }
    switch (step.kind) {
        case StepKind::send:
        case StepKind::recv:
            if (step.peer < 0 || step.peer >= s.size) return "peer outside the team";
            if (step.peer == s.rank) return "a message to itself (use copy)";
            break;
        case StepKind::reduce: {
            if (step.dtype < 0 || step.dtype >= DP_DTYPE_COUNT) return "unknown dtype";
            if (step.op < 0 || step.op >= DP_OP_COUNT) return "unknown op";
            if (!mover::op_applies(unsigned(step.dtype), unsigned(step.op)))
                return "an op that does not apply to the dtype";
            const size_t element = dp_dtype_size(step.dtype);
            if (step.src.bytes != step.dst.bytes || step.src2.bytes != step.dst.bytes) {
                return "operands of different lengths";
            }
            if (step.dst.bytes % element != 0) return "length not a whole number of elements";
            if (!equal_or_disjoint(step.dst, step.src) || !equal_or_disjoint(step.dst, step.src2)) {
                return "the result partly overlaps an operand";
            }
            break;
        }
        case StepKind::copy:
            if (step.src.bytes != step.dst.bytes) return "source and destination lengths differ";
            if (overlaps(step.src, step.dst)) return "source and destination overlap";
            break;
    }
    return {};
}

// ancestors[i] = the set of steps step i transitively waits for.
class Reachability {
  public:
    explicit Reachability(const Schedule &s)
        : words_((s.steps.size() + 63) / 64), bits_(s.steps.size() * words_, 0) {
        for (StepId i = 0; i < s.steps.size(); ++i) {
            uint64_t *mine = row(i);
            for (StepId d : s.dependencies(i)) {
                const uint64_t *theirs = row(d);
                for (size_t w = 0; w < words_; ++w) mine[w] |= theirs[w];
                mine[d / 64] |= uint64_t{1} << (d % 64);
            }
        }
    }
    // Whether `later` waits, directly or not, for `earlier`.
    bool waits_for(StepId later, StepId earlier) const {
        return (row(later)[earlier / 64] >> (earlier % 64) & 1u) != 0;
    }

  private:
    uint64_t *row(StepId i) { return bits_.data() + i * words_; }
    const uint64_t *row(StepId i) const { return bits_.data() + i * words_; }
    size_t words_;
    std::vector<uint64_t> bits_;
};

struct Access {
    Region region;
    StepId step;
    bool write;
};

}  // namespace

dp_status_t check_schedule(const Schedule &s, std::string *error) {
    if (s.size < 1 || s.rank < 0 || s.rank >= s.size) return fail(error, "rank outside the team");
    if (s.dependency_list.size() > UINT32_MAX) return fail(error, "too many dependencies");
    for (StepId i = 0; i < s.steps.size(); ++i) {
        const Step &step = s.steps[i];
        if (uint64_t{step.first_dependency} + step.dependency_count > s.dependency_list.size()) {
            return fail(error, fmt::format("{}: dependencies out of range", describe(s, i)));
        }
        std::string problem = check_step(s, i);
        if (!problem.empty()) return fail(error, fmt::format("{}: {}", describe(s, i), problem));
    }
    // Messages with the same direction, peer and tag must be ordered, or
    // which send matches which recv would depend on timing.
    std::optional<Reachability> reach;  // built only if some tag repeats
    std::map<std::tuple<StepKind, int, uint32_t>, StepId> last;
    for (StepId i = 0; i < s.steps.size(); ++i) {
        const Step &step = s.steps[i];
        if (!step.is_message()) continue;
        auto [it, fresh] = last.try_emplace({step.kind, step.peer, step.tag}, i);
        if (!fresh) {
            if (!reach) reach.emplace(s);
            if (!reach->waits_for(i, it->second)) {
                return fail(error, fmt::format("{} and {}: same peer and tag but unordered",
                                               describe(s, it->second), describe(s, i)));
            }
            it->second = i;
        }
    }
    return DP_OK;
}

dp_status_t check_races(const Schedule &s, std::string *error) {
    std::vector<Access> accesses;
    for (StepId i = 0; i < s.steps.size(); ++i) {
        const Step &step = s.steps[i];
        switch (step.kind) {
            case StepKind::send:
                accesses.push_back({step.src, i, false});
                break;
            case StepKind::recv:
                accesses.push_back({step.dst, i, true});
                break;
            case StepKind::reduce:
                accesses.push_back({step.src, i, false});
                accesses.push_back({step.src2, i, false});
                accesses.push_back({step.dst, i, true});
                break;
            case StepKind::copy:
                accesses.push_back({step.src, i, false});
                accesses.push_back({step.dst, i, true});
                break;
        }
    }
    std::erase_if(accesses, [](const Access &a) { return a.region.empty(); });
    std::sort(accesses.begin(), accesses.end(), [](const Access &a, const Access &b) {
        return std::tie(a.region.buffer, a.region.offset) <
               std::tie(b.region.buffer, b.region.offset);
    });
    const Reachability reach(s);
    // Sweep: an access can only overlap later-sorted accesses that start
    // before it ends.
    for (size_t x = 0; x < accesses.size(); ++x) {
        const Access &a = accesses[x];
        for (size_t y = x + 1; y < accesses.size(); ++y) {
            const Access &b = accesses[y];
            if (b.region.buffer != a.region.buffer || b.region.offset >= a.region.end()) break;
            if (a.step == b.step || (!a.write && !b.write)) continue;
            const StepId earlier = std::min(a.step, b.step);
            const StepId later = std::max(a.step, b.step);
            if (!reach.waits_for(later, earlier)) {
                return fail(error, fmt::format("race: {} and {} touch {} bytes [{}, {}) unordered",
                                               describe(s, earlier), describe(s, later),
                                               buffer_name(b.region.buffer), b.region.offset,
                                               std::min(a.region.end(), b.region.end())));
            }
        }
    }
    return DP_OK;
}

}  // namespace deputy::coll
