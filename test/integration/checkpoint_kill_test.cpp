// A checkpoint always restores: a chief killed at any file operation of a
// save (strace's fault injection sends SIGKILL as it enters the syscall)
// leaves a directory whose next start restores one of the saves that
// completed, never a mix and never an error, and cleans up what the
// killed save left behind.

#include <sys/types.h>

#include <csignal>
#include <functional>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "integration_util.hpp"
#include "common/temp_dir.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace fs = std::filesystem;

namespace {

const std::string writer_path = ACTORFLOW_CHECKPOINT_WRITER_PATH;
const std::string strace_path = "/usr/bin/strace";

/// The file operations a save may make; each is a kill point.
const std::string file_syscalls = "openat,write,pwrite64,fsync,fdatasync,"
                                  "close,ftruncate,rename,renameat,"
                                  "renameat2,unlink,unlinkat,mkdir,rmdir";

/// One syscall of the traced save: its name, which invocation of that name
/// it is on its thread (strace counts injections per syscall and thread),
/// and what identifies it in a trace line.
struct file_op {
  std::string name;
  int ordinal = 0;
  std::string key;
};

/// A trace line's call without its result and the random parts: the
/// directory `dir`, a temporary file's suffix, the checkpoint id in a
/// shard's name, and a write's bytes (they hold the id too). "rename(\"DIR/a.tmpX\", \"DIR/a\"" for
/// both `rename("/tmp/d/a.tmp0123...", "/tmp/d/a") = 0` and the
/// `<unfinished ...>` of a killed call.
std::string call_key(std::string call, const std::string& dir) {
  for (auto at = call.find(dir); at != std::string::npos;
       at = call.find(dir, at))
    call.replace(at, dir.size(), "DIR");
  static const std::regex tmp{R"(\.tmp[0-9a-f]{16})"};
  call = std::regex_replace(call, tmp, ".tmpX");
  static const std::regex id{R"((\.data-\d{5}-of-\d{5})\.[0-9a-f]{16})"};
  call = std::regex_replace(call, id, "$1.ID");
  if (auto at = call.find(" <unfinished ...>"); at != std::string::npos)
    call.resize(at);
  else if (auto eq = call.rfind(" = "); eq != std::string::npos) {
    // "close(6)                          = 0": padded before the result.
    call.resize(eq);
    while (!call.empty() && call.back() == ' ')
      call.pop_back();
    if (!call.empty() && call.back() == ')')
      call.pop_back();
  }
  if (call.rfind("write(", 0) == 0) {
    // write(fd, "bytes"..., size
    auto comma = call.find(',');
    auto last = call.rfind(", ");
    call = call.substr(0, comma) + ", ..." + call.substr(last);
  }
  return call;
}

struct trace_line {
  pid_t tid = 0;
  std::string name;
  std::string call;
};

std::vector<trace_line> read_trace(const std::string& file) {
  static const std::regex line_re{R"(^(\d+) +(([a-z0-9_]+)\(.*)$)"};
  std::vector<trace_line> lines;
  std::ifstream in{file};
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, line_re))
      lines.push_back({static_cast<pid_t>(std::stol(m[1].str())),
                       m[3].str(), m[2].str()});
  return lines;
}

/// The file operations of the save in a trace of `checkpoint_writer
/// save`: those of the marker's thread after the marker.
std::vector<file_op> save_ops(const std::vector<trace_line>& lines,
                              const std::string& dir) {
  std::vector<file_op> ops;
  std::map<std::string, int> seen;
  pid_t tid = 0;
  for (auto& l : lines) {
    if (tid == 0 && l.name == "access"
        && l.call.find("/.save-begins\"") != std::string::npos) {
      tid = l.tid;
      // Invocations before the marker on other threads do not count.
      seen.clear();
      for (auto& before : lines) {
        if (&before == &l)
          break;
        if (before.tid == tid)
          ++seen[before.name];
      }
      continue;
    }
    if (tid == 0 || l.tid != tid || l.name == "access")
      continue;
    ops.push_back({l.name, ++seen[l.name], call_key(l.call, dir)});
  }
  return ops;
}

std::string strace_set() {
  return "trace=access," + file_syscalls;
}

support::process_result run_writer(std::vector<std::string> args) {
  args.insert(args.begin(), writer_path);
  return run_process(std::move(args), std::chrono::seconds{60});
}

/// Runs `checkpoint_writer save` and requires it to succeed.
void save(const std::string& dir, int step, int value) {
  auto r = run_writer({"save", dir, std::to_string(step),
                       std::to_string(value)});
  INFO(r.out << r.err);
  REQUIRE(r.status.success());
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (auto& entry : fs::directory_iterator{dir})
    names.insert(entry.path().filename().string());
  return names;
}

/// What a start of the chief restored: "<path> value <V>".
std::string restored_by_start(const std::string& dir, std::string& out) {
  auto r = run_writer({"start", dir});
  out = r.out + r.err;
  static const std::regex restored_re{R"(\nrestored (\S+) value (-?\d+)\n)"};
  std::smatch m;
  auto text = "\n" + r.out;
  if (!r.status.success() || !std::regex_search(text, m, restored_re))
    return "failed: " + r.status.to_string();
  return m[1].str() + " value " + m[2].str();
}

