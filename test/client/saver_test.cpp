// Checkpoints: save/restore round trips, the checkpoint state file and
// max_to_keep, latest_checkpoint, corrupt files (DataLoss, never a crash),
// missing or mismatched variables, restoring into a cluster with another
// number of ps tasks, interrupted saves and what they leave, and
// restore_newest's fallback past a damaged checkpoint.

#include <catch2/catch.hpp>

#include <stdlib.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "actorflow/graph/training.hpp"
#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/device_setter.hpp"
#include "actorflow/client/saver.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/temp_dir.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << bytes;
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (auto& entry : fs::directory_iterator{dir})
    names.insert(entry.path().filename().string());
  return names;
}

std::vector<float> floats(const tensor& t) {
  auto xs = t.flat<float>();
  return {xs.begin(), xs.end()};
}

std::vector<int64_t> int64s(const tensor& t) {
  auto xs = t.flat<int64_t>();
  return {xs.begin(), xs.end()};
}

/// A small model: a float matrix, an int64 vector in a name scope, the
/// global step and Momentum's slot.
struct model {
  variable w;
  variable counts;
  variable step;
  variable slot;
  operation train;
};

model build_model() {
  model m;
  m.w = variable{tensor::from_vector<float>({1.0f, -2.0f, 0.5f, 4.0f},
                                            tensor_shape{2, 2}),
                 named("w")};
  {
    name_scope layer{"layer1"};
    m.counts = variable{tensor::vec<int64_t>({7, -3, 1LL << 40}),
                        named("counts")};
  }
  m.step = create_global_step();
  momentum_optimizer opt{0.1, 0.9};
  m.train = opt.minimize(reduce_sum(square(m.w)), &m.step);
  m.slot = opt.get_slot(m.w, "momentum");
  return m;
}

/// Rewrites the 40-byte header of a checkpoint file for `payload`, with
/// correct checksums (as an attacker or a buggy writer could).
std::string reframe(const std::string& file_bytes, const std::string& payload) {
  auto header = file_bytes.substr(0, 40);
  auto put32 = [&](size_t at, uint32_t x) {
    for (int i = 0; i < 4; ++i)
      header[at + static_cast<size_t>(i)] = static_cast<char>(x >> (8 * i));
  };
  uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i)
    header[24 + static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  auto crc = [](std::string_view s) {
    return static_cast<uint32_t>(
      ::crc32(::crc32(0L, Z_NULL, 0),
              reinterpret_cast<const Bytef*>(s.data()),
              static_cast<uInt>(s.size())));
  };
  put32(32, crc(payload));
  put32(36, crc(std::string_view{header}.substr(0, 36)));
  return header + payload;
}

} // namespace

TEST_CASE("saver: round trip of floats, int64s, the global step and slots",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  saver s;
  CHECK(s.keys()
        == std::vector<std::string>{"w", "layer1/counts", "global_step",
                                    "w/Momentum"});
  CHECK(s.restore_op().name() == "save/restore_all");
  CHECK(g.find_operation("save/Assign").valid());
  CHECK(g.find_operation("save/Assign_3").valid());
  CHECK(g.find_operation("save/Placeholder").valid());
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  sess.run(m.train);
  sess.run(m.train);
  auto w_saved = floats(sess.run(m.w));
  auto slot_saved = floats(sess.run(m.slot));
  CHECK(w_saved != std::vector<float>{1.0f, -2.0f, 0.5f, 4.0f});
  auto path = s.save(sess, dir / "model.ckpt", m.step);
  CHECK(path == dir / "model.ckpt-2");
  CHECK(files_in(dir.path)
        == std::set<std::string>{"checkpoint", "model.ckpt-2.index",
                                 "model.ckpt-2.data-00000-of-00001"});
  CHECK(slurp(dir / "checkpoint")
        == "model_checkpoint_path: \"" + path
             + "\"\nall_model_checkpoint_paths: \"" + path + "\"\n");
  CHECK(s.last_checkpoints() == std::vector<std::string>{path});
  CHECK(checkpoint_exists(path));
  // Move on, then go back.
  sess.run(m.train);
  sess.run(m.counts.assign(constant(tensor::vec<int64_t>({0, 0, 0}))));
  CHECK(sess.run(m.step).scalar_value<int64_t>() == 3);
  s.restore(sess, path);
  CHECK(floats(sess.run(m.w)) == w_saved);
  CHECK(floats(sess.run(m.slot)) == slot_saved);
  CHECK(int64s(sess.run(m.counts))
        == std::vector<int64_t>{7, -3, 1LL << 40});
  CHECK(sess.run(m.step).scalar_value<int64_t>() == 2);
  // An explicit step number works as well and names the file.
  CHECK(s.save(sess, dir / "model.ckpt", 7) == dir / "model.ckpt-7");
  CHECK(s.save(sess, dir / "plain") == dir / "plain");
  CHECK(checkpoint_exists(dir / "plain"));
  CHECK(latest_checkpoint(dir.path) == dir / "plain");

  SECTION("a restarted client restores into uninitialized variables") {
    graph g2;
    auto as_default2 = g2.as_default();
    auto m2 = build_model();
    saver s2;
    session fresh{bounded(), &g2};
    auto uninit = error_of([&] { fresh.run(m2.w); });
    REQUIRE(uninit);
    CHECK(uninit->code() == error_code::failed_precondition);
    s2.restore(fresh, path);
    CHECK(floats(fresh.run(m2.w)) == w_saved);
    CHECK(floats(fresh.run(m2.slot)) == slot_saved);
    CHECK(int64s(fresh.run(m2.counts))
          == std::vector<int64_t>{7, -3, 1LL << 40});
    CHECK(fresh.run(m2.step).scalar_value<int64_t>() == 2);
    // Training continues from there.
    fresh.run(m2.train);
    CHECK(fresh.run(m2.step).scalar_value<int64_t>() == 3);
  }
}

