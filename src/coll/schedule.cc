#include "coll/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>

namespace deputy::coll {
namespace {

constexpr const char *kStepKindNames[] = {"send", "recv", "reduce", "copy"};
static_assert(std::size(kStepKindNames) == static_cast<size_t>(StepKind::copy) + 1);

std::string region_text(const Region &r) {
    return fmt::format("{}[{},+{})", buffer_name(r.buffer), r.offset, r.bytes);
}

}  // namespace

const char *step_kind_name(StepKind kind) {
    const auto i = static_cast<size_t>(kind);
    return i < std::size(kStepKindNames) ? kStepKindNames[i] : "unknown";
}

size_t Schedule::bytes_sent() const {
    size_t total = 0;
    for (const Step &s : steps) {
        if (s.kind == StepKind::send) total += s.src.bytes;
    }
    return total;
}

size_t Schedule::messages_sent() const {
    size_t total = 0;
    for (const Step &s : steps) total += s.kind == StepKind::send ? 1 : 0;
    return total;
}

std::string describe(const Schedule &schedule, StepId id) {
    const Step &s = schedule.steps[id];
    std::string text = fmt::format("#{} {}", id, step_kind_name(s.kind));
    switch (s.kind) {
        case StepKind::send:
            text += fmt::format(" peer={} tag={} src={}", s.peer, s.tag, region_text(s.src));
            break;
        case StepKind::recv:
            text += fmt::format(" peer={} tag={} dst={}", s.peer, s.tag, region_text(s.dst));
            break;
        case StepKind::reduce:
            text += fmt::format(" {} {} dst={} a={} b={}", dp_dtype_name(s.dtype), dp_op_name(s.op),
                                region_text(s.dst), region_text(s.src), region_text(s.src2));
            break;
        case StepKind::copy:
            text += fmt::format(" dst={} src={}", region_text(s.dst), region_text(s.src));
            break;
    }
    const auto deps = schedule.dependencies(id);
    if (!deps.empty()) text += fmt::format(" after {}", fmt::join(deps, ","));
    return text;
}

std::string describe(const Schedule &schedule) {
    std::string text = fmt::format(
        "{} rank {}/{}: {} steps, buffers source={} destination={} "
        "scratch={}\n",
        schedule.algorithm, schedule.rank, schedule.size, schedule.steps.size(),
        schedule.buffer_bytes[0], schedule.buffer_bytes[1], schedule.buffer_bytes[2]);
    for (StepId i = 0; i < schedule.steps.size(); ++i) text += describe(schedule, i) + "\n";
    return text;
}

}  // namespace deputy::coll
