// file_policy (issue 30 §3): file roots and denied files, and the readers
// that check them before they open a file.

#include <fcntl.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "actorflow/kernels/file_policy.hpp"
#include "actorflow/kernels/reader_core.hpp"
#include "common/temp_dir.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

namespace fs = std::filesystem;

const std::string who = "WholeFileReader 'r'";

std::string canonical(const std::string& p) {
  return fs::canonical(p).string();
}

// A root with data/ inside and key/ (the node's files) outside it.
struct layout {
  temp_dir dir{"actorflow-file-policy"};
  std::string root;
  std::string outside;
  std::string inside_file;
  std::string outside_file;
  std::string key;
  file_policy policy;

  layout() {
    fs::create_directories(dir.path / "root" / "sub");
    fs::create_directories(dir.path / "outside");
    fs::create_directories(dir.path / "etc");
    root = dir / "root";
    outside = dir / "outside";
    inside_file = dir.write("root/sub/data.csv", "1,2\n");
    outside_file = dir.write("outside/secret.txt", "secret");
    key = dir.write("etc/node.key", "-----BEGIN PRIVATE KEY-----");
    policy.deny(key, "the node's TLS key (--tls_key)");
  }

  status check(const std::string& path,
               file_access access = file_access::read,
               std::string* resolved = nullptr) const {
    return policy.check(who, path, access, resolved);
  }
};

void require_denied(const status& st, const std::string& path,
                    const std::string& why) {
  INFO(st.to_string());
  REQUIRE(st.code() == error_code::permission_denied);
  CHECK_THAT(st.message(), Catch::Contains(who));
  CHECK_THAT(st.message(), Catch::Contains("'" + path + "'"));
  CHECK_THAT(st.message(), Catch::Contains(why));
}

} // namespace

TEST_CASE("file_policy: unrestricted by default, but for the denied files",
          "[file_policy]") {
  layout l;
  CHECK_FALSE(l.policy.restricted());
  CHECK(l.check(l.inside_file).ok());
  CHECK(l.check(l.outside_file).ok());
  CHECK(l.check(l.dir / "nowhere/new.txt", file_access::write).ok());
  CHECK(l.check("").ok());
  auto st = l.check(l.key);
  require_denied(st, l.key, "it is the node's TLS key (--tls_key), which no "
                            "op opens (file roots: unrestricted: no "
                            "--file_roots)");
  CHECK_THAT(st.message(), Catch::StartsWith(who + " may not read '"));
  // Writing it (a Save over the key) neither.
  st = l.check(l.key, file_access::write);
  require_denied(st, l.key, "the node's TLS key");
  CHECK_THAT(st.message(), Catch::Contains("may not write"));
}

TEST_CASE("file_policy: a file inside a root is allowed, resolved",
          "[file_policy]") {
  layout l;
  REQUIRE(l.policy.set_roots({l.root}).ok());
  CHECK(l.policy.restricted());
  CHECK(l.policy.roots() == std::vector<std::string>{canonical(l.root)});
  std::string resolved;
  auto st = l.check(l.inside_file, file_access::read, &resolved);
  INFO(st.to_string());
  CHECK(st.ok());
  CHECK(resolved == canonical(l.inside_file));
  // Relative to the working directory, with `.` and harmless `..`.
  auto cwd = fs::current_path();
  fs::current_path(l.root);
  CHECK(l.check("sub/../sub/./data.csv").ok());
  CHECK_FALSE(l.check("../outside/secret.txt").ok());
  fs::current_path(cwd);
  // A root given with a trailing slash, and the root itself.
  file_policy slash;
  REQUIRE(slash.set_roots({l.root + "/"}).ok());
  CHECK(slash.check(who, l.inside_file, file_access::read).ok());
  CHECK(slash.check(who, l.root, file_access::read).ok());
}

TEST_CASE("file_policy: a path outside every root is denied, naming the "
          "roots",
          "[file_policy]") {
  layout l;
  REQUIRE(l.policy.set_roots({l.root, l.dir / "etc"}).ok());
  auto st = l.check(l.outside_file);
  require_denied(st, l.outside_file,
                 "it is outside the file roots (" + canonical(l.root) + ", "
                   + canonical(l.dir / "etc") + ")");
  // A sibling whose name starts like the root is not inside it.
  fs::create_directories(l.dir.path / "rootless");
  auto sibling = l.dir.write("rootless/x", "x");
  require_denied(l.check(sibling), sibling, "outside the file roots");
  // The denied file, inside a root, is still denied.
  require_denied(l.check(l.key), l.key, "the node's TLS key");
}