TEST_CASE("saver: max_to_keep deletes the oldest checkpoints and the "
          "checkpoint file lists the kept ones",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  auto prefix = dir / "model";
  auto p = [&](int step) { return prefix + "-" + std::to_string(step); };

  SECTION("max_to_keep = 2") {
    saver_options opts;
    opts.max_to_keep = 2;
    saver s{opts};
    for (int step = 1; step <= 4; ++step)
      CHECK(s.save(sess, prefix, step) == p(step));
    CHECK(s.last_checkpoints() == std::vector<std::string>{p(3), p(4)});
    CHECK(files_in(dir.path)
          == std::set<std::string>{"checkpoint", "model-3.index",
                                   "model-3.data-00000-of-00001",
                                   "model-4.index",
                                   "model-4.data-00000-of-00001"});
    CHECK(slurp(dir / "checkpoint")
          == "model_checkpoint_path: \"" + p(4)
               + "\"\nall_model_checkpoint_paths: \"" + p(3)
               + "\"\nall_model_checkpoint_paths: \"" + p(4) + "\"\n");
    auto st = get_checkpoint_state(dir.path);
    REQUIRE(st);
    CHECK(st->model_checkpoint_path == p(4));
    CHECK(st->all_model_checkpoint_paths
          == std::vector<std::string>{p(3), p(4)});
    // Saving under a kept name makes it the newest; nothing is deleted.
    s.save(sess, prefix, 3);
    CHECK(s.last_checkpoints() == std::vector<std::string>{p(4), p(3)});
    CHECK(latest_checkpoint(dir.path) == p(3));
    CHECK(checkpoint_exists(p(4)));
    s.save(sess, prefix, 5);
    CHECK(s.last_checkpoints() == std::vector<std::string>{p(3), p(5)});
    CHECK_FALSE(checkpoint_exists(p(4)));
    CHECK_FALSE(fs::exists(p(4) + ".data-00000-of-00001"));
    // A saver of a restarted process takes over the list.
    saver again{opts};
    again.recover_last_checkpoints(
      get_checkpoint_state(dir.path)->all_model_checkpoint_paths);
    CHECK(again.last_checkpoints() == std::vector<std::string>{p(3), p(5)});
    again.save(sess, prefix, 6);
    CHECK_FALSE(checkpoint_exists(p(3)));
    CHECK(again.last_checkpoints() == std::vector<std::string>{p(5), p(6)});
  }

  SECTION("max_to_keep = 0 keeps every file and tracks only the latest") {
    saver_options opts;
    opts.max_to_keep = 0;
    saver s{opts};
    for (int step = 1; step <= 3; ++step)
      s.save(sess, prefix, step);
    CHECK(s.last_checkpoints().empty());
    for (int step = 1; step <= 3; ++step)
      CHECK(checkpoint_exists(p(step)));
    CHECK(slurp(dir / "checkpoint")
          == "model_checkpoint_path: \"" + p(3)
               + "\"\nall_model_checkpoint_paths: \"" + p(3) + "\"\n");
  }
}

