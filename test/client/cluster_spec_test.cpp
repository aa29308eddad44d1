// ClusterSpec: tf_semantics §1, cases 1-12 (TypeError/ValueError cases as
// JSON and constructor input errors), the ClusterDef text of seed 002, and
// replica_device_setter(cluster) (§5, cases 39, 44 and 46).

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/device_setter.hpp"

using namespace actorflow;

namespace {

using dense = std::map<std::string, std::vector<std::string>>;
using sparse = std::map<std::string, std::map<int, std::string>>;

cluster_spec ps_worker() {
  return cluster_spec{dense{{"ps", {"ps0:2222", "ps1:2222"}},
                            {"worker", {"w0:2222", "w1:2222", "w2:2222"}}}};
}

// The error an expression throws as op_error, checked to be
// InvalidArgument; "" if it does not throw.
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::invalid_argument);
    return e.get_status().message();
  }
  return {};
}

std::string json_error(std::string_view text) {
  return invalid_argument_of([&] { cluster_spec::from_json(text); });
}

node_def variable(std::string name) {
  node_def node;
  node.name = std::move(name);
  node.op = "VariableV2";
  return node;
}

node_def add() {
  node_def node;
  node.name = "add";
  node.op = "Add";
  return node;
}

} // namespace

TEST_CASE("ClusterDef of a dense cluster (case 1)") {
  CHECK(ps_worker().as_cluster_def()
        == "job {\n"
           "  name: \"ps\"\n"
           "  tasks {\n"
           "    value: \"ps0:2222\"\n"
           "  }\n"
           "  tasks {\n"
           "    key: 1\n"
           "    value: \"ps1:2222\"\n"
           "  }\n"
           "}\n"
           "job {\n"
           "  name: \"worker\"\n"
           "  tasks {\n"
           "    value: \"w0:2222\"\n"
           "  }\n"
           "  tasks {\n"
           "    key: 1\n"
           "    value: \"w1:2222\"\n"
           "  }\n"
           "  tasks {\n"
           "    key: 2\n"
           "    value: \"w2:2222\"\n"
           "  }\n"
           "}\n");
}

TEST_CASE("ClusterDef text exactly as seed 002 prints it") {
  cluster_spec cluster{dense{
    {"ps", {"ps0.example.com:2222", "ps1.example.com:2222"}},
    {"worker",
     {"worker0.example.com:2222", "worker1.example.com:2222",
      "worker2.example.com:2222"}}}};
  // Seed 002's REPL output of cluster.as_cluster_def(), line for line.
  const char* seed = R"(job {
  name: "ps"
  tasks {
    value: "ps0.example.com:2222"
  }
  tasks {
    key: 1
    value: "ps1.example.com:2222"
  }
}
job {
  name: "worker"
  tasks {
    value: "worker0.example.com:2222"
  }
  tasks {
    key: 1
    value: "worker1.example.com:2222"
  }
  tasks {
    key: 2
    value: "worker2.example.com:2222"
  }
}
)";
  CHECK(cluster.as_cluster_def() == seed);
  // The rest of the seed's session.
  CHECK(cluster.jobs() == std::vector<std::string>{"ps", "worker"});
  CHECK(actorflow::to_string(cluster.as_dict())
        == "{'ps': ['ps0.example.com:2222', 'ps1.example.com:2222'], "
           "'worker': ['worker0.example.com:2222', "
           "'worker1.example.com:2222', 'worker2.example.com:2222']}");
  CHECK(cluster.job_tasks("worker")
        == std::vector<std::optional<std::string>>{
          "worker0.example.com:2222", "worker1.example.com:2222",
          "worker2.example.com:2222"});
  CHECK(cluster.num_tasks("worker") == 3);
  CHECK(cluster.task_address("worker", 2) == "worker2.example.com:2222");
  CHECK(cluster.task_indices("worker") == std::vector<int>{0, 1, 2});
}

TEST_CASE("round trips give identical ClusterDefs (case 2)") {
  auto spec = ps_worker();
  auto def = spec.as_cluster_def();
  cluster_spec copy{spec};
  CHECK(copy.as_cluster_def() == def);
  cluster_spec from_dict{spec.as_dict()};
  CHECK(from_dict == spec);
  CHECK(from_dict.as_cluster_def() == def);
  auto from_json = cluster_spec::from_json(spec.to_json());
  CHECK(from_json == spec);
  CHECK(from_json.as_cluster_def() == def);
}

