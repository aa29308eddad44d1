// What a client may do with the files of a node (issue 30 §3): the node's
// TLS key, certificate, CA and --config-file are never readable through an
// op, with or without --file_roots; with --file_roots, readers open files
// inside the roots only. Real actorflow-node processes, a client session
// in this process.

#include <filesystem>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/transport/transport.hpp"
#include "common/temp_dir.hpp"
#include "integration_util.hpp"
#include "tls_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

namespace fs = std::filesystem;

session_config quick() {
  session_config config;
  config.operation_timeout_in_ms = 10000;
  return config;
}

// A reader on the worker that reads `path`: the whole file, or (text) its
// first line.
struct remote_read {
  graph g;
  operation enqueue;
  output value;

  explicit remote_read(const std::string& path, bool text = false) {
    auto as_default = g.as_default();
    device_scope on_worker{"/job:worker/task:0"};
    fifo_queue files{4, {dtype::string}, {tensor_shape{}}};
    enqueue = files.enqueue({constant(path)});
    if (text) {
      text_line_reader reader;
      value = reader.read(files).second;
    } else {
      whole_file_reader reader;
      value = reader.read(files).second;
    }
  }

  // The file's contents (or first line), or the op_error.
  std::optional<op_error> run(session& sess, std::string* got = nullptr) {
    return error_of([&] {
      sess.run(enqueue);
      auto result = sess.run(value);
      if (got != nullptr)
        *got = result.scalar_value<std::string>();
    });
  }
};

void check_denied(const std::optional<op_error>& err, const std::string& path,
                  const std::string& why) {
  REQUIRE(err.has_value());
  INFO(err->what());
  CHECK(err->code() == error_code::permission_denied);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("may not read '" + path + "'"));
  CHECK_THAT(err->get_status().message(), Catch::Contains(why));
}

} // namespace

TEST_CASE("file_roots: a client cannot read the node's TLS key, certificate "
          "or config file, even inside the file roots",
          "[file_roots][tls]") {
  pki keys{{"node:127.0.0.1,localhost", "client:client"}};
  temp_dir dir{"actorflow-file-roots"};
  auto config = dir.write("node.ini", "[actorflow]\nlog_level = info\n");
  auto data = dir.write("data.txt", "plain data");
  auto opts = captured();
  opts.args = keys.flags("node");
  opts.args.push_back("--config-file=" + config);
  // Roots that hold the denied files as well.
  opts.args.push_back("--file_roots=" + dir.path.string() + ","
                      + keys.dir.path.string());
  local_cluster nodes{node_path, {{"worker", 1}}, opts};
  client_system client{keys.as("client")};
  auto target = nodes.target("worker", 0);

  auto read = [&](const std::string& path, std::string* got = nullptr,
                  bool text = false) {
    remote_read r{path, text};
    session sess{client.sys, target, quick(), &r.g};
    return r.run(sess, got);
  };

  // Other files are read as before.
  std::string got;
  auto err = read(data, &got);
  INFO((err ? err->what() : "read"));
  REQUIRE_FALSE(err.has_value());
  CHECK(got == "plain data");

  auto key = keys.dir / "node.key";
  check_denied(read(key), key,
               "it is the node's TLS key, which no op opens (file roots: "
               + fs::canonical(dir.path).string() + ", "
               + fs::canonical(keys.dir.path).string() + ")");
  check_denied(read(key, nullptr, true), key, "the node's TLS key");
  check_denied(read(keys.dir / "node.pem"), keys.dir / "node.pem",
               "the node's TLS certificate");
  check_denied(read(keys.ca), keys.ca, "the node's TLS CA file");
  check_denied(read(config), config,
               "the node's configuration file (--config-file)");
  // Under other names: a symbolic link, a hard link, `..`.
  auto soft = dir / "soft.txt";
  fs::create_symlink(key, soft);
  check_denied(read(soft), soft, "the node's TLS key");
  auto hard = keys.dir / "innocent.txt";
  fs::create_hard_link(key, hard);
  check_denied(read(hard), hard, "the node's TLS key");
  auto dotted = keys.dir / "../" + keys.dir.path.filename().string()
                + "/node.key";
  check_denied(read(dotted), dotted, "the node's TLS key");
  // The node is fine after all that.
  err = read(data, &got);
  CHECK_FALSE(err.has_value());
}

TEST_CASE("file_roots: with TLS and no --file_roots, ops open no file",
          "[file_roots][tls]") {
  pki keys{{"node:127.0.0.1", "client:client"}};
  temp_dir dir{"actorflow-file-roots"};
  auto data = dir.write("data.txt", "plain data");
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"worker", 1}}, opts};
  client_system client{keys.as("client")};
  remote_read r{data};
  session sess{client.sys, nodes.target("worker", 0), quick(), &r.g};
  check_denied(r.run(sess), data,
               "it is outside the file roots (none: with TLS, ops open files "
               "only under --file_roots, and none were named)");
}

TEST_CASE("file_roots: with --file_roots, readers open files inside the "
          "roots only",
          "[file_roots]") {
  temp_dir dir{"actorflow-file-roots"};
  fs::create_directories(dir.path / "root" / "sub");
  fs::create_directories(dir.path / "outside");
  auto inside = dir.write("root/sub/in.txt", "inside\nsecond\n");
  auto outside = dir.write("outside/secret.txt", "secret\n");
  auto root = fs::canonical(dir.path / "root").string();
  auto opts = captured();
  opts.args = {"--file_roots=" + (dir / "root")};
  local_cluster nodes{node_path, {{"worker", 1}}, opts};
  auto target = nodes.target("worker", 0);
  auto read = [&](const std::string& path, std::string* got = nullptr,
                  bool text = false) {
    remote_read r{path, text};
    session sess{target, quick(), &r.g};
    return r.run(sess, got);
  };

  std::string got;
  auto err = read(inside, &got);
  INFO((err ? err->what() : "read"));
  REQUIRE_FALSE(err.has_value());
  CHECK(got == "inside\nsecond\n");
  err = read(inside, &got, true);
  REQUIRE_FALSE(err.has_value());
  CHECK(got == "inside");

  auto outside_roots = "it is outside the file roots (" + root + ")";
  check_denied(read(outside), outside, outside_roots);
  check_denied(read(outside, nullptr, true), outside, outside_roots);
  check_denied(read("/etc/passwd"), "/etc/passwd", outside_roots);
  auto escape = dir / "root/sub/../../outside/secret.txt";
  check_denied(read(escape), escape, outside_roots);
  auto link = dir / "root/link.txt";
  fs::create_symlink(outside, link);
  check_denied(read(link), link, outside_roots);
  // The node's own process files too.
  check_denied(read("/proc/self/cmdline"), "/proc/self/cmdline",
               outside_roots);
}

TEST_CASE("file_roots: a root that does not exist stops the node at start",
          "[file_roots]") {
  temp_dir dir{"actorflow-file-roots"};
  auto missing = dir / "missing";
  auto res = run_process({node_path, "--cluster",
                          R"({"worker": ["127.0.0.1:1"]})", "--job",
                          "worker", "--file_roots", dir / "" + "," + missing},
                         30s);
  INFO(res.err);
  CHECK(res.status.exited);
  CHECK(res.status.code == 2);
  CHECK_THAT(res.err, Catch::Contains("--file_roots: " + missing
                                      + ": No such file or directory"));
}
