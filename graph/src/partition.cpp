#include "actorflow/graph/partition.hpp"

#include <set>
#include <unordered_map>

namespace actorflow {

std::string rendezvous_key(const std::string& send_device,
                           const std::string& recv_device,
                           const std::string& tensor) {
  return send_device + ";" + recv_device + ";" + tensor;
}

namespace {

std::string flat_name(std::string s) {
  for (auto& c : s)
    if (c == ':' || c == '/' || c == '^')
      c = '_';
  return s;
}

} // namespace

status partition(const graph_def& placed,
                 std::map<std::string, graph_def>& partitions) {
  partitions.clear();
  std::unordered_map<std::string, const node_def*> by_name;
  for (auto& n : placed.nodes) {
    if (n.device.empty())
      return invalid_argument("partition: node '" + n.name
                              + "' has no assigned device");
    by_name.emplace(n.name, &n);
    partitions[n.device].seed = placed.seed;
  }
  // One Send/Recv pair per (tensor, consumer device).
  std::set<std::pair<std::string, std::string>> sent;
  for (auto& n : placed.nodes) {
    auto copy = n;
    auto& dst = n.device;
    for (auto& in : copy.inputs) {
      auto ref = parse_input(in);
      auto i = by_name.find(ref.node);
      if (i == by_name.end())
        return invalid_argument("partition: node '" + n.name
                                + "' has an input from unknown node '"
                                + ref.node + "'");
      auto& src = i->second->device;
      if (src == dst)
        continue;
      auto tensor = ref.control ? "^" + ref.node
                                : tensor_name(ref.node, ref.index);
      auto key = rendezvous_key(src, dst, tensor);
      auto recv_name = "_recv_" + flat_name(tensor);
      if (sent.emplace(tensor, dst).second) {
        node_def send;
        send.name = "_send_" + flat_name(tensor) + "_to_"
                    + flat_name(dst.substr(1));
        send.op = "_Send";
        send.device = src;
        send.inputs.push_back(ref.control ? in
                                          : input_name(ref.node, ref.index));
        send.attrs["tensor_name"] = key;
        send.attrs["send_device"] = src;
        send.attrs["recv_device"] = dst;
        partitions[src].nodes.push_back(std::move(send));
        node_def recv;
        recv.name = recv_name;
        recv.op = "_Recv";
        recv.device = dst;
        recv.attrs["tensor_name"] = key;
        recv.attrs["send_device"] = src;
        recv.attrs["recv_device"] = dst;
        recv.attrs["client_terminated"] = false;
        partitions[dst].nodes.push_back(std::move(recv));
      }
      in = ref.control ? "^" + recv_name : recv_name;
    }
    partitions[dst].nodes.push_back(std::move(copy));
  }
  return {};
}

} // namespace actorflow
