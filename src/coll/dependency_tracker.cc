#include "coll/dependency_tracker.h"

#include <limits>

namespace deputy::coll {

DependencyTracker::DependencyTracker() {
    // One span covering every offset: nothing written, nothing read yet.
    for (SpanMap &map : spans_) map.emplace(0, Span{std::numeric_limits<size_t>::max(), kNone, {}});
}

DependencyTracker::SpanMap::iterator DependencyTracker::split(SpanMap &map, size_t at) {
    auto it = std::prev(map.upper_bound(at));  // the span containing `at`
    if (it->first == at) return it;
    Span tail = it->second;  // same writer and readers, they touched both halves
    it->second.end = at;
    return map.emplace_hint(std::next(it), at, std::move(tail));
}

void DependencyTracker::access(StepId step, std::span<const Region> reads,
                               std::span<const Region> writes, std::vector<StepId> &deps) {
    // All conflicts are collected before anything is recorded, so a step that
    // reads and writes the same bytes (an in-place reduce) does not wait for
    // itself.
    for (const Region &r : reads) {
        if (r.empty()) continue;
        const SpanMap &map = spans_[static_cast<int>(r.buffer)];
        for (auto it = std::prev(map.upper_bound(r.offset)); it != map.end() && it->first < r.end();
             ++it) {
            if (it->second.writer != kNone) deps.push_back(it->second.writer);
        }
    }
    for (const Region &w : writes) {
        if (w.empty()) continue;
        const SpanMap &map = spans_[static_cast<int>(w.buffer)];
        for (auto it = std::prev(map.upper_bound(w.offset)); it != map.end() && it->first < w.end();
             ++it) {
            if (it->second.writer != kNone) deps.push_back(it->second.writer);
            deps.insert(deps.end(), it->second.readers.begin(), it->second.readers.end());
        }
    }

    for (const Region &r : reads) {
        if (r.empty()) continue;
        SpanMap &map = spans_[static_cast<int>(r.buffer)];
        split(map, r.end());
        for (auto it = split(map, r.offset); it != map.end() && it->first < r.end(); ++it) {
            it->second.readers.push_back(step);
        }
    }
    // Writes last: the new writer supersedes every earlier access, including
    // this step's own reads (a later writer reaches them through this step).
    for (const Region &w : writes) {
        if (w.empty()) continue;
        SpanMap &map = spans_[static_cast<int>(w.buffer)];
        split(map, w.end());
        auto first = split(map, w.offset);
        auto last = first;
        while (last != map.end() && last->first < w.end()) ++last;
        map.erase(std::next(first), last);
        first->second = Span{w.end(), step, {}};
    }
}

}  // namespace deputy::coll
