// Writes the fuzzers' seed corpora (test/fuzz/corpus/<target>/) from real
// traffic: tensors, graphs, tensor channel frames and CAF messages encoded
// by the code that sends them, for the shapes a training step sends.
//   make_seeds DIR            (scripts/fuzz.sh --seeds runs it)

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/basp/header.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/training.hpp"
#include "actorflow/graph/wire.hpp"
#include "fuzz_targets.hpp"
#include "tensor_frame.hpp"

using namespace actorflow;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& dir, const std::string& name,
           const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream{dir / name, std::ios::binary} << bytes;
}

std::vector<std::pair<std::string, tensor>> sample_tensors() {
  tensor matrix{dtype::float32, tensor_shape{3, 4}};
  for (int i = 0; i < 12; ++i)
    static_cast<float*>(matrix.raw())[i] = 0.5f * static_cast<float>(i);
  return {{"float_3x4", matrix},
          {"int64_scalar", tensor::scalar(int64_t{20000})},
          {"int32_labels", tensor::vec(std::vector<int32_t>{3, 1, 4, 1})},
          {"bool", tensor::scalar(true)},
          {"string", tensor::vec(std::vector<std::string>{"a", "bc"})},
          {"empty", tensor{dtype::float32, tensor_shape{0, 10}}}};
}

std::string frame(uint32_t flags, uint64_t inbox, int64_t step,
                  const std::string& key, const std::string& head,
                  const std::string& data) {
  std::string out;
  byte_writer w{out};
  tensor_channel::write_prefix(w, inbox, step, key.size(), head.size(),
                               flags, data.size());
  w.raw(key.data(), key.size());
  w.raw(head.data(), head.size());
  w.raw(data.data(), data.size());
  return out;
}

