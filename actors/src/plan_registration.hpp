#pragma once

// The fan-in of one plan's registration on the master (TF's RegisterGraph
// to the task of every partition) and the runs of the same signature that
// wait for it. Plain C++: the master feeds it the answers and acts on what
// it returns (test/actors/plan_registration_test.cpp).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// One plan being registered: which partitions still have to answer, the
/// tasks that could not be reached, the first other error, and the runs
/// (`Run`: whatever the master needs to start a step) that wait for it.
/// Concurrent first runs of one signature share one registration (one
/// executor per partition) instead of each registering its own.
template <class Run>
class plan_registration {
public:
  /// What an answer did to the registration.
  enum class outcome {
    /// Partitions still have to answer.
    waiting,
    /// Every partition is registered now: start the runs.
    ready,
    /// The registration failed now: fail the runs with error().
    failed,
    /// It had failed before (or was ready): nothing left to do but end
    /// what this answer registered.
    settled,
  };

  explicit plan_registration(size_t parts)
    : left_(parts), answered_(parts, false) {
    // nop
  }

  /// Another run of the plan's signature, started (or failed) with the
  /// plan.
  void wait(Run run) {
    runs_.push_back(std::move(run));
  }

  /// Partition `p`'s task registered it.
  outcome registered(size_t p) {
    return answer(p);
  }

  /// Partition `p`'s task was not up by the deadline: the registration
  /// fails once every partition has answered, naming each such task (TF's
  /// master waits for all workers before it reports them).
  outcome unreachable(size_t p, std::string why) {
    if (settled() || !fresh(p))
      return outcome::settled;
    unreachable_.push_back(std::move(why));
    return answer(p);
  }

  /// Partition `p` failed otherwise (a bad partition, a lost task, the
  /// session closed): the registration fails now with `err`.
  outcome failed(size_t p, status err) {
    if (settled() || !fresh(p))
      return outcome::settled;
    answered_[p] = true;
    error_ = std::move(err);
    failed_ = true;
    return outcome::failed;
  }

  /// Why it failed: the first hard error, or Unavailable naming every
  /// unreachable task.
  const status& error() const noexcept {
    return error_;
  }

  /// The waiting runs, handed over once.
  std::vector<Run> take_runs() {
    return std::exchange(runs_, {});
  }

  bool settled() const noexcept {
    return failed_ || left_ == 0;
  }

  /// True when it failed because tasks were not up by the deadline.
  bool timed_out() const noexcept {
    return timed_out_;
  }

private:
  bool fresh(size_t p) const {
    return p < answered_.size() && !answered_[p];
  }

  outcome answer(size_t p) {
    if (settled() || !fresh(p))
      return outcome::settled;
    answered_[p] = true;
    if (--left_ > 0)
      return outcome::waiting;
    if (unreachable_.empty())
      return outcome::ready;
    std::string list;
    for (const auto& why : unreachable_)
      list += (list.empty() ? "" : "; ") + why;
    error_ = {error_code::unavailable,
              unreachable_.size() == 1
                ? list
                : std::to_string(unreachable_.size())
                    + " tasks unreachable: " + list};
    failed_ = true;
    timed_out_ = true;
    return outcome::failed;
  }

  size_t left_;
  std::vector<bool> answered_;
  std::vector<std::string> unreachable_;
  status error_;
  bool failed_ = false;
  bool timed_out_ = false;
  std::vector<Run> runs_;
};

} // namespace actorflow