bool strace_works() {
  if (!fs::exists(strace_path))
    return false;
  auto r = run_process({strace_path, "-f", "-qq", "-o", "/dev/null",
                        "/bin/true"},
                       std::chrono::seconds{20});
  return r.status.success();
}

/// One scenario: `base(dir)` writes the checkpoints there before the save
/// of `step` with generation `value`, which is killed at each of its file
/// operations in turn; every start after a kill must restore one of
/// `allowed` (checkpoint name relative to the directory, and generation).
void kill_at_every_operation(
  const std::function<void(const std::string&)>& base, int step, int value,
  const std::set<std::pair<std::string, int>>& allowed) {
  // A complete save under strace, to learn its file operations.
  std::vector<file_op> ops;
  {
    temp_dir dir{"actorflow-kill"};
    auto d = dir.path.string();
    base(d);
    temp_dir traces{"actorflow-kill-traces"};
    auto trace = traces / "save";
    auto r = run_process({strace_path, "-f", "-qq", "-o", trace, "-e",
                          strace_set(), writer_path, "save", d,
                          std::to_string(step), std::to_string(value)},
                         std::chrono::seconds{60});
    INFO(r.out << r.err);
    REQUIRE(r.status.success());
    ops = save_ops(read_trace(trace), d);
  }
  // Files are created, written, synced, renamed and deleted.
  std::set<std::string> names;
  for (auto& op : ops)
    names.insert(op.name);
  for (auto* name : {"openat", "write", "fsync", "rename"})
    CHECK(names.count(name) == 1);
  REQUIRE(ops.size() >= 12);
  temp_dir traces{"actorflow-kill-traces"};
  for (size_t i = 0; i < ops.size(); ++i) {
    auto& op = ops[i];
    INFO("killed at operation " << i + 1 << " of " << ops.size() << ": "
                                << op.key << " (" << op.name << " #"
                                << op.ordinal << ")");
    temp_dir dir{"actorflow-kill"};
    auto d = dir.path.string();
    base(d);
    auto before = files_in(d);
    auto trace = traces / ("kill-" + std::to_string(i + 1));
    auto r = run_process(
      {strace_path, "-f", "-qq", "-o", trace, "-e", strace_set(), "-e",
       "inject=" + op.name + ":signal=KILL:when="
         + std::to_string(op.ordinal),
       writer_path, "save", d, std::to_string(step), std::to_string(value)},
      std::chrono::seconds{60});
    // The writer died at exactly this operation: its thread's last call
    // is the one the dry run saw there, left unfinished.
    CHECK(r.status.signal == SIGKILL);
    auto lines = read_trace(trace);
    pid_t tid = 0;
    for (auto& l : lines)
      if (l.name == "access"
          && l.call.find("/.save-begins\"") != std::string::npos)
        tid = l.tid;
    REQUIRE(tid != 0);
    std::string last;
    for (auto& l : lines)
      if (l.tid == tid)
        last = l.call;
    CHECK(call_key(last, d) == op.key);
    CHECK((last.find("<unfinished ...>") != std::string::npos
           || last.ends_with("= ?")));
    // The next start restores a save that completed.
    std::string out;
    auto got = restored_by_start(d, out);
    INFO("files before: " << ::Catch::Detail::stringify(before)
                          << "\nafter the kill and a start: "
                          << ::Catch::Detail::stringify(files_in(d))
                          << "\nstart's output:\n"
                          << out);
    std::set<std::string> ok;
    for (auto& [name, v] : allowed)
      ok.insert(d + "/" + name + " value " + std::to_string(v));
    CHECK(ok.count(got) == 1);
    // Every checkpoint the state file names is whole: no fallback.
    CHECK(out.find("Could not restore") == std::string::npos);
    // It did not write the checkpoint it had just restored again, and it
    // removed what the killed save left: temporary files, and data files
    // no index refers to.
    CHECK(out.find("Saving checkpoints for") == std::string::npos);
    auto after = files_in(d);
    for (auto& name : after) {
      CHECK(name.find(".tmp") == std::string::npos);
      auto data = name.find(".data-");
      if (data != std::string::npos)
        CHECK(after.count(name.substr(0, data) + ".index") == 1);
    }
    // Starting again restores the same.
    std::string again_out;
    CHECK(restored_by_start(d, again_out) == got);
  }
}

} // namespace

TEST_CASE("checkpoint: a save killed at any of its file operations leaves a "
          "checkpoint that restores",
          "[checkpoint][kill]") {
  if (!strace_works()) {
    WARN("strace (" + strace_path + ") is missing or cannot trace here "
         "(scripts/setup.sh installs it): not run");
    return;
  }
  auto two = [](const std::string& d) {
    save(d, 1, 1);
    save(d, 2, 2);
  };
  SECTION("a new checkpoint, deleting the oldest (max_to_keep 2)") {
    kill_at_every_operation(two, 3, 3,
                            {{"model.ckpt-2", 2}, {"model.ckpt-3", 3}});
  }
  SECTION("the latest checkpoint saved again under its name") {
    kill_at_every_operation(two, 2, 3,
                            {{"model.ckpt-2", 2}, {"model.ckpt-2", 3}});
  }
  SECTION("the latest checkpoint saved under its name a third time") {
    auto three = [&](const std::string& d) {
      two(d);
      save(d, 2, 3);
    };
    kill_at_every_operation(three, 2, 4,
                            {{"model.ckpt-2", 3}, {"model.ckpt-2", 4}});
  }
}