template <class... Ts>
std::string caf_bytes(caf::actor_system* sys, const Ts&... xs) {
  std::vector<char> buf;
  auto save = [&](caf::binary_serializer& sink) {
    if (sink(const_cast<Ts&>(xs)...))
      throw std::runtime_error("serialization failed");
  };
  if (sys != nullptr) {
    caf::binary_serializer sink{*sys, buf};
    save(sink);
  } else {
    caf::binary_serializer sink{nullptr, buf};
    save(sink);
  }
  return {buf.begin(), buf.end()};
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds DIR\n";
    return 2;
  }
  fs::path dir{argv[1]};
  // fuzz_wire: selector byte, then the encoding.
  for (const auto& [name, t] : sample_tensors()) {
    write(dir / "wire", "tensor_" + name, '\0' + to_bytes(t));
    if (auto header = tensor_header_bytes(t); !header.empty())
      write(dir / "wire", "header_" + name, '\2' + header);
  }
  {
    graph g;
    auto as_default = g.as_default();
    auto step = create_global_step();
    auto x = placeholder(dtype::float32, tensor_shape{-1, 4}, "x");
    variable_options named_w;
    named_w.name = "w";
    variable w{tensor{dtype::float32, tensor_shape{4, 2}}, named_w};
    auto loss = reduce_mean(square(matmul(x, w.value())));
    gradient_descent_optimizer opt{0.1};
    opt.minimize(loss, &step);
    write(dir / "wire", "graph_linear", '\1' + to_bytes(g.def()));
  }
  // fuzz_tensor_frame: what a link writes.
  for (const auto& [name, t] : sample_tensors()) {
    auto header = tensor_header_bytes(t);
    auto key = "/job:ps/replica:0/task:0/device:CPU:0;0000000000000001;"
               "/job:worker/replica:0/task:0/device:CPU:0;w/read:0;0:0";
    if (header.empty())
      write(dir / "tensor_frame", "encoded_" + name,
            frame(tensor_channel::flag_encoded, 7, 42, key, to_bytes(t), ""));
    else
      write(dir / "tensor_frame", "tensor_" + name,
            frame(0, 7, 42, key, header,
                  std::string{static_cast<const char*>(t.raw()),
                              t.byte_size()}));
  }
  run_graph_request req;
  req.step_id = 42;
  req.feeds = {{0, sample_tensors()[0].second}};
  req.peer_devices = {"/job:ps/replica:0/task:0/device:CPU:0"};
  req.peer_inboxes = {"127.0.0.1:40000/3"};
  req.reply_inbox = "127.0.0.1:40001/1";
  req.part = 1;
  write(dir / "tensor_frame", "message_run_graph",
        frame(tensor_channel::flag_message, 3, 42,
              std::string{tensor_channel::run_graph_kind},
              caf_bytes(nullptr, req), ""));
  run_graph_response resp;
  resp.outputs = {{0, sample_tensors()[1].second}};
  resp.node_stats = {node_exec_stats{"MatMul", 1, 2, 3, 4, "MatMul = ..."}};
  int64_t part = 1;
  write(dir / "tensor_frame", "message_step_reply",
        frame(tensor_channel::flag_message, 1, 42,
              std::string{tensor_channel::step_reply_kind},
              caf_bytes(nullptr, part, resp), ""));
  write(dir / "tensor_frame", "ring_offer",
        frame(tensor_channel::flag_ring_offer, 0, 12345,
              "/actorflow-ring-1234-1", "", std::string(0, '\0')));
  write(dir / "tensor_frame", "sender",
        frame(tensor_channel::flag_sender, 0, 0,
              "/job:worker/replica:0/task:0", "", ""));
  // fuzz_caf_message: messages as a node's system writes them.
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::actorflow>();
  caf::actor_system sys{cfg};
  write(dir / "caf_message", "run_graph",
        caf_bytes(&sys, caf::make_message(run_graph_atom_v, req)));
  write(dir / "caf_message", "step_reply",
        caf_bytes(&sys, caf::make_message(step_reply_atom_v, int64_t{42},
                                          part, resp)));
  write(dir / "caf_message", "tensor",
        caf_bytes(&sys, caf::make_message(sample_tensors()[0].second,
                                          sample_tensors()[4].second)));
  run_step_request step;
  step.session_handle = "session-1";
  step.feed_names = {"x:0"};
  step.feed_values = {sample_tensors()[0].second};
  step.fetches = {"loss:0"};
  step.targets = {"train"};
  write(dir / "caf_message", "run_step",
        caf_bytes(&sys, caf::make_message(step)));
  // fuzz_monitor_filter: the console's requests as BASP sends them (a
  // header, then the forwarding stages and the message), and a heartbeat.
  namespace basp = caf::io::basp;
  auto basp_message = [&](uint64_t dest, const caf::message& msg) {
    std::vector<caf::strong_actor_ptr> stages;
    auto payload = caf_bytes(&sys, stages, msg);
    basp::header hdr{basp::message_type::direct_message, 0,
                     static_cast<uint32_t>(payload.size()), 1, 1, dest};
    return caf_bytes(&sys, hdr) + payload;
  };
  auto task = fuzz::monitor_filter_task_id;
  auto mon = fuzz::monitor_filter_monitor_id;
  write(dir / "monitor_filter", "get_monitor",
        basp_message(task, caf::make_message(get_monitor_atom_v)));
  write(dir / "monitor_filter", "get_stats",
        basp_message(task, caf::make_message(get_stats_atom::value)));
  write(dir / "monitor_filter", "subscribe",
        basp_message(mon, caf::make_message(monitor_subscribe_atom_v,
                                            int64_t{1000}, caf::actor{})));
  write(dir / "monitor_filter", "ping",
        basp_message(mon, caf::make_message(monitor_ping_atom_v)));
  {
    std::vector<caf::strong_actor_ptr> stages;
    auto payload = caf_bytes(&sys, stages,
                             caf::make_message(caf::sys_atom::value,
                                               caf::get_atom::value,
                                               std::string{"info"}));
    basp::header hdr{basp::message_type::direct_message,
                     basp::header::named_receiver_flag,
                     static_cast<uint32_t>(payload.size()), 1, 1,
                     static_cast<uint64_t>(caf::atom("SpawnServ"))};
    write(dir / "monitor_filter", "spawn_server_info",
          caf_bytes(&sys, hdr) + payload);
  }
  {
    // A down message for one of the monitor's own actors.
    std::string node{fuzz::monitor_filter_node};
    auto payload = node + node + caf_bytes(&sys, caf::error{});
    basp::header hdr{basp::message_type::down_message, 0,
                     static_cast<uint32_t>(payload.size()), 0, 3, 0};
    write(dir / "monitor_filter", "down", caf_bytes(&sys, hdr) + payload);
  }
  write(dir / "monitor_filter", "heartbeat",
        caf_bytes(&sys, basp::header{basp::message_type::heartbeat, 0, 0, 0,
                                     0, 0}));
  std::cout << "make_seeds: wrote " << dir << "\n";
  return 0;
}
