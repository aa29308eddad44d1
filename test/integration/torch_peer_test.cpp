// The bench's PyTorch peer (issue 35 §1; apps/bench/torch.cpp): the
// sgemm_ it preloads into PyTorch computes what BLAS's does (a wrong
// product would still run, at another speed, and every ratio would be
// against the wrong thing), the torch group measures both modes with
// stock and Eigen GEMMs, and the peer's processes end with it.

#include <dlfcn.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string bench_path = ACTORFLOW_BENCH_PATH;
const std::string train_path = ACTORFLOW_TRAIN_PATH;
const std::string sgemm_path = ACTORFLOW_EIGEN_SGEMM_PATH;
const std::string peer_path = ACTORFLOW_BENCH_TORCH_PATH;
const std::string python = "/usr/bin/python3";

using sgemm_fn = void (*)(const char*, const char*, const int*, const int*,
                          const int*, const float*, const float*, const int*,
                          const float*, const int*, const float*, float*,
                          const int*);

sgemm_fn load_sgemm() {
  static void* lib = ::dlopen(sgemm_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    return nullptr;
  return reinterpret_cast<sgemm_fn>(::dlsym(lib, "sgemm_"));
}

/// Column-major m x n with leading dimension ld (>= m), random values.
std::vector<float> random_matrix(int rows, int cols, int ld,
                                 std::mt19937& gen) {
  std::uniform_real_distribution<float> dist{-1, 1};
  std::vector<float> out(size_t(ld) * size_t(cols));
  for (auto& x : out)
    x = dist(gen);
  return out;
}

bool have_torch() {
  return support::run_process({python, "-c", "import torch"}, 60s)
    .status.success();
}

/// The pids whose parent is `pid`.
std::vector<pid_t> children(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator{"/proc"}) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream status{entry.path() / "status"};
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("PPid:", 0) == 0) {
        if (std::stol(line.substr(5)) == pid)
          out.push_back(std::stoi(name));
        break;
      }
  }
  return out;
}

} // namespace

TEST_CASE("bench torch peer: Eigen's sgemm_ computes C = alpha op(A) op(B) "
          "+ beta C as BLAS does",
          "[bench][torch]") {
  auto sgemm = load_sgemm();
  REQUIRE(sgemm != nullptr);
  std::mt19937 gen{7};
  struct shape {
    int m, n, k;
  };
  for (auto [m, n, k] : {shape{3, 5, 7}, shape{100, 256, 784},
                         shape{1, 1, 1}, shape{17, 2, 33}}) {
    for (char ta : {'N', 'T'}) {
      for (char tb : {'n', 'c'}) {
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          INFO(m << "x" << n << "x" << k << " " << ta << tb << " beta "
                 << beta);
          const bool at = ta == 'T';
          const bool bt = tb == 'c';
          // Leading dimensions past the rows: a sub-matrix of a larger one.
          int a_rows = at ? k : m, a_cols = at ? m : k;
          int b_rows = bt ? n : k, b_cols = bt ? k : n;
          int lda = a_rows + 3, ldb = b_rows + 1, ldc = m + 2;
          auto a = random_matrix(a_rows, a_cols, lda, gen);
          auto b = random_matrix(b_rows, b_cols, ldb, gen);
          auto c = random_matrix(m, n, ldc, gen);
          if (beta == 0.0f)
            // BLAS does not read C then: NaNs there stay out.
            for (auto& x : c)
              x = std::numeric_limits<float>::quiet_NaN();
          auto before = c;
          const float alpha = 1.5f;
          sgemm(&ta, &tb, &m, &n, &k, &alpha, a.data(), &lda, b.data(), &ldb,
                &beta, c.data(), &ldc);
          double worst = 0;
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
              double sum = 0;
              for (int p = 0; p < k; ++p) {
                double x = at ? a[size_t(p) + size_t(i) * lda]
                              : a[size_t(i) + size_t(p) * lda];
                double y = bt ? b[size_t(j) + size_t(p) * ldb]
                              : b[size_t(p) + size_t(j) * ldb];
                sum += x * y;
              }
              double want = alpha * sum;
              if (beta != 0.0f)
                want += beta * double(before[size_t(i) + size_t(j) * ldc]);
              worst = std::max(worst,
                               std::abs(c[size_t(i) + size_t(j) * ldc] - want));
            }
          CHECK(worst < 1e-3 * std::sqrt(double(k)));
          // Past the m rows of each column, C is not touched.
          bool padding_kept = true;
          for (int j = 0; j < n; ++j)
            for (int i = m; i < ldc; ++i) {
              auto x = c[size_t(i) + size_t(j) * ldc];
              auto y = before[size_t(i) + size_t(j) * ldc];
              padding_kept = padding_kept
                             && (x == y || (std::isnan(x) && std::isnan(y)));
            }
          CHECK(padding_kept);
        }
      }
    }
  }
}