TEST_CASE("saver: latest_checkpoint and the checkpoint state file",
          "[saver]") {
  temp_dir dir;
  CHECK(latest_checkpoint(dir.path).empty());
  CHECK_FALSE(get_checkpoint_state(dir.path));
  CHECK(latest_checkpoint(dir / "no-such-dir").empty());
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver s;
  auto p1 = s.save(sess, dir / "model", 1);
  CHECK(latest_checkpoint(dir.path) == p1);

  SECTION("relative paths are joined with the directory") {
    spit(dir / "checkpoint",
         "# written by hand\nmodel_checkpoint_path: 'model-1'\n"
         "all_model_checkpoint_paths: \"model-\" \"1\"\n"
         "all_model_checkpoint_timestamps: 1700000000.5\n");
    auto st = get_checkpoint_state(dir.path);
    REQUIRE(st);
    CHECK(st->all_model_checkpoint_paths == std::vector<std::string>{p1});
    CHECK(latest_checkpoint(dir.path) == p1);
  }
  SECTION("save_relative_paths writes names relative to the directory") {
    saver_options opts;
    opts.save_relative_paths = true;
    saver rel{opts};
    auto p2 = rel.save(sess, dir / "model", 2);
    CHECK(slurp(dir / "checkpoint")
          == "model_checkpoint_path: \"model-2\"\n"
             "all_model_checkpoint_paths: \"model-2\"\n");
    CHECK(latest_checkpoint(dir.path) == p2);
  }
  SECTION("paths are escaped as TF's text format does") {
    auto odd = dir / "we\"ird\\dir";
    fs::create_directory(odd);
    auto p = s.save(sess, odd + "/model", 3);
    CHECK_THAT(slurp(odd + "/checkpoint"),
               Catch::Contains("we\\\"ird\\\\dir/model-3\""));
    CHECK(latest_checkpoint(odd) == p);
  }
  SECTION("an unparsable state file names no checkpoint") {
    spit(dir / "checkpoint", "model_checkpoint_path: unquoted\n");
    CHECK(latest_checkpoint(dir.path).empty());
    spit(dir / "checkpoint", "model_checkpoint_path: \"model-1\"\nbogus: 1\n");
    CHECK(latest_checkpoint(dir.path).empty());
    spit(dir / "checkpoint", "all_model_checkpoint_paths: \"model-1\"\n");
    CHECK(latest_checkpoint(dir.path).empty());
  }
  SECTION("a checkpoint whose index is missing is no checkpoint") {
    fs::remove(p1 + ".index");
    CHECK(latest_checkpoint(dir.path).empty());
    CHECK_FALSE(checkpoint_exists(p1));
  }
}

TEST_CASE("saver: a corrupt or truncated file is DataLoss naming it, and "
          "nothing is assigned",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f, 3.0f}), named("w")};
  variable n{int64_t{5}, named("n")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver s;
  auto path = s.save(sess, dir / "model", 1);
  auto shard = path + ".data-00000-of-00001";
  auto index = path + ".index";
  sess.run(w.assign(constant(tensor::vec<float>({9.0f, 9.0f, 9.0f}))));
  sess.run(n.assign(constant(int64_t{42})));
  auto expect_data_loss = [&](const std::string& file,
                              const std::string& why) {
    auto err = error_of([&] { s.restore(sess, path); });
    REQUIRE(err);
    CHECK(err->code() == error_code::data_loss);
    CHECK_THAT(err->get_status().message(), Catch::Contains(file));
    CHECK_THAT(err->get_status().message(), Catch::Contains(why));
    // The session still works and the variables kept their values.
    CHECK(floats(sess.run(w)) == std::vector<float>{9.0f, 9.0f, 9.0f});
    CHECK(sess.run(n).scalar_value<int64_t>() == 42);
  };
  auto bytes = slurp(shard);

  SECTION("a truncated shard") {
    spit(shard, bytes.substr(0, bytes.size() - 3));
    expect_data_loss(shard, "truncated");
    spit(shard, bytes.substr(0, 20));
    expect_data_loss(shard, "truncated");
    spit(shard, "");
    expect_data_loss(shard, "truncated");
  }
  SECTION("a flipped byte in a shard's payload") {
    bytes[bytes.size() - 5] ^= 0x10;
    spit(shard, bytes);
    expect_data_loss(shard, "checksum does not match");
  }
  SECTION("a flipped byte in a shard's header") {
    bytes[12] ^= 0x01;
    spit(shard, bytes);
    expect_data_loss(shard, "header checksum does not match");
  }
  SECTION("trailing bytes") {
    spit(shard, bytes + "x");
    expect_data_loss(shard, "trailing bytes");
  }
  SECTION("a flipped byte or truncation in the index") {
    auto ib = slurp(index);
    auto flipped = ib;
    flipped[ib.size() / 2] ^= 0x40;
    spit(index, flipped);
    expect_data_loss(index, "checksum does not match");
    spit(index, ib.substr(0, ib.size() - 1));
    expect_data_loss(index, "truncated");
  }
  SECTION("a payload with a valid checksum that is not an archive") {
    spit(shard, reframe(bytes, "definitely not a boost archive"));
    expect_data_loss(shard, "archive error");
    spit(shard, reframe(bytes, ""));
    expect_data_loss(shard, "archive error");
  }
  SECTION("every single-byte corruption behind a valid checksum is "
          "DataLoss or a well-formed value, never a crash") {
    // Flips each byte of the payload in turn and fixes the checksums, so
    // the archive and the tensor decoders see the damage themselves.
    auto payload = bytes.substr(40);
    int data_losses = 0;
    for (size_t i = 0; i < payload.size(); ++i) {
      for (unsigned char mask : {0x01, 0x80, 0xff}) {
        auto damaged = payload;
        damaged[i] = static_cast<char>(damaged[i] ^ mask);
        spit(shard, reframe(bytes, damaged));
        auto err = error_of([&] { s.restore(sess, path); });
        if (err) {
          INFO("byte " << i << ": " << err->what());
          CHECK(err->code() == error_code::data_loss);
          ++data_losses;
        }
      }
    }
    // Only a flip inside the 20 bytes of element data (three floats, one
    // int64) may decode; every other byte is a length, name, dtype, shape
    // or count the decoders check.
    auto decoded = static_cast<int>(payload.size() * 3) - data_losses;
    CHECK(decoded <= 3 * 20);
    CHECK(data_losses > 0);
    spit(shard, bytes);
    s.restore(sess, path);
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 2.0f, 3.0f});
  }
  SECTION("the index of another file kind") {
    spit(index, bytes);
    expect_data_loss(index, "expected an index file");
  }
}

