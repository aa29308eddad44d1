#pragma once

#include <string>
#include <vector>

#include "actorflow/graph/status.hpp"

/// Which files the ops of a process may open (issue 30 §3): the readers
/// (TextLineReader, FixedLengthRecordReader, WholeFileReader) and any op
/// that reads or writes files on a node check here before they open
/// anything. A policy has
///
/// - file roots: directories every file must resolve into (`..` and
///   symbolic links resolved, so neither leads out). No roots means
///   unrestricted, the default in plain mode (the seeds and existing
///   programs read and write files anywhere on their nodes); a server with
///   TLS closes the policy instead (close_file_roots): no file at all
///   until roots are named;
/// - denied files: the process's own TLS key, certificate, CA file and
///   configuration file, never opened by an op whatever the roots, under
///   any name: a symbolic or hard link to one (same device and inode) is
///   refused as well.
///
/// A refusal is PermissionDenied naming the op's node, the path (and what
/// it resolves to) and the roots. Without CAF: the kernels' and the apps'
/// unit of this check.
namespace actorflow {

enum class file_access {
  /// Opens an existing file.
  read,
  /// Creates or replaces a file: it may not exist yet, its directory is
  /// resolved.
  write,
};

class file_policy {
public:
  /// Unrestricted, nothing denied.
  file_policy() = default;

  /// Confines files to `roots` (each an existing directory; its canonical
  /// path is kept). InvalidArgument "file_roots: DIR: ..." for a root that
  /// does not exist or is not a directory; the policy is unchanged then.
  /// An empty list makes the policy unrestricted.
  status set_roots(const std::vector<std::string>& roots);

  /// The canonical roots; empty if unrestricted.
  const std::vector<std::string>& roots() const noexcept {
    return roots_;
  }

  /// Confines files to no directory at all until set_roots names some
  /// (a TLS node's default, issue 30 §3); `why` ends the roots' name in
  /// refusals ("none: WHY").
  void close(std::string why);

  bool restricted() const noexcept {
    return !roots().empty() || !closed_.empty();
  }

  /// Denies `path` to every op, `what` saying what it is in refusals
  /// ("the node's TLS key (--tls_key)"). The file need not exist yet; it
  /// is resolved again at each check, so a file renewed by rename stays
  /// denied.
  void deny(const std::string& path, const std::string& what);

  /// OK if `who` (an op's node, "WholeFileReader 'r'") may open `path`
  /// for `access`; else PermissionDenied "WHO may not read 'PATH' (that
  /// is, /resolved/path): it is outside the file roots (ROOTS)" or "...:
  /// it is the node's TLS key (--tls_key), which no op opens (file roots:
  /// ...)". `resolved`, if given, receives the path to open (symbolic
  /// links resolved).
  status check(const std::string& who, const std::string& path,
               file_access access, std::string* resolved = nullptr) const;

  /// After opening a checked path as `fd`: PermissionDenied if the open
  /// file is a denied one after all (a link swapped in between the check
  /// and the open).
  status check_opened(const std::string& who, const std::string& path,
                      int fd) const;

  /// The roots as refusals name them: "/data, /models", "unrestricted:
  /// no --file_roots", or "none: WHY" when closed.
  std::string describe_roots() const;

private:
  struct denied_file {
    std::string path;     // as given
    std::string resolved; // at registration
    std::string what;
  };

  /// The denied file whose `st_dev`/`st_ino` these are now, or nullptr.
  const denied_file* denied_inode(unsigned long long dev,
                                  unsigned long long ino) const;

  std::vector<std::string> roots_;
  std::string closed_;
  std::vector<denied_file> denied_;
};

// The process's policy: set once at start (the apps do it from
// --file_roots, --tls_* and --config-file; an application embedding
// actorflow calls these before it serves sessions).

/// Confines the ops of this process to `roots` (see file_policy). Throws
/// op_error: InvalidArgument "file_roots: DIR: ..." for a bad root,
/// FailedPrecondition if roots were set already (they cannot be widened
/// later).
void set_file_roots(const std::vector<std::string>& roots);

/// Unless roots were set, confines the ops of this process to no file at
/// all (file_policy::close): a server with TLS calls it, so that a client
/// certificate reads only what --file_roots names. set_file_roots may
/// still name roots later. Never throws.
void close_file_roots(const std::string& why);

/// Denies `path` to every op of this process (file_policy::deny).
void deny_file_access(const std::string& path, const std::string& what);

/// The process policy's check (file_policy::check).
status check_file_access(const std::string& who, const std::string& path,
                         file_access access,
                         std::string* resolved = nullptr);

/// The process policy's check_opened.
status check_opened_file(const std::string& who, const std::string& path,
                         int fd);

/// The process's canonical roots; empty if unrestricted.
std::vector<std::string> file_roots();

} // namespace actorflow