TEST_CASE("a job without tasks (case 3)") {
  cluster_spec spec{dense{{"ps", {"ps0:2222", "ps1:2222"}}, {"worker", {}}}};
  CHECK_THAT(spec.as_cluster_def(),
             Catch::EndsWith("job {\n  name: \"worker\"\n}\n"));
  auto dict = spec.as_dict();
  REQUIRE(dict.count("worker") == 1);
  auto* tasks = std::get_if<std::map<int, std::string>>(&dict["worker"]);
  REQUIRE(tasks != nullptr);
  CHECK(tasks->empty());
  CHECK(spec.num_tasks("worker") == 0);
  CHECK(spec.job_tasks("worker").empty());
  CHECK(spec.to_string()
        == "ClusterSpec({'ps': ['ps0:2222', 'ps1:2222'], 'worker': {}})");
  CHECK(cluster_spec::from_json(spec.to_json()) == spec);
}

TEST_CASE("a sparse job (case 4)") {
  std::map<int, std::string> tasks{{0, "s0:2222"}, {3, "s3:2222"}};
  cluster_spec spec{sparse{{"sparse", tasks}}};
  CHECK(spec.num_tasks("sparse") == 2);
  CHECK(spec.task_indices("sparse") == std::vector<int>{0, 3});
  CHECK(spec.job_tasks("sparse")
        == std::vector<std::optional<std::string>>{"s0:2222", std::nullopt,
                                                   std::nullopt, "s3:2222"});
  CHECK(spec.task_address("sparse", 3) == "s3:2222");
  CHECK(invalid_argument_of([&] { spec.task_address("sparse", 2); })
        == "No task with index 2 in job 'sparse'");
  CHECK_FALSE(spec.has_task("sparse", 2));
  CHECK(spec.has_task("sparse", 3));
  CHECK_FALSE(spec.has_task("nope", 0));
  auto dict = spec.as_dict();
  CHECK(std::get<std::map<int, std::string>>(dict["sparse"]) == tasks);
  CHECK(spec.to_string()
        == "ClusterSpec({'sparse': {0: 's0:2222', 3: 's3:2222'}})");
  CHECK(spec.as_cluster_def()
        == "job {\n  name: \"sparse\"\n  tasks {\n    value: \"s0:2222\"\n"
           "  }\n  tasks {\n    key: 3\n    value: \"s3:2222\"\n  }\n}\n");
  auto json = spec.to_json();
  CHECK(json == R"({"sparse":{"0":"s0:2222","3":"s3:2222"}})");
  CHECK(cluster_spec::from_json(json) == spec);
}

TEST_CASE("unknown jobs are InvalidArgument (case 5)") {
  auto spec = ps_worker();
  auto expected = "No such job in cluster: 'unknown'";
  CHECK(invalid_argument_of([&] { spec.num_tasks("unknown"); }) == expected);
  CHECK(invalid_argument_of([&] { spec.task_indices("unknown"); })
        == expected);
  CHECK(invalid_argument_of([&] { spec.job_tasks("unknown"); }) == expected);
  CHECK(invalid_argument_of([&] { spec.task_address("unknown", 0); })
        == expected);
}

TEST_CASE("dense and sparse specs compare equal (case 6)") {
  CHECK(cluster_spec{sparse{{"job", {{0, "host:2222"}}}}}
        == cluster_spec{dense{{"job", {"host:2222"}}}});
  CHECK(cluster_spec::from_json(R"({"job": {"0": "host:2222"}})")
        == cluster_spec::from_json(R"({"job": ["host:2222"]})"));
}

TEST_CASE("unequal specs (case 7)") {
  CHECK_FALSE(cluster_spec{} == cluster_spec{dense{{"job", {"host:2223"}}}});
  CHECK_FALSE(cluster_spec{dense{{"job1", {"host:2222"}}}}
              == cluster_spec{dense{{"job2", {"host:2222"}}}});
  CHECK_FALSE(cluster_spec{dense{{"job", {"host:2222", "host:2223"}}}}
              == cluster_spec{dense{{"job", {"host:2223", "host:2222"}}}});
}

TEST_CASE("str(ClusterSpec) (case 8)") {
  cluster_spec spec{
    dense{{"ps", {"ps0:1111"}}, {"worker", {"worker0:3333", "worker1:4444"}}}};
  CHECK(spec.to_string()
        == "ClusterSpec({'ps': ['ps0:1111'], 'worker': ['worker0:3333', "
           "'worker1:4444']})");
  std::ostringstream out;
  out << spec;
  CHECK(out.str() == spec.to_string());
  CHECK(cluster_spec{}.to_string() == "ClusterSpec({})");
  // Python's repr picks double quotes around a single quote.
  CHECK(cluster_spec{dense{{"j", {"it's"}}}}.to_string()
        == "ClusterSpec({'j': [\"it's\"]})");
}