TEST_CASE("file_policy: a closed policy opens no file until roots are "
          "named",
          "[file_policy]") {
  layout l;
  l.policy.close("with TLS, ops open files only under --file_roots");
  CHECK(l.policy.restricted());
  auto why = "it is outside the file roots (none: with TLS, ops open files "
             "only under --file_roots)";
  require_denied(l.check(l.inside_file), l.inside_file, why);
  require_denied(l.check(l.inside_file, file_access::write), l.inside_file,
                 why);
  require_denied(l.check("/etc/hostname"), "/etc/hostname", why);
  // A path that cannot be resolved is not opened either.
  auto loop = l.dir / "root/loop";
  fs::create_symlink(loop, loop);
  require_denied(l.check(loop), loop, "it cannot be resolved");
  // Naming roots opens them (and only them).
  REQUIRE(l.policy.set_roots({l.root}).ok());
  CHECK(l.check(l.inside_file).ok());
  require_denied(l.check(l.outside_file), l.outside_file,
                 "outside the file roots (" + canonical(l.root) + ")");
}

TEST_CASE("file_policy: `..` cannot lead out of a root", "[file_policy]") {
  layout l;
  REQUIRE(l.policy.set_roots({l.root}).ok());
  auto escape = l.root + "/sub/../../outside/secret.txt";
  auto st = l.check(escape);
  require_denied(st, escape, "outside the file roots");
  CHECK_THAT(st.message(),
             Catch::Contains("(that is, " + canonical(l.outside_file) + ")"));
  // Through a directory that does not exist, too (folded, not followed).
  auto ghost = l.root + "/nothing/../../outside/secret.txt";
  require_denied(l.check(ghost), ghost, "outside the file roots");
  // To be created.
  auto created = l.root + "/../outside/new.ckpt";
  require_denied(l.check(created, file_access::write), created,
                 "outside the file roots");
}

TEST_CASE("file_policy: symbolic links cannot lead out of a root",
          "[file_policy]") {
  layout l;
  REQUIRE(l.policy.set_roots({l.root}).ok());
  // A link to a file outside.
  auto link = l.dir / "root/link.txt";
  fs::create_symlink(l.outside_file, link);
  require_denied(l.check(link), link, "outside the file roots");
  // A link to a directory outside, and a file below it.
  auto dir_link = l.dir / "root/out";
  fs::create_symlink(l.outside, dir_link);
  auto through = dir_link + "/secret.txt";
  require_denied(l.check(through), through, "outside the file roots");
  // A dangling link to a file to be created outside (open(O_CREAT) would
  // create it there).
  auto dangling = l.dir / "root/later.ckpt";
  fs::create_symlink(l.outside + "/later.ckpt", dangling);
  require_denied(l.check(dangling, file_access::write), dangling,
                 "outside the file roots");
  // A relative link that stays inside is fine.
  auto inner = l.dir / "root/inner.csv";
  fs::create_symlink("sub/data.csv", inner);
  std::string resolved;
  CHECK(l.check(inner, file_access::read, &resolved).ok());
  CHECK(resolved == canonical(l.inside_file));
  // A loop of links is refused within roots.
  auto a = l.dir / "root/a";
  auto b = l.dir / "root/b";
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  auto st = l.check(a);
  CHECK(st.code() == error_code::permission_denied);
  // A link to the key is the key.
  auto key_link = l.dir / "root/key.pem";
  fs::create_symlink(l.key, key_link);
  require_denied(l.check(key_link), key_link, "the node's TLS key");
}

