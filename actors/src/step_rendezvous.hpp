#pragma once

// Private to actors/: where one step's `_Recv` nodes and the tensors sent
// to them meet in an executor (TF's per-step Rendezvous): whichever comes
// first waits for the other. Plain C++ (test/actors/step_rendezvous_test.cpp).

#include <optional>
#include <string>
#include <unordered_map>

#include "actorflow/graph/tensor.hpp"

namespace actorflow {

class step_rendezvous {
public:
  using tensors = std::unordered_map<std::string, tensor>;

  /// The Recv of node `node` for `key` runs: the tensor if it came
  /// already (taken from here), else nullopt and the Recv waits for it.
  std::optional<tensor> recv(const std::string& key, int node) {
    if (auto i = arrived_.find(key); i != arrived_.end()) {
      auto value = std::move(i->second);
      arrived_.erase(i);
      return value;
    }
    waiting_.emplace(key, node);
    return std::nullopt;
  }

  /// The tensor for `key` came: the node of the Recv that waited for it
  /// (which no longer waits; `value` stays the caller's, for that Recv),
  /// else nullopt and `value` is kept (moved from) until its Recv runs. A
  /// second tensor for a key whose first still waits is dropped: a step
  /// sends each key once.
  std::optional<int> send(const std::string& key, tensor& value) {
    if (auto w = waiting_.find(key); w != waiting_.end()) {
      auto node = w->second;
      waiting_.erase(w);
      return node;
    }
    arrived_.emplace(key, std::move(value));
    return std::nullopt;
  }

  /// Tensors that came before the step started here wait for their Recvs.
  void adopt(tensors early) {
    if (arrived_.empty())
      arrived_ = std::move(early);
    else
      arrived_.merge(early);
  }

  size_t waiting_recvs() const noexcept {
    return waiting_.size();
  }

  size_t waiting_tensors() const noexcept {
    return arrived_.size();
  }

private:
  std::unordered_map<std::string, int> waiting_;
  tensors arrived_;
};

} // namespace actorflow
