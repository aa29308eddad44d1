// Seed 001: a ClusterSpec of two ps and two worker tasks, pinning of
// variables, and a reduce sum split across the two workers. The four tasks
// are `actorflow-node` processes on loopback ports (the seed's
// clustered-tensorflow-* pods); this program is the client.

#include <iostream>
#include <string>
#include <vector>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/local_cluster.hpp"

using namespace actorflow;

namespace {

// Python's repr of a list of strings: ['a', 'b'].
std::string py_list(const std::vector<std::string>& xs) {
  std::string result = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    result += (i > 0 ? ", '" : "'") + xs[i] + "'";
  return result + "]";
}

std::string py_str(const std::string& x) {
  return "'" + x + "'";
}

void cell(int n) {
  std::cout << "In [" << n << "]:" << std::endl;
}

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 001: ClusterSpec, variable pinning and a reduce sum split across\n"
    "two workers (four node processes)."};
  if (!flags.parse(argc, argv))
    return 0;
  auto node = flags.node_binary();
  support::local_cluster nodes{node, {{"ps", 2}, {"worker", 2}}};

  // Cells 4-7: the spec, as the seed builds it from a dict literal (here
  // its JSON form, with our loopback ports).
  cell(6);
  auto cluster = cluster_spec::from_json(nodes.spec().to_json());
  std::cout << to_string(cluster.as_dict()) << '\n' << std::endl;

  cell(8);
  std::cout << py_list(cluster.jobs()) << '\n' << std::endl;

  cell(9);
  for (const auto& job : cluster.jobs()) {
    std::vector<std::string> tasks;
    for (const auto& t : cluster.job_tasks(job))
      tasks.push_back(t.value_or(""));
    std::cout << job << ' ' << py_list(tasks) << '\n';
  }
  std::cout << std::endl;

  // Cells 10-12: device names of the tasks.
  std::vector<std::string> workers;
  for (int i = 0; i < cluster.num_tasks("worker"); ++i)
    workers.push_back("/job:worker/task:" + std::to_string(i));
  std::vector<std::string> param_servers;
  for (int i = 0; i < cluster.num_tasks("ps"); ++i)
    param_servers.push_back("/job:ps/task:" + std::to_string(i));
  cell(11);
  std::cout << py_list(workers) << '\n' << std::endl;
  cell(12);
  std::cout << py_list(param_servers) << '\n' << std::endl;

  // Cell 13: a variable outside any device scope has no device.
  cell(13);
  variable l{"local_cpu"};
  std::cout << py_str(l.device()) << '\n' << std::endl;

  // Cell 14: the innermost tf.device wins; the last one built is on ps 1.
  cell(14);
  variable v;
  for (const auto& ps : param_servers) {
    device_scope on_ps{ps};
    v = variable{"my_var"};
  }
  std::cout << py_str(v.device()) << '\n' << std::endl;

  cell(15);
  std::cout << v.to_proto().to_string() << std::endl;

  // Cell 17: the reduce sum. Placeholder and variable go through
  // replica_device_setter; the split and the final sum are unplaced, so
  // they land on the cluster's first device by name, /job:ps/task:0,
  // whichever task is the master.
  cell(17);
  graph g;
  output final_result;
  output input_array;
  std::vector<std::string> reduce_names;
  {
    auto as_default = g.as_default();
    std::vector<output> all_reduce;
    {
      device_scope setter{replica_device_setter(cluster)};
      input_array = placeholder(dtype::int32, {-1});
      variable unused_result{0};
    }
    auto splitted = split(input_array, static_cast<int>(workers.size()));
    for (size_t idx = 0; idx < workers.size(); ++idx) {
      device_scope on_worker{workers[idx]};
      std::cout << workers[idx] << '\n';
      auto local_reduce = reduce_sum(splitted[idx]);
      reduce_names.push_back(local_reduce.op().name());
      local_reduce = print(splitted[idx], {local_reduce}, "portion is");
      all_reduce.push_back(local_reduce);
    }
    final_result = reduce_sum(stack(all_reduce));
  }
  std::cout << std::endl;

  // Cell 18 (the seed's commented-out variant): run it on worker 0 with
  // a batch of 1000 ones. Each worker's tf.Print writes "portion is[500]"
  // to that node's stderr.
  cell(19);
  const int batch_size = 1000;
  session sess{nodes.target("worker", 0), {}, &g};
  run_options options;
  options.trace_level = run_options::full_trace;
  run_metadata metadata;
  auto ones = tensor::vec(std::vector<int32_t>(batch_size, 1));
  auto result = sess.run(final_result, {{input_array, ones}}, options,
                         &metadata);
  std::cout << result.to_string() << '\n' << std::endl;

  // Where the partial sums and the final sum ran, from the trace.
  std::cout << "# placement of the reductions:\n";
  reduce_names.push_back(final_result.op().name());
  for (const auto& device : metadata.stats.dev_stats)
    for (const auto& stats : device.node_stats)
      for (const auto& name : reduce_names)
        if (stats.node_name == name)
          std::cout << name << ": " << device.device << '\n';
  std::cout << std::endl;

  // We can also inspect the device of any node.
  cell(20);
  std::cout << py_str(final_result.device()) << std::endl;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed001_cluster_reduce",
                        [&] { return run(argc, argv); });
}
