// Scheduling policy: the order in which waiting sequences are admitted and the order in which
// running ones are preempted. The scheduler holds one; a new policy is one class here.
//
// The default, PriorityPolicy:
//   admission   higher priority first, then arrival (first come, first served);
//   victim      lower priority first, then the most recently admitted (the least work lost);
//   priority preemption (when SchedulerConfig::priority_preemption is on): a waiting sequence may
//               displace a running one only of strictly lower priority.
#pragma once

#include "sched/sequence.hpp"

namespace infer {

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  // A strict weak order: true when a is admitted before b. Must depend only on fields that do not
  // change while a sequence waits (priority, arrival, id).
  virtual bool admits_before(const SchedSequence& a, const SchedSequence& b) const = 0;
  // A strict weak order over running sequences: true when a is preempted before b.
  virtual bool preempts_before(const SchedSequence& a, const SchedSequence& b) const = 0;
  // Whether `waiting`, which cannot be admitted for lack of blocks or sequence slots, may preempt
  // the running sequence `victim` (asked only with priority preemption on).
  virtual bool may_displace(const SchedSequence& waiting, const SchedSequence& victim) const = 0;
};

class PriorityPolicy final : public SchedulerPolicy {
 public:
  bool admits_before(const SchedSequence& a, const SchedSequence& b) const override;
  bool preempts_before(const SchedSequence& a, const SchedSequence& b) const override;
  bool may_displace(const SchedSequence& waiting, const SchedSequence& victim) const override;
};

}  // namespace infer
