#include "sched/policy.hpp"

namespace infer {

bool PriorityPolicy::admits_before(const SchedSequence& a, const SchedSequence& b) const {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.arrival != b.arrival) return a.arrival < b.arrival;
  return a.id < b.id;
}

bool PriorityPolicy::preempts_before(const SchedSequence& a, const SchedSequence& b) const {
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.admitted > b.admitted;
}

bool PriorityPolicy::may_displace(const SchedSequence& waiting, const SchedSequence& victim) const {
  return victim.priority < waiting.priority;
}

}  // namespace infer