TEST_CASE("file_policy: a hard link to the key is the key", "[file_policy]") {
  layout l;
  auto hard = l.dir / "root/innocent.txt";
  fs::create_hard_link(l.key, hard);
  // Unrestricted...
  require_denied(l.check(hard), hard, "the node's TLS key");
  // ... and inside a root.
  REQUIRE(l.policy.set_roots({l.root}).ok());
  require_denied(l.check(hard), hard, "the node's TLS key");
  // Opened after a check (a link swapped in meanwhile): check_opened.
  auto fd = ::open(hard.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto st = l.policy.check_opened(who, hard, fd);
  ::close(fd);
  require_denied(st, hard, "the node's TLS key");
  fd = ::open(l.inside_file.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(l.policy.check_opened(who, l.inside_file, fd).ok());
  ::close(fd);
}

TEST_CASE("file_policy: a key renewed by rename stays denied",
          "[file_policy]") {
  layout l;
  auto renewed = l.dir.write("etc/node.key.new", "new key");
  fs::rename(renewed, l.key);
  require_denied(l.check(l.key), l.key, "the node's TLS key");
  auto hard = l.dir / "root/new-link.txt";
  fs::create_hard_link(l.key, hard);
  require_denied(l.check(hard), hard, "the node's TLS key");
  // A removed key denies nothing (its inode may be reused by any file).
  fs::remove(l.key);
  fs::remove(hard);
  auto other = l.dir.write("root/other.txt", "x");
  CHECK(l.check(other).ok());
}

TEST_CASE("file_policy: a file to be created in a root is allowed",
          "[file_policy]") {
  layout l;
  REQUIRE(l.policy.set_roots({l.root}).ok());
  std::string resolved;
  auto target = l.root + "/sub/model.ckpt-100.index";
  auto st = l.check(target, file_access::write, &resolved);
  INFO(st.to_string());
  CHECK(st.ok());
  CHECK(resolved == canonical(l.root) + "/sub/model.ckpt-100.index");
  // In a directory still to be made, too.
  CHECK(l.check(l.root + "/new/dir/x", file_access::write).ok());
  require_denied(l.check(l.outside + "/model.ckpt", file_access::write),
                 l.outside + "/model.ckpt", "outside the file roots");
}

TEST_CASE("file_policy: a root that does not exist or is a file is refused",
          "[file_policy]") {
  layout l;
  auto st = l.policy.set_roots({l.root, l.dir / "missing"});
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(),
             Catch::StartsWith("file_roots: " + (l.dir / "missing") + ": "));
  CHECK_THAT(st.message(), Catch::Contains("No such file or directory"));
  // Unchanged: still unrestricted.
  CHECK_FALSE(l.policy.restricted());
  st = l.policy.set_roots({l.inside_file});
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "file_roots: " + l.inside_file + ": not a directory");
  st = l.policy.set_roots({""});
  CHECK(st.code() == error_code::invalid_argument);
  // A root that is a link to a directory is that directory.
  auto link = l.dir / "root-link";
  fs::create_symlink(l.root, link);
  REQUIRE(l.policy.set_roots({link}).ok());
  CHECK(l.policy.roots() == std::vector<std::string>{canonical(l.root)});
  CHECK(l.check(l.inside_file).ok());
}

TEST_CASE("file_policy: the readers check the process's policy before "
          "they open a file",
          "[file_policy][reader_core]") {
  // The process policy's denied files only (its roots are set once per
  // process, by the apps' --file_roots; integration tests cover them).
  temp_dir dir{"actorflow-file-policy"};
  auto key = dir.write("node.key", "-----BEGIN PRIVATE KEY-----");
  auto link = dir / "link.txt";
  fs::create_hard_link(key, link);
  auto data = dir.write("data.txt", "a\nb\n");
  deny_file_access(key, "the node's TLS key (--tls_key)");
  for (const auto* op : {"WholeFileReaderV2", "TextLineReaderV2",
                         "FixedLengthRecordReaderV2"}) {
    node_def node;
    node.name = "r";
    node.op = op;
    if (std::string{op} == "FixedLengthRecordReaderV2")
      node.attrs = {{"record_bytes", int64_t{1}}};
    std::unique_ptr<reader_core> reader;
    REQUIRE(reader_core::make(node, reader).ok());
    for (const auto& path : {key, link}) {
      reader_core::request req;
      REQUIRE_FALSE(reader->advance(req));
      auto st = reader->start_work(path);
      if (st.ok()) {
        // The WholeFileReader opens its file when it reads.
        REQUIRE(reader->advance(req));
        st = req.result;
        CHECK(req.values.empty());
        reader->reset();
      }
      INFO(op << " " << st.to_string());
      CHECK(st.code() == error_code::permission_denied);
      CHECK_THAT(st.message(), Catch::Contains("'r' may not read '" + path));
      CHECK_THAT(st.message(), Catch::Contains("the node's TLS key"));
    }
    reader_core::request req;
    REQUIRE_FALSE(reader->advance(req));
    REQUIRE(reader->start_work(data).ok());
    REQUIRE(reader->advance(req));
    CHECK(req.result.ok());
    CHECK(req.values.size() == 1);
  }
  CHECK(file_roots().empty());
}
