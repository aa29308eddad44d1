// The files of a checkpoint (checkpoint_files.hpp), and the public
// functions that read the CheckpointState file (saver.hpp).

#include "checkpoint_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <system_error>

#include "actorflow/graph/text_util.hpp"
#include "actorflow/graph/wire.hpp"

namespace fs = std::filesystem;

namespace actorflow::checkpoint_files {

// -- errors ---------------------------------------------------------------------

[[noreturn]] void fail(error_code code, std::string msg) {
  throw op_error(code, std::move(msg));
}

[[noreturn]] void invalid(std::string msg) {
  fail(error_code::invalid_argument, std::move(msg));
}

/// A failed system call on `path`, with TF's mapping of errno to codes.
[[noreturn]] void fs_fail(const std::string& what, const std::string& path,
                          int err) {
  auto code = error_code::unknown;
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      code = error_code::permission_denied;
      break;
    case ENOSPC:
    case EDQUOT:
      code = error_code::resource_exhausted;
      break;
    case ENOENT:
      code = error_code::not_found;
      break;
    default:
      break;
  }
  fail(code, what + " " + path + ": " + std::strerror(err));
}

[[noreturn]] void data_loss(const std::string& file, const std::string& why) {
  fail(error_code::data_loss,
       "corrupt checkpoint file " + file + ": " + why);
}

// -- files ------------------------------------------------------------------------

uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

std::string hex16(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(x));
  return buf;
}

/// The directory of `path` ("" for a bare file name).
std::string dir_of(const std::string& path) {
  return fs::path(path).parent_path().string();
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty())
    return name;
  return (fs::path(dir) / name).string();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// fsync on a directory, so that renames in it survive a power loss.
/// Best effort: some filesystems refuse it.
void sync_dir(const std::string& dir) {
  auto name = dir.empty() ? std::string{"."} : dir;
  int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void) ::fsync(fd);
  ::close(fd);
}

/// Writes `contents` to "<path>.tmp<hex>", flushes it to disk and renames
/// it over `path`: readers see the old file or the new one, never a part.
void write_atomically(const std::string& path, std::string_view contents) {
  auto tmp = path + ".tmp" + hex16(random_u64());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    fs_fail("Failed to create", tmp, errno);
  auto abandon = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fs_fail(what, tmp, err);
  };
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    auto n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      abandon("Failed to write", errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0)
    abandon("Failed to sync", errno);
  if (::close(fd) != 0) {
    auto err = errno;
    ::unlink(tmp.c_str());
    fs_fail("Failed to close", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = errno;
    ::unlink(tmp.c_str());
    fs_fail("Failed to rename " + tmp + " to", path, err);
  }
}

/// The whole file; throws op_error naming it on failure.
std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fs_fail("Failed to open", path, errno);
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      auto err = errno;
      ::close(fd);
      fs_fail("Failed to read", path, err);
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// -- file framing -------------------------------------------------------------------

constexpr char frame_magic[4] = {'A', 'F', 'C', 'K'};
constexpr uint8_t frame_version = 1;
constexpr size_t frame_header_size = 40;

uint32_t crc32_of(std::string_view bytes) {
  auto crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    auto n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

std::string frame(const frame_info& info, std::string_view payload) {
  std::string out;
  byte_writer w{out};
  w.reserve(frame_header_size + payload.size());
  w.raw(frame_magic, sizeof frame_magic);
  w.u8(static_cast<uint8_t>(info.kind));
  w.u8(frame_version);
  w.u8(info.flags);
  w.u8(0);
  w.u64(info.id);
  w.u32(info.shard);
  w.u32(info.count);
  w.u64(payload.size());
  w.u32(crc32_of(payload));
  w.u32(crc32_of(std::string_view{out}.substr(0, 36)));
  w.raw(payload.data(), payload.size());
  return out;
}

std::string crc_text(uint32_t x) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", x);
  return buf;
}

