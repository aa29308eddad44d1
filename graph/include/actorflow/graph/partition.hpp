#pragma once

#include <map>
#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow {

/// The rendezvous key of one cut edge in one step: unique per (producer
/// device, consumer device, tensor).
std::string rendezvous_key(const std::string& send_device,
                           const std::string& recv_device,
                           const std::string& tensor);

/// Splits a placed graph (every node has a full device) into one graph per
/// device (TensorFlow's Partition). Each data edge between devices becomes
/// a `_Send` on the producer's device and a `_Recv` on the consumer's (one
/// pair per tensor and consumer device); a control edge between devices
/// becomes a `_Send`/`_Recv` of an empty tensor. Attributes `tensor_name`
/// (the rendezvous key), `send_device`, `recv_device`. Never fails on a
/// placed graph; InvalidArgument if a node lacks a device.
status partition(const graph_def& placed,
                 std::map<std::string, graph_def>& partitions);

} // namespace actorflow