TEST_CASE("saver: missing and mismatched variables", "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  variable b{0.5f, named("b")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver_options only_w;
  only_w.var_list = {w};
  saver sw{only_w};
  auto path = sw.save(sess, dir / "model");
  CHECK(path == dir / "model");
  sess.run(w.assign(constant(tensor::vec<float>({3.0f, 4.0f}))));

  SECTION("a variable missing from the checkpoint is NotFound") {
    saver all;
    auto err = error_of([&] { all.restore(sess, path); });
    REQUIRE(err);
    CHECK(err->code() == error_code::not_found);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("Key b not found in checkpoint"));
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 4.0f});
    // A saver of a subset restores from a checkpoint holding more.
    auto full = all.save(sess, dir / "full");
    sess.run(w.assign(constant(tensor::vec<float>({0.0f, 0.0f}))));
    sw.restore(sess, full);
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 4.0f});
  }
  SECTION("another dtype or shape is InvalidArgument") {
    graph g2;
    auto as_default2 = g2.as_default();
    variable w64{tensor::vec<int64_t>({1, 2}), named("w")};
    saver s64;
    session other{bounded(), &g2};
    auto err = error_of([&] { s64.restore(other, path); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("expected dtype int64 does not equal "
                               "original dtype float"));
    graph g3;
    auto as_default3 = g3.as_default();
    variable w3{tensor::vec<float>({1.0f, 2.0f, 3.0f}), named("w")};
    saver s3;
    session third{bounded(), &g3};
    err = error_of([&] { s3.restore(third, path); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("lhs shape= [3] rhs shape= [2]"));
  }
  SECTION("no checkpoint there, or a missing shard") {
    auto err = error_of([&] { sw.restore(sess, dir / "nothing"); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("The passed save_path is not a valid "
                               "checkpoint: "
                               + dir / "nothing"));
    fs::remove(path + ".data-00000-of-00001");
    err = error_of([&] { sw.restore(sess, path); });
    REQUIRE(err);
    CHECK(err->code() == error_code::not_found);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains(path + ".data-00000-of-00001"));
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 4.0f});
  }
}

TEST_CASE("saver: construction and save errors", "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  auto none = error_of([] { saver s; });
  REQUIRE(none);
  CHECK(none->code() == error_code::invalid_argument);
  CHECK_THAT(none->get_status().message(),
             Catch::Contains("No variables to save"));
  variable w{1.0f, named("w")};
  saver_options twice;
  twice.var_list = {w, w};
  auto dup = error_of([&] { saver s{twice}; });
  REQUIRE(dup);
  CHECK(dup->code() == error_code::invalid_argument);
  CHECK_THAT(dup->get_status().message(),
             Catch::Contains("At least two variables have the same name: w"));
  saver first;
  saver second;
  CHECK(first.restore_op().name() == "save/restore_all");
  CHECK(second.restore_op().name() == "save_1/restore_all");
  session sess{bounded(), &g};
  // An uninitialized variable: the session's error, and no file.
  auto uninit = error_of([&] { first.save(sess, dir / "model", 1); });
  REQUIRE(uninit);
  CHECK(uninit->code() == error_code::failed_precondition);
  CHECK(files_in(dir.path).empty());
  sess.run(global_variables_initializer());
  auto no_dir = error_of([&] { first.save(sess, dir / "missing/model"); });
  REQUIRE(no_dir);
  CHECK(no_dir->code() == error_code::invalid_argument);
  CHECK_THAT(no_dir->get_status().message(),
             Catch::Contains("Parent directory of " + dir / "missing/model"
                             + " doesn't exist, can't save."));
  auto clash = error_of([&] { first.save(sess, dir / "checkpoint"); });
  REQUIRE(clash);
  CHECK(clash->code() == error_code::invalid_argument);
  CHECK(files_in(dir.path).empty());
}

