// Which files ops may open (issue 30 §3): file roots and denied files.

#include "actorflow/kernels/file_policy.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <utility>

namespace actorflow {

namespace {

namespace fs = std::filesystem;

// open(2)'s limit on symbolic links in one path (Linux's MAXSYMLINKS).
constexpr int max_links = 40;

// `path` as open(2) would find it: absolute, `.` and `..` folded, every
// symbolic link followed, a dangling one too (a link to a file that does
// not exist yet counts where it points: open(O_CREAT) would create the
// file there). False with `why` if it cannot be resolved (a directory on
// the way that cannot be searched, a loop of links).
bool resolve(const std::string& path, fs::path& out, std::string& why) {
  std::error_code ec;
  auto p = fs::absolute(path, ec);
  if (ec) {
    why = ec.message();
    return false;
  }
  for (int hops = 0; hops <= max_links; ++hops) {
    // The longest prefix that exists, canonical; the rest folded.
    auto r = fs::weakly_canonical(p, ec);
    if (ec) {
      why = ec.message();
      return false;
    }
    // Below that prefix nothing exists, unless its first component is a
    // dangling link (weakly_canonical takes it for a missing file).
    fs::path prefix;
    bool relinked = false;
    for (auto it = r.begin(); it != r.end(); ++it) {
      prefix /= *it;
      struct stat st {};
      if (::lstat(prefix.c_str(), &st) != 0)
        break;
      if (!S_ISLNK(st.st_mode))
        continue;
      auto target = fs::read_symlink(prefix, ec);
      if (ec) {
        why = ec.message();
        return false;
      }
      fs::path rest;
      for (++it; it != r.end(); ++it)
        rest /= *it;
      p = (target.is_absolute() ? target : prefix.parent_path() / target);
      if (!rest.empty())
        p /= rest;
      relinked = true;
      break;
    }
    if (!relinked) {
      out = std::move(r);
      return true;
    }
  }
  why = std::make_error_code(std::errc::too_many_symbolic_link_levels)
          .message();
  return false;
}

// True if `p` is `root` or below it (both canonical).
bool within(const fs::path& p, const fs::path& root) {
  auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  // A trailing empty component ("/data/") matches anything.
  return r == root.end() || (std::next(r) == root.end() && r->empty());
}

bool stat_of(const std::string& path, struct stat& st) {
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

const char* verb(file_access access) {
  return access == file_access::read ? "read" : "write";
}

} // namespace

status file_policy::set_roots(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const auto& root : roots) {
    auto bad = [&](const std::string& why) {
      return status{error_code::invalid_argument,
                    "file_roots: " + root + ": " + why};
    };
    if (root.empty())
      return bad("an empty directory name");
    std::error_code ec;
    auto p = fs::canonical(root, ec);
    if (ec)
      return bad(ec.message());
    if (!fs::is_directory(p, ec))
      return bad("not a directory");
    canonical.push_back(p.string());
  }
  roots_ = std::move(canonical);
  if (!roots_.empty())
    closed_.clear();
  return {};
}

void file_policy::close(std::string why) {
  closed_ = std::move(why);
}

void file_policy::deny(const std::string& path, const std::string& what) {
  denied_file entry;
  entry.path = path;
  entry.what = what;
  fs::path resolved;
  std::string why;
  if (resolve(path, resolved, why))
    entry.resolved = resolved.string();
  denied_.push_back(std::move(entry));
}

const file_policy::denied_file*
file_policy::denied_inode(unsigned long long dev,
                          unsigned long long ino) const {
  // The files as they are now: a certificate renewed by rename is the new
  // file (and the inode of a removed one may be reused by any other).
  for (const auto& entry : denied_) {
    struct stat st {};
    if (stat_of(entry.path, st) && st.st_dev == dev && st.st_ino == ino)
      return &entry;
  }
  return nullptr;
}

std::string file_policy::describe_roots() const {
  if (roots_.empty())
    return closed_.empty() ? "unrestricted: no --file_roots"
                           : "none: " + closed_;
  std::string text;
  for (const auto& root : roots_)
    text += (text.empty() ? "" : ", ") + root;
  return text;
}

status file_policy::check(const std::string& who, const std::string& path,
                          file_access access, std::string* resolved) const {
  if (resolved != nullptr)
    resolved->clear();
  // open("") fails (ENOENT) without touching a file.
  if (path.empty())
    return {};
  auto refuse = [&](const std::string& real, const std::string& why) {
    std::string named = "'" + path + "'";
    if (!real.empty() && real != path)
      named += " (that is, " + real + ")";
    return status{error_code::permission_denied,
                  who + " may not " + verb(access) + " " + named + ": " + why};
  };
  fs::path real;
  std::string why;
  if (!resolve(path, real, why)) {
    // Unrestricted, the open finds out (and check_opened still guards the
    // denied files); within roots, what cannot be resolved is not opened.
    if (!restricted())
      return {};
    return refuse("", "it cannot be resolved (" + why
                        + ") to check it is inside the file roots ("
                        + describe_roots() + ")");
  }
  auto real_text = real.string();
  auto denied = [&](const denied_file& entry) {
    return refuse(real_text, "it is " + entry.what
                               + ", which no op opens (file roots: "
                               + describe_roots() + ")");
  };
  for (const auto& entry : denied_)
    if (!entry.resolved.empty() && entry.resolved == real_text)
      return denied(entry);
  struct stat st {};
  if (stat_of(real_text, st))
    if (const auto* entry = denied_inode(st.st_dev, st.st_ino))
      return denied(*entry);
  if (restricted()) {
    bool inside = std::any_of(roots_.begin(), roots_.end(),
                              [&](const std::string& root) {
                                return within(real, fs::path{root});
                              });
    if (!inside)
      return refuse(real_text, "it is outside the file roots ("
                                 + describe_roots() + ")");
  }
  if (resolved != nullptr)
    *resolved = std::move(real_text);
  return {};
}

status file_policy::check_opened(const std::string& who,
                                 const std::string& path, int fd) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return {};
  if (const auto* entry = denied_inode(st.st_dev, st.st_ino))
    return {error_code::permission_denied,
            who + " may not open '" + path + "': it is " + entry->what
              + ", which no op opens (file roots: " + describe_roots()
              + ")"};
  return {};
}