std::string_view unframe(const std::string& file, std::string_view bytes,
                         char kind, frame_info& info) {
  if (bytes.size() < frame_header_size)
    data_loss(file, "truncated: " + std::to_string(bytes.size())
                      + " bytes, shorter than the "
                      + std::to_string(frame_header_size)
                      + "-byte header");
  byte_reader r{bytes};
  char magic[4];
  uint8_t k = 0;
  uint8_t version = 0;
  uint8_t reserved[2];
  uint64_t length = 0;
  uint32_t payload_crc = 0;
  uint32_t header_crc = 0;
  r.raw(magic, sizeof magic);
  r.u8(k);
  r.u8(version);
  r.raw(reserved, sizeof reserved);
  r.u64(info.id);
  r.u32(info.shard);
  r.u32(info.count);
  r.u64(length);
  r.u32(payload_crc);
  r.u32(header_crc);
  if (std::memcmp(magic, frame_magic, sizeof magic) != 0)
    data_loss(file, "not an actorflow checkpoint file (bad magic)");
  auto actual_header_crc = crc32_of(bytes.substr(0, 36));
  if (header_crc != actual_header_crc)
    data_loss(file, "header checksum does not match: stored "
                      + crc_text(header_crc) + " vs. calculated "
                      + crc_text(actual_header_crc));
  if (version != frame_version)
    data_loss(file, "unsupported format version " + std::to_string(version));
  if (static_cast<char>(k) != kind)
    data_loss(file, std::string{"expected a"}
                      + (kind == kind_index ? "n index" : " data shard")
                      + " file, found kind '"
                      + std::string(1, static_cast<char>(k)) + "'");
  auto available = bytes.size() - frame_header_size;
  if (length > available)
    data_loss(file, "truncated: payload of " + std::to_string(length)
                      + " bytes, " + std::to_string(available)
                      + " present");
  if (length < available)
    data_loss(file, std::to_string(available - length)
                      + " trailing bytes after the payload");
  auto payload = bytes.substr(frame_header_size);
  auto actual_crc = crc32_of(payload);
  if (payload_crc != actual_crc)
    data_loss(file, "checksum does not match: stored " + crc_text(payload_crc)
                      + " vs. calculated on the restored bytes "
                      + crc_text(actual_crc));
  info.kind = static_cast<char>(k);
  info.flags = reserved[0];
  return payload;
}

bool peek_frame(const std::string& file, frame_info& info) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[frame_header_size];
  size_t got = 0;
  while (got < sizeof buf) {
    auto n = ::read(fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got < sizeof buf)
    return false;
  std::string_view bytes{buf, sizeof buf};
  if (bytes.substr(0, 4) != std::string_view{frame_magic, sizeof frame_magic}
      || static_cast<uint8_t>(bytes[5]) != frame_version)
    return false;
  byte_reader r{bytes};
  char skip[4];
  uint8_t k = 0;
  uint8_t version = 0;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint64_t length = 0;
  uint32_t payload_crc = 0;
  uint32_t header_crc = 0;
  r.raw(skip, sizeof skip);
  r.u8(k);
  r.u8(version);
  r.u8(flags);
  r.u8(reserved);
  r.u64(info.id);
  r.u32(info.shard);
  r.u32(info.count);
  r.u64(length);
  r.u32(payload_crc);
  r.u32(header_crc);
  if (header_crc != crc32_of(bytes.substr(0, 36)))
    return false;
  info.kind = static_cast<char>(k);
  info.flags = flags;
  return true;
}

// -- checkpoint files -------------------------------------------------------------

std::string five_digits(uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%05u", x);
  return buf;
}

std::string data_file(const std::string& prefix, uint32_t shard,
                      uint32_t count) {
  return prefix + ".data-" + five_digits(shard) + "-of-"
         + five_digits(count);
}

std::string data_file(const std::string& prefix, uint32_t shard,
                      uint32_t count, uint64_t id) {
  return data_file(prefix, shard, count) + "." + hex16(id);
}

namespace {

bool all_digits(std::string_view s, bool hex) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [hex](char c) {
    return (c >= '0' && c <= '9') || (hex && c >= 'a' && c <= 'f');
  });
}

/// The directory's regular files' names ("." for "").
std::vector<std::string> file_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it{dir.empty() ? fs::path{"."} : fs::path{dir},
                                 ec},
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec))
      names.push_back(it->path().filename().string());
  }
  return names;
}

} // namespace

bool parse_data_file(std::string_view name, std::string_view base,
                     data_file_name& out) {
  auto head = std::string{base} + ".data-";
  // NNNNN-of-MMMMM, then nothing or "." and 16 hex digits.
  if (name.size() < head.size() + 14 || name.substr(0, head.size()) != head)
    return false;
  auto rest = name.substr(head.size());
  if (!all_digits(rest.substr(0, 5), false) || rest.substr(5, 4) != "-of-"
      || !all_digits(rest.substr(9, 5), false))
    return false;
  auto tail = rest.substr(14);
  data_file_name f;
  if (!tail.empty()) {
    if (tail.size() != 17 || tail[0] != '.' || !all_digits(tail.substr(1), true))
      return false;
    f.has_id = true;
    f.id = std::stoull(std::string{tail.substr(1)}, nullptr, 16);
  }
  f.shard = static_cast<uint32_t>(std::stoul(std::string{rest.substr(0, 5)}));
  f.count = static_cast<uint32_t>(std::stoul(std::string{rest.substr(9, 5)}));
  out = f;
  return true;
}