TEST_CASE("saver: a checkpoint of 2 ps tasks restores into a cluster with 1",
          "[saver]") {
  temp_dir dir;
  auto build = [](const cluster_spec& cluster) {
    device_scope setter{replica_device_setter(cluster)};
    model m;
    m.w = variable{tensor::vec<float>({1.0f, -2.0f, 3.0f}), named("w")};
    {
      name_scope layer{"layer1"};
      m.counts = variable{tensor::vec<int64_t>({1, 2}), named("counts")};
    }
    m.step = create_global_step();
    gradient_descent_optimizer opt{0.25};
    m.train = opt.minimize(reduce_sum(square(m.w)), &m.step);
    return m;
  };
  std::vector<float> w_saved;
  std::string path;
  {
    cluster_spec two{std::map<std::string, std::vector<std::string>>{
      {"ps", {loopback(free_port()), loopback(free_port())}},
      {"worker", {loopback(free_port())}}}};
    server ps0{two, "ps", 0};
    server ps1{two, "ps", 1};
    server worker{two, "worker", 0};
    graph g;
    auto as_default = g.as_default();
    auto m = build(two);
    CHECK(m.w.device() == "/job:ps/task:0");
    CHECK(m.counts.device() == "/job:ps/task:1");
    CHECK(m.step.device() == "/job:ps/task:0");
    saver s;
    session sess{worker.target(), bounded(), &g};
    sess.run(global_variables_initializer());
    sess.run(m.train);
    sess.run(m.train);
    sess.run(m.counts.assign(constant(tensor::vec<int64_t>({10, 20}))));
    w_saved = floats(sess.run(m.w));
    CHECK(w_saved == std::vector<float>{0.25f, -0.5f, 0.75f});
    path = s.save(sess, dir / "model.ckpt", m.step);
    CHECK(path == dir / "model.ckpt-2");
    CHECK(fs::exists(path + ".data-00000-of-00002"));
    CHECK(fs::exists(path + ".data-00001-of-00002"));
    CHECK_FALSE(fs::exists(path + ".data-00000-of-00001"));
    // Unsharded: one file for every device.
    saver_options one_file;
    one_file.sharded = false;
    saver flat{one_file};
    auto flat_path = flat.save(sess, dir / "flat");
    CHECK(fs::exists(flat_path + ".data-00000-of-00001"));
  }
  cluster_spec one{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}}, {"worker", {loopback(free_port())}}}};
  server ps0{one, "ps", 0};
  server worker{one, "worker", 0};
  graph g;
  auto as_default = g.as_default();
  auto m = build(one);
  CHECK(m.counts.device() == "/job:ps/task:0");
  saver s;
  session sess{worker.target(), bounded(), &g};
  CHECK(latest_checkpoint(dir.path) == dir / "flat");
  s.restore(sess, path);
  // The values live on the single ps task now.
  session on_ps{ps0.target(), bounded(), &g};
  CHECK(floats(on_ps.run(m.w)) == w_saved);
  CHECK(int64s(on_ps.run(m.counts)) == std::vector<int64_t>{10, 20});
  CHECK(on_ps.run(m.step).scalar_value<int64_t>() == 2);
  sess.run(m.train);
  CHECK(floats(sess.run(m.w)) == std::vector<float>{0.125f, -0.25f, 0.375f});
  // The unsharded checkpoint restores just the same.
  s.restore(sess, dir / "flat");
  CHECK(floats(sess.run(m.w)) == w_saved);
}