namespace {

struct process_policy {
  std::shared_mutex mtx;
  file_policy policy;
  bool roots_set = false;
};

process_policy& the_policy() {
  // Never destroyed: reader threads may check during exit.
  static auto* instance = new process_policy;
  return *instance;
}

} // namespace

void set_file_roots(const std::vector<std::string>& roots) {
  auto& p = the_policy();
  std::unique_lock guard{p.mtx};
  if (p.roots_set)
    throw op_error(error_code::failed_precondition,
                   "file_roots: set already (" + p.policy.describe_roots()
                     + "); they are set once, at start");
  if (auto st = p.policy.set_roots(roots); !st.ok())
    throw op_error(st);
  p.roots_set = true;
}

void close_file_roots(const std::string& why) {
  auto& p = the_policy();
  std::unique_lock guard{p.mtx};
  if (!p.roots_set)
    p.policy.close(why);
}

void deny_file_access(const std::string& path, const std::string& what) {
  if (path.empty())
    return;
  auto& p = the_policy();
  std::unique_lock guard{p.mtx};
  p.policy.deny(path, what);
}

status check_file_access(const std::string& who, const std::string& path,
                         file_access access, std::string* resolved) {
  auto& p = the_policy();
  std::shared_lock guard{p.mtx};
  return p.policy.check(who, path, access, resolved);
}

status check_opened_file(const std::string& who, const std::string& path,
                         int fd) {
  auto& p = the_policy();
  std::shared_lock guard{p.mtx};
  return p.policy.check_opened(who, path, fd);
}

std::vector<std::string> file_roots() {
  auto& p = the_policy();
  std::shared_lock guard{p.mtx};
  return p.policy.roots();
}

} // namespace actorflow