TEST_CASE("bench torch peer: sgemm_ with bad arguments or empty sizes "
          "changes nothing",
          "[bench][torch]") {
  auto sgemm = load_sgemm();
  REQUIRE(sgemm != nullptr);
  std::vector<float> a(16, 1.0f), b(16, 1.0f), c(16, 7.0f);
  const auto before = c;
  const float one = 1.0f;
  const float zero = 0.0f;
  int two = 2, one_i = 1, zero_i = 0, minus = -1;
  auto call = [&](char ta, char tb, int& m, int& n, int& k, const float& alpha,
                  int& lda, int& ldb, const float& beta, int& ldc) {
    c = before;
    sgemm(&ta, &tb, &m, &n, &k, &alpha, a.data(), &lda, b.data(), &ldb, &beta,
          c.data(), &ldc);
    return c == before;
  };
  CHECK(call('X', 'N', two, two, two, one, two, two, zero, two));
  CHECK(call('N', '?', two, two, two, one, two, two, zero, two));
  CHECK(call('N', 'N', minus, two, two, one, two, two, zero, two));
  CHECK(call('N', 'N', two, two, two, one, one_i, two, zero, two)); // lda < m
  CHECK(call('N', 'N', two, two, two, one, two, one_i, zero, two)); // ldb < k
  CHECK(call('N', 'N', two, two, two, one, two, two, zero, one_i)); // ldc < m
  CHECK(call('N', 'N', zero_i, two, two, one, two, two, zero, two));
  // k = 0 and beta = 1: C = C.
  CHECK(call('N', 'N', two, two, zero_i, one, two, two, one, two));
  // alpha = 0, beta = 0: C is zeroed, A and B not read.
  CHECK_FALSE(call('N', 'N', two, two, two, zero, two, two, zero, two));
  CHECK(c[0] == 0.0f);
  CHECK(c[1] == 0.0f);
  CHECK(c[2] == 0.0f);
  CHECK(c[3] == 0.0f);
  CHECK(c[4] == 7.0f); // past the 2x2 block (ldc 2: column 2 starts at 4)
}

TEST_CASE("bench: --quick --only torch measures actorflow-train against "
          "PyTorch's parameter server and DDP, stock and with Eigen's GEMM",
          "[bench][torch]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  support::spawn_options opts;
  opts.capture_stderr = true;
  child_process bench{{bench_path, "--quick", "--only", "torch", "--train",
                       train_path, "--json-only"},
                      opts};
  auto st = bench.wait(280s);
  if (!st)
    bench.stop(5s);
  INFO("stdout:\n" << bench.out() << "\nstderr:\n" << bench.err());
  REQUIRE(st);
  CHECK(st->success());
  auto got = bench_figures(bench.out());
  REQUIRE(got.size() == 4);
  const bool torch = have_torch();
  for (const char* mode : {"async", "sync"}) {
    INFO(mode);
    auto& f = got.at(std::string{"torch_"} + mode + "_examples_per_s");
    if (!torch) {
      CHECK(f["value"].is_null());
      CHECK_THAT(f.value("skipped", ""), Catch::Contains("python3-torch"));
      continue;
    }
    REQUIRE(f["value"].is_number());
    REQUIRE(f["baseline_value"].is_number());
    CHECK(f["value"].get<double>() > 0);
    CHECK(f["baseline_value"].get<double>() > 0);
    CHECK(f["ratio"].get<double>()
          == Approx(f["value"].get<double>()
                    / f["baseline_value"].get<double>())
               .epsilon(0.01));
    CHECK(f["baseline"]
          == (std::string{mode} == "async" ? "pytorch_rpc_ps"
                                           : "pytorch_ddp_gloo"));
    // Both PyTorch runs, each worker's rate, in the note.
    auto note = f.value("note", "");
    static const std::regex both{
      R"(with Eigen's sgemm (\d+) \((\d+) \+ (\d+)\), stock \(reference BLAS\) (\d+) \((\d+) \+ (\d+)\))"};
    std::smatch m;
    REQUIRE(std::regex_search(note, m, both));
    auto eigen = std::stod(m[1].str());
    auto stock = std::stod(m[4].str());
    CHECK(std::stod(m[2].str()) > 0);
    CHECK(std::stod(m[3].str()) > 0);
    CHECK(std::stod(m[5].str()) > 0);
    CHECK(std::stod(m[6].str()) > 0);
    // The baseline is the faster of the two.
    CHECK(f["baseline_value"].get<double>()
          == Approx(std::max(eigen, stock)).epsilon(0.01));
  }
  for (const char* mode : {"async", "sync"}) {
    auto& f = got.at(std::string{"torch_"} + mode + "_seconds_to_0.88");
    CHECK(f["value"].is_null());
    CHECK_THAT(f.value("skipped", ""),
               Catch::Contains(torch ? "not in --quick" : "python3-torch"));
  }
}