TEST_CASE("input that is not a dict of lists or dicts (case 9)") {
  CHECK_THAT(json_error(R"("ps0:2222")"),
             Catch::Contains("must be a dictionary mapping"));
  auto msg = json_error(R"({"ps": "ps0:2222"})");
  CHECK_THAT(msg, Catch::Contains("The tasks for job 'ps' must be a list or "
                                  "a dictionary"));
  CHECK_THAT(json_error(R"({"ps": 2222})"), Catch::Contains("job 'ps'"));
  CHECK_THAT(json_error(R"({"ps": null})"), Catch::Contains("job 'ps'"));
  CHECK_THAT(json_error("[1, 2]"), Catch::Contains("[1, 2]"));
  auto garbage = json_error("{ps: [");
  CHECK_THAT(garbage, Catch::Contains("does not parse"));
  CHECK_THAT(garbage, Catch::Contains("{ps: ["));
}

TEST_CASE("task keys go through int() (case 10)") {
  auto msg = json_error(R"({"w": {"a": "h:1"}})");
  CHECK_THAT(msg, Catch::Contains("invalid literal for int() with base 10: "
                                  "'a'"));
  CHECK_THAT(msg, Catch::Contains("job 'w'"));
  auto spec = cluster_spec::from_json(R"({"w": {"1": "h:1"}})");
  CHECK(spec.task_indices("w") == std::vector<int>{1});
  CHECK(spec.task_address("w", 1) == "h:1");
  CHECK(cluster_spec::from_json(R"({"w": {" 2": "h:2"}})").has_task("w", 2));
  CHECK_THAT(json_error(R"({"w": {"-1": "h:1"}})"),
             Catch::Contains("must not be negative"));
  CHECK_THAT(json_error(R"({"w": {"1.5": "h:1"}})"),
             Catch::Contains("'1.5'"));
  CHECK_THAT(json_error(R"({"w": {"99999999999": "h:1"}})"),
             Catch::Contains("out of range"));
  CHECK_THAT(json_error(R"({"w": {"1": "a", "01": "b"}})"),
             Catch::Contains("Duplicate task index 1"));
  CHECK(invalid_argument_of([] {
          cluster_spec{sparse{{"w", {{-1, "h:1"}}}}};
        }).find("must not be negative")
        != std::string::npos);
}

TEST_CASE("task addresses must be strings (case 11)") {
  auto msg = json_error(R"({"w": [1]})");
  CHECK_THAT(msg, Catch::Contains("Task address 1 must be bytes or unicode"));
  CHECK_THAT(msg, Catch::Contains("job 'w'"));
  CHECK_THAT(json_error(R"({"w": {"0": null}})"),
             Catch::Contains("Task address null"));
}

TEST_CASE("empty job names are rejected") {
  CHECK_THAT(json_error(R"({"": ["h:1"]})"), Catch::Contains("Job name"));
  CHECK_FALSE(invalid_argument_of([] {
                cluster_spec{dense{{"", {"h:1"}}}};
              }).empty());
}

TEST_CASE("truth value (case 12)") {
  CHECK(cluster_spec{}.empty());
  CHECK(cluster_spec::from_json("{}").empty());
  CHECK_FALSE(cluster_spec{dense{{"job", {"host:port"}}}}.empty());
  // A job without tasks still makes the dict truthy.
  CHECK_FALSE(cluster_spec{dense{{"job", {}}}}.empty());
}

TEST_CASE("JSON round trip") {
  auto text = R"({"ps": ["h:1", "h:2"], "worker": {"0": "h:3", "3": "h:4"},
                  "idle": []})";
  auto spec = cluster_spec::from_json(text);
  CHECK(spec.jobs() == std::vector<std::string>{"idle", "ps", "worker"});
  CHECK(spec.task_indices("worker") == std::vector<int>{0, 3});
  CHECK(spec.num_tasks("idle") == 0);
  auto json = spec.to_json();
  CHECK(json
        == R"({"idle":{},"ps":["h:1","h:2"],"worker":{"0":"h:3","3":"h:4"}})");
  CHECK(cluster_spec::from_json(json) == spec);
  CHECK(cluster_spec::from_json(cluster_spec{}.to_json()).empty());
}

