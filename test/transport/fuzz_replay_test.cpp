// The fuzz targets (test/fuzz/fuzz_targets.hpp) on what libFuzzer starts
// from and what it ever found: every seed (real traffic, test/fuzz/corpus)
// decodes, every truncation of a self-delimited seed is refused, and
// every truncation, every seed with a byte flipped and every past crash
// (test/fuzz/regressions) runs without crashing.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.hpp"

namespace fs = std::filesystem;
using namespace actorflow::fuzz;

namespace {

using target_fn = bool (*)(const uint8_t*, size_t);

std::vector<std::string> inputs(const std::string& kind,
                                const std::string& target) {
  std::vector<std::string> result;
  fs::path dir = fs::path{ACTORFLOW_FUZZ_DIR} / kind / target;
  if (!fs::exists(dir))
    return result;
  for (const auto& e : fs::directory_iterator{dir}) {
    std::ifstream in{e.path(), std::ios::binary};
    result.emplace_back(std::istreambuf_iterator<char>{in},
                        std::istreambuf_iterator<char>{});
  }
  return result;
}

bool run(target_fn f, const std::string& bytes) {
  return f(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

} // namespace

TEST_CASE("fuzz targets: seeds decode, truncations are refused, flips and "
          "past crashes do not crash",
          "[fuzz]") {
  struct target {
    std::string name;
    target_fn fn;
    // The wire format and frames say how long they are; a CAF message
    // does not (BASP's header does), so a prefix of one can be another.
    bool self_delimited;
  };
  auto t = GENERATE(target{"wire", fuzz_wire, true},
                    target{"tensor_frame", fuzz_tensor_frame, true},
                    target{"caf_message", fuzz_caf_message, false},
                    target{"monitor_filter", fuzz_monitor_filter, true});
  INFO("target " << t.name);
  auto seeds = inputs("corpus", t.name);
  CHECK(seeds.size() >= 4);
  for (const auto& seed : seeds) {
    INFO("seed of " << seed.size() << " bytes");
    CHECK(run(t.fn, seed));
    for (size_t n = 0; n < seed.size(); ++n) {
      INFO("truncated to " << n);
      auto decoded = run(t.fn, seed.substr(0, n));
      if (t.self_delimited)
        CHECK_FALSE(decoded);
    }
    // Each byte changed (the result may be either; it must not crash).
    for (size_t i = 0; i < seed.size(); ++i) {
      auto flipped = seed;
      flipped[i] = static_cast<char>(flipped[i] ^ 0xA5);
      run(t.fn, flipped);
    }
  }
  for (const auto& crash : inputs("regressions", t.name))
    run(t.fn, crash);
  // An empty input is nothing (for CAF: the empty message).
  CHECK(t.fn(nullptr, 0) == !t.self_delimited);
}

TEST_CASE("fuzz targets: hand-made hostile inputs are refused", "[fuzz]") {
  // test/fuzz/regressions/<target>/hostile-*: inputs written to attack a
  // check rather than found by a fuzzer (tensor sizes that overflow, issue
  // 30). Each must decode to nothing, not merely not crash.
  struct target {
    std::string name;
    target_fn fn;
  };
  size_t seen = 0;
  for (const auto& t : {target{"wire", fuzz_wire},
                        target{"tensor_frame", fuzz_tensor_frame},
                        target{"caf_message", fuzz_caf_message}}) {
    fs::path dir = fs::path{ACTORFLOW_FUZZ_DIR} / "regressions" / t.name;
    if (!fs::exists(dir))
      continue;
    for (const auto& e : fs::directory_iterator{dir}) {
      if (e.path().filename().string().rfind("hostile-", 0) != 0)
        continue;
      std::ifstream in{e.path(), std::ios::binary};
      std::string bytes{std::istreambuf_iterator<char>{in},
                        std::istreambuf_iterator<char>{}};
      INFO(t.name << ": " << e.path().filename().string());
      CHECK_FALSE(run(t.fn, bytes));
      ++seen;
    }
  }
  CHECK(seen >= 5);
}