TEST_CASE("saver: an interrupted save leaves the previous checkpoint valid",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver s;
  auto p1 = s.save(sess, dir / "model.ckpt", 1);
  auto state_before = slurp(dir / "checkpoint");
  auto set_w = [&](float a, float b) {
    sess.run(w.assign(constant(tensor::vec<float>({a, b}))));
  };
  auto p2 = dir / "model.ckpt-2";

  SECTION("leftovers of a save killed before its index was renamed") {
    // A complete shard without an index, half-written temporary files and
    // a temporary state file naming the unfinished checkpoint.
    fs::copy_file(p1 + ".data-00000-of-00001", p2 + ".data-00000-of-00001");
    spit(p2 + ".data-00000-of-00001.tmp0123456789abcdef", "AFCK\x01");
    spit(p2 + ".index.tmpfedcba9876543210", "AF");
    spit(dir / "checkpoint.tmp00112233aabbccdd",
         "model_checkpoint_path: \"" + p2 + "\"\n");
    CHECK(latest_checkpoint(dir.path) == p1);
    set_w(5.0f, 6.0f);
    s.restore(sess, latest_checkpoint(dir.path));
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 2.0f});
    auto err = error_of([&] { s.restore(sess, p2); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    // The chief removes them at start.
    auto removed = remove_checkpoint_leftovers(dir.path);
    CHECK(std::set<std::string>(removed.begin(), removed.end())
          == std::set<std::string>{
            p2 + ".data-00000-of-00001",
            p2 + ".data-00000-of-00001.tmp0123456789abcdef",
            p2 + ".index.tmpfedcba9876543210",
            dir / "checkpoint.tmp00112233aabbccdd"});
    CHECK(files_in(dir.path)
          == std::set<std::string>{"checkpoint", "model.ckpt-1.index",
                                   "model.ckpt-1.data-00000-of-00001"});
    // The next save of that step completes.
    set_w(7.0f, 8.0f);
    CHECK(s.save(sess, dir / "model.ckpt", 2) == p2);
    CHECK(latest_checkpoint(dir.path) == p2);
    set_w(0.0f, 0.0f);
    s.restore(sess, p2);
    CHECK(floats(sess.run(w)) == std::vector<float>{7.0f, 8.0f});
  }
  SECTION("a save failing after its shards were written") {
    // The index cannot be renamed into place (a directory is in the way).
    fs::create_directory(p2 + ".index");
    set_w(3.0f, 4.0f);
    auto err = error_of([&] { s.save(sess, dir / "model.ckpt", 2); });
    REQUIRE(err);
    CHECK(err->code() == error_code::unknown);
    CHECK_THAT(err->get_status().message(), Catch::Contains(p2 + ".index"));
    CHECK(slurp(dir / "checkpoint") == state_before);
    CHECK(latest_checkpoint(dir.path) == p1);
    CHECK(s.last_checkpoints() == std::vector<std::string>{p1});
    for (auto& name : files_in(dir.path))
      CHECK(name.find(".tmp") == std::string::npos);
    // Nor does the shard it wrote stay.
    CHECK_FALSE(fs::exists(p2 + ".data-00000-of-00001"));
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("a save whose state file cannot be replaced") {
    fs::remove(dir / "checkpoint");
    fs::create_directory(dir / "checkpoint");
    auto err = error_of([&] { s.save(sess, dir / "model.ckpt", 2); });
    REQUIRE(err);
    CHECK(err->code() == error_code::unknown);
    CHECK_THAT(err->get_status().message(), Catch::Contains(dir / "checkpoint"));
    // The saver did not take the checkpoint the state file does not name.
    CHECK(s.last_checkpoints() == std::vector<std::string>{p1});
  }
  SECTION("the same name saved again: the old checkpoint stays whole until "
          "the new index replaces its index") {
    auto old_index = slurp(p1 + ".index");
    auto old_shard = slurp(p1 + ".data-00000-of-00001");
    set_w(3.0f, 4.0f);
    CHECK(s.save(sess, dir / "model.ckpt", 1) == p1);
    // The new shard has a name of its own (the new checkpoint id); the one
    // it replaced is gone.
    auto named_shard = [&] {
      std::string found;
      for (auto& name : files_in(dir.path))
        if (name.starts_with("model.ckpt-1.data-00000-of-00001."))
          found = name;
      return found;
    };
    auto first = named_shard();
    CHECK(first.size() == std::string{"model.ckpt-1.data-00000-of-00001."}.size()
                            + 16);
    CHECK(files_in(dir.path)
          == std::set<std::string>{"checkpoint", "model.ckpt-1.index", first});
    set_w(0.0f, 0.0f);
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 4.0f});
    // Killed before the new index was in place: the old index and shard,
    // and the new shard beside them.
    spit(p1 + ".data-00000-of-00001", old_shard);
    spit(p1 + ".index", old_index);
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 2.0f});
    // What the chief removes at start: the shard no index refers to.
    CHECK(remove_checkpoint_leftovers(dir.path)
          == std::vector<std::string>{dir / first});
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 2.0f});
    // Killed after the new index was in place, before the old shard was
    // removed: the new checkpoint, and the old shard is a leftover.
    set_w(3.0f, 4.0f);
    s.save(sess, dir / "model.ckpt", 1);
    first = named_shard();
    spit(p1 + ".data-00000-of-00001", old_shard);
    set_w(0.0f, 0.0f);
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 4.0f});
    CHECK(remove_checkpoint_leftovers(dir.path)
          == std::vector<std::string>{p1 + ".data-00000-of-00001"});
    // A third save replaces the named shard by another.
    set_w(5.0f, 6.0f);
    s.save(sess, dir / "model.ckpt", 1);
    auto second = named_shard();
    CHECK(second != first);
    CHECK(files_in(dir.path)
          == std::set<std::string>{"checkpoint", "model.ckpt-1.index", second});
    set_w(0.0f, 0.0f);
    s.restore(sess, p1);
    CHECK(floats(sess.run(w)) == std::vector<float>{5.0f, 6.0f});
  }
}