TEST_CASE("task names in TF's device order") {
  std::vector<std::string> workers;
  for (int i = 0; i < 12; ++i)
    workers.push_back("w" + std::to_string(i) + ":1");
  cluster_spec spec{dense{{"worker", workers}, {"ps", {"p:1"}}}};
  auto names = spec.task_names();
  REQUIRE(names.size() == 13);
  CHECK(names[0] == "/job:ps/replica:0/task:0");
  CHECK(names[1] == "/job:worker/replica:0/task:0");
  CHECK(names[2] == "/job:worker/replica:0/task:1");
  CHECK(names[3] == "/job:worker/replica:0/task:10");
  CHECK(names[4] == "/job:worker/replica:0/task:11");
  CHECK(names[5] == "/job:worker/replica:0/task:2");
  CHECK(names[12] == "/job:worker/replica:0/task:9");
  CHECK(cluster_spec{sparse{{"s", {{3, "a"}, {20, "b"}}}}}.task_names()
        == std::vector<std::string>{"/job:s/replica:0/task:20",
                                    "/job:s/replica:0/task:3"});
}

TEST_CASE("C-escaping in the ClusterDef text") {
  cluster_spec spec{dense{{"j", {"a\"b\\c\n\x01\xc3\xa9"}}}};
  CHECK(spec.as_cluster_def()
        == "job {\n  name: \"j\"\n  tasks {\n"
           "    value: \"a\\\"b\\\\c\\n\\001\\303\\251\"\n  }\n}\n");
}

TEST_CASE("replica_device_setter from a cluster (case 39)") {
  cluster_spec cluster{dense{{"ps", {"ps0:2222", "ps1:2222"}},
                             {"worker", {"w0:2222", "w1:2222", "w2:2222"}}}};
  auto fn = replica_device_setter(cluster);
  REQUIRE(fn.has_value());
  CHECK((*fn)(variable("v")) == "/job:ps/task:0");
  CHECK((*fn)(variable("w")) == "/job:ps/task:1");
  CHECK((*fn)(add()) == "/job:worker");
  CHECK((*fn)(variable("x")) == "/job:ps/task:0");
}

TEST_CASE("replica_device_setter with custom jobs (case 44)") {
  cluster_spec cluster{dense{{"sun", {"s0:1", "s1:1", "s2:1"}},
                             {"moon", {"m0:1", "m1:1"}}}};
  replica_device_setter_options opts;
  opts.ps_device = "/job:moon";
  opts.worker_device = "/job:sun";
  auto fn = replica_device_setter(cluster, opts);
  REQUIRE(fn.has_value());
  CHECK((*fn)(variable("v")) == "/job:moon/task:0");
  CHECK((*fn)(variable("w")) == "/job:moon/task:1");
  CHECK((*fn)(variable("x")) == "/job:moon/task:0");
  CHECK((*fn)(add()) == "/job:sun");

  opts.ps_device = "/job:moon/cpu:0";
  fn = replica_device_setter(cluster, opts);
  REQUIRE(fn.has_value());
  CHECK((*fn)(variable("v")) == "/job:moon/task:0/device:CPU:0");
  CHECK((*fn)(variable("w")) == "/job:moon/task:1/device:CPU:0");
}

TEST_CASE("replica_device_setter returns nullopt without ps (case 46)") {
  cluster_spec workers_only{dense{{"worker", {"w:1"}}}};
  CHECK_FALSE(replica_device_setter(workers_only).has_value());
  replica_device_setter_options opts;
  opts.ps_tasks = 5; // ignored: the cluster decides
  CHECK_FALSE(replica_device_setter(workers_only, opts).has_value());
  // A ps job without tasks gives ps_tasks == 0.
  CHECK_FALSE(
    replica_device_setter(cluster_spec{dense{{"ps", {}}}}).has_value());
  // A ps_device without a job names no job of the cluster.
  opts.ps_device = "/cpu:0";
  CHECK_FALSE(
    replica_device_setter(cluster_spec{dense{{"ps", {"p:1"}}}}, opts)
      .has_value());
  CHECK_FALSE(replica_device_setter(cluster_spec{}).has_value());
}

TEST_CASE("a sparse ps job counts its defined tasks") {
  cluster_spec cluster{sparse{{"ps", {{0, "p0:1"}, {3, "p3:1"}}}}};
  auto fn = replica_device_setter(cluster);
  REQUIRE(fn.has_value());
  // TF: ps_tasks = len(as_dict()["ps"]) = 2, so round robin over 0 and 1.
  CHECK((*fn)(variable("a")) == "/job:ps/task:0");
  CHECK((*fn)(variable("b")) == "/job:ps/task:1");
  CHECK((*fn)(variable("c")) == "/job:ps/task:0");
}
