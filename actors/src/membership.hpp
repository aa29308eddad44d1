#pragma once

// The versioned membership of a cluster, without CAF (issue 31 §2;
// docs/DESIGN.md, "Elastic workers"): which tasks are members and where
// they listen, a version that grows with every change, and which members
// joined a running cluster (elastic) rather than being named by its
// ClusterSpec. A ClusterSpec task of a job other than "ps" that is lost
// is down: no member until it is back at its address (its address stays
// in directory(), as TF expects it back). One task (authority()) decides
// changes; every other task adopts the newest version it hears of. The
// master (membership.cpp) is the thin layer around it. Not thread-safe:
// one actor owns it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph/device_name.hpp"

namespace actorflow {

class membership {
public:
  /// "/job:J/replica:0/task:T" -> "host:port".
  using member_map = std::map<std::string, std::string>;

  membership() = default;

  /// Version 1: the ClusterSpec's tasks (static members).
  explicit membership(member_map spec)
    : spec_(std::move(spec)), members_(spec_) {
    for (auto& [name, address] : members_)
      note_index(name);
  }

  int64_t version() const noexcept {
    return version_;
  }

  /// The members taking part: the ClusterSpec's tasks that are not down,
  /// and the tasks that joined.
  const member_map& members() const noexcept {
    return members_;
  }

  /// Where every task is reached: the members and the ClusterSpec's tasks
  /// that are down (expected back at their address).
  member_map directory() const {
    auto out = members_;
    out.insert(spec_.begin(), spec_.end());
    return out;
  }

  /// True for a ClusterSpec task that is lost and not back.
  bool down(const std::string& task) const {
    return spec_.count(task) > 0 && members_.count(task) == 0;
  }

  /// True for a ClusterSpec task whose loss makes it no member until it
  /// is back: one of a job other than "ps" (a ps's loss is the business
  /// of replication, and its variables' placement names it anyway).
  bool can_go_down(const std::string& task) const {
    return spec_.count(task) > 0 && task.rfind("/job:ps/", 0) != 0;
  }

  /// True for a member that joined the running cluster.
  bool elastic(const std::string& task) const {
    return elastic_.count(task) > 0;
  }

  /// The version at which elastic member `task` joined (or this task
  /// learned of it), 0 for a static member or none.
  int64_t joined_at(const std::string& task) const {
    auto i = elastic_.find(task);
    return i == elastic_.end() ? 0 : i->second;
  }

  /// The task that decides changes: the first task of job "ps" (it holds
  /// the variables, so it outlives workers), else the first member.
  /// A ClusterSpec task stays the authority while it is down (the others
  /// wait for it, as they wait for their variables).
  std::string authority() const {
    auto all = directory();
    for (auto& [name, address] : all)
      if (name.rfind("/job:ps/", 0) == 0)
        return name;
    return all.empty() ? std::string{} : all.begin()->first;
  }

  /// Adds a member of `job` at `address` under the next index of the job
  /// (indices are never reused: a name means one incarnation); its name.
  /// Empty when `address` is a member's already (then `*existing` names
  /// it, for an idempotent retry of the same join).
  std::string join(const std::string& job, const std::string& address,
                   std::string* existing = nullptr) {
    for (auto& [name, a] : directory())
      if (a == address) {
        if (existing != nullptr)
          *existing = name;
        return {};
      }
    auto& next = next_index_[job];
    auto name = "/job:" + job + "/replica:0/task:" + std::to_string(next);
    ++next;
    members_[name] = address;
    ++version_;
    elastic_[name] = version_;
    return name;
  }

  /// Removes `task` (a joined task leaves; a ClusterSpec task is down
  /// until back()); false when it is no member.
  bool leave(const std::string& task) {
    if (members_.erase(task) == 0)
      return false;
    elastic_.erase(task);
    ++version_;
    return true;
  }

  /// A ClusterSpec task that was down is a member again, at its address;
  /// false when it was not down.
  bool back(const std::string& task) {
    if (!down(task))
      return false;
    members_[task] = spec_.at(task);
    ++version_;
    return true;
  }

  /// Takes `members` at `version` when it is newer than this one (another
  /// task's view, or the authority's broadcast); true if it did. Members
  /// the ClusterSpec does not name are elastic.
  bool adopt(int64_t version, member_map members) {
    if (version <= version_)
      return false;
    version_ = version;
    members_ = std::move(members);
    std::map<std::string, int64_t> elastic;
    for (auto& [name, address] : members_) {
      note_index(name);
      if (spec_.count(name) == 0)
        elastic[name] = elastic_.count(name) > 0 ? elastic_[name] : version;
    }
    elastic_ = std::move(elastic);
    return true;
  }

  /// The members as a flat list (name, address, name, address, ...), as
  /// messages carry them.
  std::vector<std::string> flat() const {
    std::vector<std::string> out;
    for (auto& [name, address] : members_) {
      out.push_back(name);
      out.push_back(address);
    }
    return out;
  }

  /// The map of a flat list; nullopt for an odd count or a name that is
  /// no task name.
  static std::optional<member_map> from_flat(const std::vector<std::string>& xs) {
    if (xs.size() % 2 != 0)
      return std::nullopt;
    member_map out;
    for (size_t i = 0; i < xs.size(); i += 2) {
      device_name d;
      if (!device_name::parse(xs[i], d).ok() || !d.job || !d.task)
        return std::nullopt;
      out[xs[i]] = xs[i + 1];
    }
    return out;
  }

private:
  void note_index(const std::string& name) {
    device_name d;
    if (!device_name::parse(name, d).ok() || !d.job || !d.task)
      return;
    auto& next = next_index_[*d.job];
    if (*d.task >= next)
      next = *d.task + 1;
  }

  int64_t version_ = 1;
  member_map spec_;
  member_map members_;
  /// Elastic members and the version each joined at.
  std::map<std::string, int64_t> elastic_;
  /// Per job: the index the next joiner gets.
  std::map<std::string, int> next_index_;
};

} // namespace actorflow