void remove_data_files(const std::string& prefix,
                       const std::function<bool(const data_file_name&)>& pred) {
  auto dir = dir_of(prefix);
  auto base = fs::path(prefix).filename().string();
  std::error_code ec;
  for (auto& name : file_names(dir)) {
    data_file_name f;
    if (parse_data_file(name, base, f) && pred(f))
      fs::remove(join(dir, name), ec);
  }
}

/// TF's remove_checkpoint: the index first (so the checkpoint stops being
/// valid at once), then the shards.
void remove_checkpoint(const std::string& prefix) {
  std::error_code ec;
  fs::remove(prefix + ".index", ec);
  remove_data_files(prefix, [](const data_file_name&) { return true; });
}

std::vector<std::string> remove_leftovers(const std::string& dir) {
  auto names = file_names(dir);
  std::vector<std::string> doomed;
  // What a data file name's base is: the name up to ".data-".
  auto data_base = [](const std::string& name, data_file_name& f) {
    auto at = name.rfind(".data-");
    if (at == std::string::npos || at == 0
        || !parse_data_file(name, std::string_view{name}.substr(0, at), f))
      return std::string{};
    return name.substr(0, at);
  };
  // Temporary files: "<file>.tmp<16 hex digits>" of the state file, an
  // index or a data file.
  for (auto& name : names) {
    auto at = name.rfind(".tmp");
    if (at == std::string::npos || name.size() != at + 4 + 16
        || !all_digits(std::string_view{name}.substr(at + 4), true))
      continue;
    auto file = name.substr(0, at);
    data_file_name f;
    if (file == "checkpoint" || (file.size() > 6 && file.ends_with(".index"))
        || !data_base(file, f).empty())
      doomed.push_back(name);
  }
  // Data files no index refers to: without an index, of another save than
  // the index's (its id), or named otherwise than the index says. Shards
  // of an index that cannot be read, and shards whose own header cannot
  // be read, stay (restore reports them).
  std::map<std::string, std::optional<frame_info>> indexes;
  for (auto& name : names) {
    data_file_name f;
    auto base = data_base(name, f);
    if (base.empty())
      continue;
    auto it = indexes.find(base);
    if (it == indexes.end()) {
      std::optional<frame_info> index;
      auto index_file = join(dir, base + ".index");
      frame_info info;
      if (!file_exists(index_file))
        index = frame_info{}; // kind 0: no index
      else if (peek_frame(index_file, info) && info.kind == kind_index)
        index = info;
      it = indexes.emplace(base, index).first;
    }
    auto& index = it->second;
    if (!index)
      continue;
    bool orphan = false;
    if (index->kind == 0) {
      orphan = true;
    } else if ((index->flags & flag_named_shards) != 0) {
      orphan = !f.has_id || f.id != index->id;
    } else if (f.has_id) {
      orphan = true;
    } else {
      frame_info shard;
      orphan = peek_frame(join(dir, name), shard) && shard.id != index->id;
    }
    if (orphan)
      doomed.push_back(name);
  }
  std::vector<std::string> removed;
  for (auto& name : doomed) {
    auto path = join(dir, name);
    std::error_code ec;
    if (fs::remove(path, ec))
      removed.push_back(std::move(path));
  }
  return removed;
}

// -- the CheckpointState text file ---------------------------------------------------

std::string state_text(const checkpoint_state& st) {
  std::string out = "model_checkpoint_path: \""
                    + c_escape(st.model_checkpoint_path) + "\"\n";
  for (auto& p : st.all_model_checkpoint_paths)
    out += "all_model_checkpoint_paths: \"" + c_escape(p) + "\"\n";
  return out;
}

/// A parser for the text format of CheckpointState, as TF's text_format
/// reads it: `field: "string"` pairs (adjacent string literals concatenate,
/// single quotes allowed, C escapes), `#` comments, and the numeric
/// timestamp fields of newer releases (ignored). False for anything else.
class state_parser {
public:
  explicit state_parser(std::string_view text) : s_(text) {
  }