TEST_CASE("bench torch peer: its processes end when it is killed",
          "[bench][torch]") {
  if (!have_fashion_mnist() || !have_torch()) {
    WARN("Fashion-MNIST or python3-torch is not installed: not run");
    return;
  }
  const char* mode = GENERATE("async", "sync");
  INFO(mode);
  support::spawn_options opts;
  opts.capture_stderr = true;
  child_process peer{{python, peer_path, mode, "--steps", "1000000",
                      "--log_every", "20"},
                     opts};
  REQUIRE(peer.wait_for_line("worker 0: step 20,", 90s));
  auto started = children(peer.pid());
  // A ps and two workers (async), two workers (sync).
  CHECK(started.size() == (std::string{mode} == "async" ? 3u : 2u));
  ::kill(peer.pid(), SIGKILL);
  REQUIRE(peer.wait(10s));
  // PR_SET_PDEATHSIG: each is killed with its parent. Polls /proc
  // (they are not our children), bounded by the deadline.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  auto alive = [&] {
    size_t n = 0;
    for (auto pid : started)
      n += runs(pid, "python") ? 1 : 0;
    return n;
  };
  while (alive() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  CHECK(alive() == 0);
}

TEST_CASE("bench torch peer: bad flags are refused and a process that fails "
          "ends the run",
          "[bench][torch]") {
  auto done = support::run_process({python, peer_path, "async", "--workers",
                                    "0"},
                                   30s);
  CHECK(done.status.exited);
  CHECK(done.status.code == 2);
  CHECK_THAT(done.err, Catch::Contains("--workers, --steps, --batch and "
                                       "--log_every must be positive"));
  // --hosts (the bench's --netsim) needs a namespace, an address and a
  // device for each process: the ps and 2 workers here.
  for (const char* hosts : {"ns1,10.0.0.1,dev1;ns2,10.0.0.2,dev2",
                            "ns1,10.0.0.1;ns2,10.0.0.2;ns3,10.0.0.3"}) {
    INFO(hosts);
    auto bad = support::run_process({python, peer_path, "async", "--hosts",
                                     hosts},
                                    30s);
    CHECK(bad.status.exited);
    CHECK(bad.status.code == 2);
    CHECK_THAT(bad.err, Catch::Contains("--hosts needs NETNS,IP,DEVICE for "
                                        "each of the 3 processes"));
  }
  // A process that fails ends the run at once (not at its --timeout: the
  // ps would wait for its workers in rpc.shutdown() forever), named.
  auto start = std::chrono::steady_clock::now();
  auto failed = support::run_process({python, peer_path, "async",
                                      "--data_dir", "/nonexistent",
                                      "--timeout", "600"},
                                     120s);
  INFO(failed.err);
  CHECK_FALSE(failed.timed_out);
  CHECK(failed.status.exited);
  CHECK(failed.status.code == 1);
  CHECK_THAT(failed.err, Catch::Contains("torch_peer: process "));
  CHECK(seconds_since(start) < 120);
}
