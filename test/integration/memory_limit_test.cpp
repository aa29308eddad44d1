// Issue 30 §2, with real processes: a node started with --memory_limit
// refuses a step whose Fill would take its tensors past the limit, with
// ResourceExhausted naming the op, its shape and dtype and the node's
// device, instead of allocating it (with the limit far above, the kernel's
// OOM killer ended the node), and serves the next step; a bad value exits
// 2 naming the flag.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "actorflow/support/flags.hpp"
#include "common/temp_dir.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

namespace {

/// The peak resident memory of `pid` (VmHWM), in MiB; -1 if unknown.
double peak_rss_mib(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

} // namespace

TEST_CASE("memory limit: a node with --memory_limit 64M fails a step whose "
          "Fill needs 256 MiB with ResourceExhausted naming Fill, and serves "
          "the next",
          "[memory_limit]") {
  temp_dir dir;
  // The same limit from the command line and from a config file.
  auto ini = dir.write("node.ini", "[actorflow]\nmemory_limit = 64MiB\n");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--memory_limit", "64M"},
        std::vector<std::string>{"--config-file", ini}}) {
    INFO(flags.front());
    auto opts = captured();
    opts.args = flags;
    local_cluster nodes{node_path, {{"ps", 1}}, opts};
    auto& node = nodes.process("ps", 0);
    graph g;
    auto as_default = g.as_default();
    output total;
    output small;
    {
      device_scope on_ps{"/job:ps/task:0"};
      // 64 x 2^20 floats: 256 MiB, summed on the node.
      total = reduce_sum(fill({64, 1 << 20}, constant(1.0f), "big_fill"));
      small = reduce_sum(fill({1 << 20}, constant(2.0f)));
    }
    session sess{nodes.target("ps", 0), bounded(), &g};
    auto err = error_of([&] { sess.run(total); });
    REQUIRE(err);
    INFO(err->what() << "\n" << node.err());
    CHECK(err->code() == error_code::resource_exhausted);
    CHECK_THAT(err->what(),
               Contains("OOM when allocating tensor with shape[64,1048576] "
                        "and type float on "
                        "/job:ps/replica:0/task:0/device:CPU:0 by allocator "
                        "cpu: Fill needs 268435456 bytes, the tensor memory "
                        "limit is 67108864 bytes"));
    CHECK_THAT(err->what(), Contains("[[node big_fill]]"));
    REQUIRE(node.running());
    // Nothing of the 256 MiB was allocated.
    auto peak = peak_rss_mib(node.pid());
    CHECK(peak > 0);
    CHECK(peak < 200);
    // The same session, and a new one, run the next steps: 4 MiB fits.
    CHECK(sess.run(small).scalar_value<float>() == 2.0f * (1 << 20));
    session again{nodes.target("ps", 0), bounded(), &g};
    CHECK(again.run(small).scalar_value<float>() == 2.0f * (1 << 20));
    CHECK(node.running());
  }
}

TEST_CASE("memory limit: a bad --memory_limit exits 2 naming the flag and "
          "the value",
          "[memory_limit][config]") {
  auto address = "127.0.0.1:" + std::to_string(support::free_port());
  for (const std::string& program :
       {std::string{node_path}, std::string{ACTORFLOW_TRAIN_PATH}}) {
    for (std::string value : {"3X", "-1", "64Mi", "99999999999T"}) {
      std::vector<std::string> argv{program, "--ps_hosts", address,
                                    "--job_name", "ps", "--memory_limit",
                                    value};
      auto result = run_process(argv, std::chrono::seconds{20},
                                {.env = {"TF_CONFIG"}});
      INFO(program << " " << value << "\n" << result.err);
      CHECK(result.status.exited);
      CHECK(result.status.code == 2);
      CHECK_THAT(result.err,
                 Contains("error: --memory_limit: expected a size in bytes "
                          "such as 3G, 512M or 1048576, got '"
                          + value + "'"));
      CHECK(result.out.find("serving") == std::string::npos);
    }
  }
}

TEST_CASE("memory limit: the sizes --memory_limit takes", "[memory_limit]") {
  using support::parse_byte_size;
  CHECK(parse_byte_size("0") == uint64_t{0});
  CHECK(parse_byte_size("1048576") == uint64_t{1} << 20);
  CHECK(parse_byte_size("512K") == uint64_t{512} << 10);
  CHECK(parse_byte_size("64M") == uint64_t{64} << 20);
  CHECK(parse_byte_size("64m") == uint64_t{64} << 20);
  CHECK(parse_byte_size("64MiB") == uint64_t{64} << 20);
  CHECK(parse_byte_size("64MB") == uint64_t{64} << 20);
  CHECK(parse_byte_size("3G") == uint64_t{3} << 30);
  CHECK(parse_byte_size("2T") == uint64_t{2} << 40);
  CHECK(parse_byte_size("100B") == uint64_t{100});
  CHECK(parse_byte_size("16777215T") == uint64_t{16777215} << 40);
  for (const char* bad : {"", "M", "-1", "+1", "1.5G", "64Mi", "64 M",
                          "64iB", "3X", "16777216T",
                          "18446744073709551616"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_size(bad));
  }
  std::string text = "3G";
  CHECK(support::byte_size()(text).empty());
  CHECK(text == "3221225472");
}