  bool parse(checkpoint_state& st) {
    for (;;) {
      skip_space();
      if (pos_ == s_.size())
        return true;
      auto name = identifier();
      skip_space();
      if (name.empty() || !eat(':'))
        return false;
      skip_space();
      if (name == "model_checkpoint_path") {
        if (!string_value(st.model_checkpoint_path))
          return false;
      } else if (name == "all_model_checkpoint_paths") {
        std::string p;
        if (!string_value(p))
          return false;
        st.all_model_checkpoint_paths.push_back(std::move(p));
      } else if (name == "all_model_checkpoint_timestamps"
                 || name == "last_preserved_timestamp") {
        if (!number())
          return false;
      } else {
        return false;
      }
      skip_space();
      if (pos_ < s_.size() && (s_[pos_] == ',' || s_[pos_] == ';'))
        ++pos_;
    }
  }

private:
  void skip_space() {
    while (pos_ < s_.size()) {
      auto c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n')
          ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r'
                 || c == '\f' || c == '\v') {
        ++pos_;
      } else {
        return;
      }
    }
  }

  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  std::string identifier() {
    auto start = pos_;
    while (pos_ < s_.size()
           && (std::isalnum(static_cast<unsigned char>(s_[pos_]))
               || s_[pos_] == '_'))
      ++pos_;
    return std::string{s_.substr(start, pos_ - start)};
  }

  bool number() {
    auto start = pos_;
    while (pos_ < s_.size()
           && (std::isalnum(static_cast<unsigned char>(s_[pos_]))
               || s_[pos_] == '.' || s_[pos_] == '-' || s_[pos_] == '+'))
      ++pos_;
    return pos_ > start;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }

  // One or more adjacent string literals.
  bool string_value(std::string& out) {
    out.clear();
    bool any = false;
    for (;;) {
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\''))
        return any;
      if (!literal(out))
        return false;
      any = true;
      auto save = pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        pos_ = save;
        return true;
      }
    }
  }

  bool literal(std::string& out) {
    auto quote = s_[pos_++];
    while (pos_ < s_.size()) {
      auto c = s_[pos_++];
      if (c == quote)
        return true;
      if (c == '\n')
        return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size())
        return false;
      auto e = s_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
        case '?':
          out += e;
          break;
        case 'x': {
          int v = 0;
          int n = 0;
          while (n < 2 && pos_ < s_.size() && hex_digit(s_[pos_]) >= 0) {
            v = v * 16 + hex_digit(s_[pos_++]);
            ++n;
          }
          if (n == 0)
            return false;
          out += static_cast<char>(v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            int n = 1;
            while (n < 3 && pos_ < s_.size() && s_[pos_] >= '0'
                   && s_[pos_] <= '7') {
              v = v * 8 + (s_[pos_++] - '0');
              ++n;
            }
            out += static_cast<char>(v);
          } else {
            return false;
          }
      }
    }
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

/// os.path.relpath(p, dir) for the state file; `p` itself if that fails.
std::string relative_to(const std::string& p, const std::string& dir) {
  auto base = dir.empty() ? fs::path{"."} : fs::path{dir};
  auto rel = fs::path(p).lexically_normal().lexically_relative(
    base.lexically_normal());
  return rel.empty() ? p : rel.string();
}

/// TF's update_checkpoint_state_internal (plus
/// generate_checkpoint_state_proto) for `save_dir`.
void update_checkpoint_state(const std::string& save_dir,
                             std::string model_path,
                             std::vector<std::string> all_paths,
                             bool save_relative_paths) {
  if (all_paths.empty() || all_paths.back() != model_path)
    all_paths.push_back(model_path);
  auto dir_relative = !fs::path(save_dir).is_absolute();
  auto fix = [&](std::string& p) {
    auto abs = fs::path(p).is_absolute();
    if ((abs && save_relative_paths) || (!abs && dir_relative))
      p = relative_to(p, save_dir);
  };
  fix(model_path);
  for (auto& p : all_paths)
    fix(p);
  checkpoint_state st{std::move(model_path), std::move(all_paths)};
  write_atomically(join(save_dir, "checkpoint"), state_text(st));
  sync_dir(save_dir);
}

/// Shard key of a variable: the job, replica and task of its device (one
/// file per process); "" when it has none.

} // namespace actorflow::checkpoint_files

namespace actorflow {

using namespace checkpoint_files;

// -- free functions -----------------------------------------------------------------

std::optional<checkpoint_state>
get_checkpoint_state(const std::string& checkpoint_dir) {
  auto file = join(checkpoint_dir, "checkpoint");
  if (!file_exists(file))
    return std::nullopt;
  std::string text;
  try {
    text = read_file(file);
  } catch (const op_error&) {
    return std::nullopt;
  }
  checkpoint_state st;
  if (!state_parser{text}.parse(st) || st.model_checkpoint_path.empty())
    return std::nullopt;
  auto absolutize = [&](std::string& p) {
    if (!fs::path(p).is_absolute())
      p = join(checkpoint_dir, p);
  };
  absolutize(st.model_checkpoint_path);
  for (auto& p : st.all_model_checkpoint_paths)
    absolutize(p);
  return st;
}

std::string latest_checkpoint(const std::string& checkpoint_dir) {
  auto st = get_checkpoint_state(checkpoint_dir);
  if (!st || !checkpoint_exists(st->model_checkpoint_path))
    return {};
  return st->model_checkpoint_path;
}

bool checkpoint_exists(const std::string& path) {
  return !path.empty() && file_exists(path + ".index");
}

std::vector<std::string>
remove_checkpoint_leftovers(const std::string& checkpoint_dir) {
  return remove_leftovers(checkpoint_dir);
}

} // namespace actorflow