TEST_CASE("saver: restore_newest falls back past a damaged checkpoint, "
          "saying why",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({0.0f, 0.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver s;
  auto set_w = [&](float x) {
    sess.run(w.assign(constant(tensor::vec<float>({x, x}))));
  };
  std::vector<std::string> log;
  auto sink = [&](const std::string& line) { log.push_back(line); };
  CHECK(s.restore_newest(sess, dir.path, sink).empty());
  CHECK(log.empty());
  std::vector<std::string> p;
  for (int step = 1; step <= 3; ++step) {
    set_w(static_cast<float>(step));
    p.push_back(s.save(sess, dir / "model", step));
  }
  auto shard = [&](int step) {
    return p[static_cast<size_t>(step - 1)] + ".data-00000-of-00001";
  };
  auto flip_last_byte = [&](const std::string& file) {
    auto bytes = slurp(file);
    bytes.back() = static_cast<char>(bytes.back() ^ 0x40);
    spit(file, bytes);
  };
  set_w(0.0f);

  SECTION("the latest restores") {
    CHECK(s.restore_newest(sess, dir.path, sink) == p[2]);
    CHECK(log == std::vector<std::string>{"Restoring parameters from " + p[2]});
    CHECK(floats(sess.run(w)) == std::vector<float>{3.0f, 3.0f});
    CHECK(s.last_restored() == p[2]);
    s.save(sess, dir / "model", 4);
    CHECK(s.last_restored().empty());
  }
  SECTION("a damaged latest: the next newest, and the log says why") {
    flip_last_byte(shard(3));
    CHECK(s.restore_newest(sess, dir.path, sink) == p[1]);
    CHECK(floats(sess.run(w)) == std::vector<float>{2.0f, 2.0f});
    CHECK(s.last_restored() == p[1]);
    REQUIRE(log.size() == 3);
    CHECK(log[0] == "Restoring parameters from " + p[2]);
    CHECK_THAT(log[1], StartsWith("Could not restore checkpoint " + p[2]
                                  + " (DataLoss: corrupt checkpoint file "
                                  + shard(3) + ": checksum does not match"));
    CHECK_THAT(log[1], EndsWith("): trying the next newest, " + p[1]));
    CHECK(log[2] == "Restoring parameters from " + p[1]);
    // The state file is as it was: a later save replaces the damaged one.
    CHECK(latest_checkpoint(dir.path) == p[2]);
  }
  SECTION("a latest without its index, and one without its shard") {
    fs::remove(p[2] + ".index");
    fs::remove(shard(2));
    CHECK(s.restore_newest(sess, dir.path, sink) == p[0]);
    CHECK(floats(sess.run(w)) == std::vector<float>{1.0f, 1.0f});
    REQUIRE(log.size() == 4);
    CHECK_THAT(log[0], Contains("Could not restore checkpoint " + p[2]
                                + " (NotFound: no index file " + p[2]
                                + ".index)"));
    CHECK(log[1] == "Restoring parameters from " + p[1]);
    CHECK_THAT(log[2], Contains("Could not restore checkpoint " + p[1]
                                + " (NotFound: Failed to open " + shard(2)));
    CHECK(log[3] == "Restoring parameters from " + p[0]);
  }
  SECTION("none restores: the newest one's error, naming the others") {
    for (int step = 1; step <= 3; ++step)
      flip_last_byte(shard(step));
    auto err = error_of([&] { s.restore_newest(sess, dir.path, sink); });
    REQUIRE(err);
    CHECK(err->code() == error_code::data_loss);
    CHECK_THAT(err->get_status().message(),
               StartsWith("No checkpoint in " + dir.path.string()
                          + " restores: corrupt checkpoint file " + shard(3)));
    CHECK_THAT(err->get_status().message(),
               Contains("(and the older ones: DataLoss: corrupt checkpoint "
                        "file " + shard(2)));
    CHECK_THAT(err->get_status().message(), Contains(shard(1)));
    CHECK(floats(sess.run(w)) == std::vector<float>{0.0f, 0.0f});
    CHECK(s.last_restored().empty());
  }
  SECTION("no checkpoint the state file names exists: nothing to restore") {
    for (auto& path : p)
      fs::remove(path + ".index");
    CHECK(s.restore_newest(sess, dir.path, sink).empty());
    CHECK(log.empty());
  }
  SECTION("a checkpoint that does not fit the variables is an error, not "
          "skipped") {
    graph g3;
    auto as_default3 = g3.as_default();
    variable w3{tensor::vec<float>({1.0f, 2.0f, 3.0f}), named("w")};
    saver s3;
    session third{bounded(), &g3};
    auto err = error_of([&] { s3.restore_newest(third, dir.path, sink); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Contains("lhs shape= [3] rhs shape= [2]"));
    CHECK(log == std::vector<std::string>{"Restoring parameters from " + p[2]});
  }
}

TEST_CASE("saver: remove_checkpoint_leftovers removes temporary files and "
          "shards no index refers to, and nothing else",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  saver s;
  auto p1 = s.save(sess, dir / "model", 1);
  auto p2 = s.save(sess, dir / "model", 2);
  s.save(sess, dir / "model", 2); // its shard is named with its id
  auto p3 = s.save(sess, dir / "model", 3);
  CHECK(remove_checkpoint_leftovers(dir.path).empty());
  auto live = files_in(dir.path);
  auto p1_shard = slurp(p1 + ".data-00000-of-00001");
  std::set<std::string> leftovers{
    "checkpoint.tmp0123456789abcdef",
    "model-1.index.tmp0123456789abcdef",
    "model-1.data-00000-of-00001.tmpfedcba9876543210",
    "model-2.data-00000-of-00001.0123456789abcdef.tmp0123456789abcdef",
    // No index.
    "model-7.data-00000-of-00002",
    "model-7.data-00001-of-00002.0123456789abcdef",
    // model-2's index names its shards with its id: another id, or TF's
    // name.
    "model-2.data-00000-of-00001.0000000000000001",
    "model-2.data-00000-of-00001",
    // model-1's index names TF's names: a named shard, or one of another
    // save (its header's id).
    "model-1.data-00000-of-00001.0123456789abcdef",
    "model-1.data-00000-of-00002"};
  for (auto& name : leftovers)
    spit(dir / name, p1_shard);
  spit(dir / "model-1.data-00000-of-00002",
       slurp(p3 + ".data-00000-of-00001"));
  // Not ours, or not the leftovers of a save.
  std::set<std::string> kept{"notes.txt", "notes.tmp0123456789abcdef",
                             "model-1.data-00000-of-00001.tmp0123",
                             "model-1.data-00000-of-00001.old",
                             // A shard whose header does not check out.
                             "model-1.data-00000-of-00003"};
  for (auto& name : kept)
    spit(dir / name, "x");
  // An index that cannot be read: its shards stay (restore reports them).
  spit(p3 + ".index", "damaged");
  spit(p3 + ".data-00000-of-00004", p1_shard);
  kept.insert("model-3.data-00000-of-00004");
  auto removed = remove_checkpoint_leftovers(dir.path);
  std::set<std::string> removed_names;
  for (auto& path : removed) {
    CHECK(fs::path{path}.parent_path() == dir.path);
    removed_names.insert(fs::path{path}.filename().string());
  }
  CHECK(removed_names == leftovers);
  auto expected = live;
  expected.insert(kept.begin(), kept.end());
  CHECK(files_in(dir.path) == expected);
  s.restore(sess, p1);
  s.restore(sess, p2);
}

TEST_CASE("saver: var_names save and restore under other names, as TF's "
          "dict var_list",
          "[saver]") {
  temp_dir dir;
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  session sess{bounded(), &g};
  sess.run(w.initializer());
  saver_options named_opts;
  named_opts.var_list = {w};
  named_opts.var_names = {"model/weights"};
  saver by_name{named_opts};
  auto path = by_name.save(sess, dir / "model");
  graph g2;
  auto as_default2 = g2.as_default();
  variable renamed{tensor::vec<float>({0.0f, 0.0f}), named("renamed")};
  session other{bounded(), &g2};
  // Restored from the name it was saved under, whatever its node's.
  named_opts.var_list = {renamed};
  saver restorer{named_opts};
  restorer.restore(other, path);
  CHECK(floats(other.run(renamed)) == std::vector<float>{1.0f, 2.0f});
  // By node name, it is not there.
  saver plain;
  auto err = error_of([&] { plain.restore(other, path); });
  REQUIRE(err);
  CHECK(err->code() == error_code::not_found);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("Key renamed not found in checkpoint"));
  auto refused = [&](std::vector<std::string> names, const char* why) {
    saver_options o;
    o.var_list = {renamed};
    o.var_names = std::move(names);
    auto e = error_of([&] { saver{o}; });
    REQUIRE(e);
    CHECK(e->code() == error_code::invalid_argument);
    CHECK_THAT(e->get_status().message(), Catch::Contains(why));
  };
  refused({"a", "b"}, "2 var_names for 1 variables");
  refused({""}, "the name of variable renamed in var_names is empty");
}
